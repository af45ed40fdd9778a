"""The simulated device's execution: input files in, the kernel's numpy reference out.

Split from sim.capture so that numpy is imported only by a capture that runs the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from kernelsweep.dtypes import numpy_dtype
from kernelsweep.kernels import load_kernel


def load_inputs(
    pairs: list[str], ir: dict, failure: type[Exception], nrt: Callable[[str, str], str]
) -> dict[str, np.ndarray]:
    if len(pairs) % 2:
        raise failure(nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: inputs must be NAME FILE pairs ({len(pairs)})"))
    given = dict(zip(pairs[::2], pairs[1::2], strict=True))
    expected = {t["name"]: t for t in ir["inputs"]}
    if set(given) != set(expected):
        raise failure(
            nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: inputs {sorted(given)} are not the NEFF's {sorted(expected)}")
        )
    arrays = {}
    for name, file in given.items():
        spec = expected[name]
        data = Path(file).read_bytes()
        if len(data) != spec["bytes"]:
            raise failure(
                nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: {name} has {len(data)} bytes, expected {spec['bytes']}")
            )
        arrays[name] = np.frombuffer(data, dtype=numpy_dtype(spec["dtype"])).reshape(spec["shape"])
    return arrays


def run_kernel(ir: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The device's result: the reference evaluated, then rounded to the output dtype."""
    outputs = load_kernel(ir["kernel_ref"]).reference(inputs, ir["params"])
    return {t["name"]: outputs[t["name"]].astype(numpy_dtype(t["dtype"])) for t in ir["outputs"]}


def zeroed(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of a kernel that ran and wrote nothing (the zeros fault)."""
    return {name: np.zeros_like(array) for name, array in outputs.items()}


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a.values(), b.values(), strict=True))


def save_outputs(outputs: dict[str, np.ndarray], npy: bool, failure: type[Exception]) -> Iterator[str]:
    """Write each output in the working folder under its NEFF name; yield the runtime's announcement."""
    for name, array in outputs.items():
        if npy:
            if array.dtype.name == "bfloat16":
                raise failure("--save-output-npy does not support bfloat16 outputs; use --save-output")
            file = f"{name}.npy"
            np.save(file, array)
        else:
            file = name
            Path(file).write_bytes(array.tobytes())
        yield f'saved output "{name}" as "{file}"'
