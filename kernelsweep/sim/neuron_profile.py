"""Stand-in `neuron-profile` / `neuron-explorer`: `capture` on a simulated exclusive core, `view`.

capture honours -n, -s, --num-exec, --profile-nth-exec, --save-output and NAME FILE input pairs,
runs the kernel's numpy reference in the kernel's dtype to produce the outputs, and writes NTFFs
under the real names. Like the runtime, it takes every visible core for the whole process and
fails with the NRT busy error when another process holds one.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from kernelsweep.dtypes import numpy_dtype
from kernelsweep.kernels import load_kernel
from kernelsweep.locks import parse_visible_cores
from kernelsweep.neff import NeffFormatError, read_neff
from kernelsweep.platforms import PLATFORMS
from kernelsweep.sim import COMPILER_VERSION, PROFILER_VERSION, RUNTIME_VERSION
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.model import Workload, predict, summary
from kernelsweep.sim.ntff import read_ntff, write_ntff

LOAD_SECONDS = 1.0  # emulated NEFF load + runtime init per capture
EXIT_FAILED = 1


class RuntimeFailure(Exception):
    pass


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--version", action="store_true")
    sub = parser.add_subparsers(dest="command")
    cap = sub.add_parser("capture")
    cap.add_argument("-n", "--neff", required=True)
    cap.add_argument("-s", "--session-file", default="profile.ntff")
    cap.add_argument("--num-exec", type=int, default=1)
    cap.add_argument("--profile-nth-exec", type=int)
    cap.add_argument("--save-output", action="store_true")
    cap.add_argument("--save-output-npy", action="store_true")
    cap.add_argument("--ignore-exec-errors", action="store_true")
    cap.add_argument("--check-output-determinism", action="store_true")
    cap.add_argument("-r", dest="workers", type=int, default=1)
    cap.add_argument("inputs", nargs="*", metavar="NAME FILE")
    view = sub.add_parser("view")
    view.add_argument("-n", "--neff", required=True)
    view.add_argument("-s", "--session-file", required=True)
    view.add_argument("--output-format", default="summary-text", choices=("json", "summary-json", "summary-text"))
    view.add_argument("--output-file")
    return parser


def _visible_cores(config: SimConfig) -> list[int]:
    value = os.environ.get("NEURON_RT_VISIBLE_CORES")
    if not value:
        return list(range(config.cores))
    cores = parse_visible_cores(value)
    if any(c >= config.cores for c in cores):
        raise RuntimeFailure(f"TDRV:tdrv_get_dev_info No neuron device available for cores {value}")
    return cores


def _hold_cores(stack: ExitStack, config: SimConfig, cores: list[int]) -> None:
    """Take every requested core for this process's lifetime, as the Neuron runtime does."""
    runtime_dir = config.state_dir / "runtime"
    runtime_dir.mkdir(parents=True, exist_ok=True)
    for core in cores:
        handle = stack.enter_context(open(runtime_dir / f"nc{core}.lock", "a+"))
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeFailure(
                "ERROR   NRT:nrt_allocate_neuron_cores               NeuronCore(s) not available - "
                f"Requested:nc{core}-nc{core} Available:0\nnrt_init failed. Status = 1"
            ) from None


def _load_inputs(pairs: list[str], ir: dict) -> dict[str, np.ndarray]:
    if len(pairs) % 2:
        raise RuntimeFailure(f"inputs must be NAME FILE pairs; got {len(pairs)} values")
    given = dict(zip(pairs[::2], pairs[1::2], strict=True))
    expected = {t["name"]: t for t in ir["inputs"]}
    if set(given) != set(expected):
        raise RuntimeFailure(
            f"NRT_EXEC_BAD_INPUT: inputs {sorted(given)} do not match the NEFF's inputs {sorted(expected)}"
        )
    arrays = {}
    for name, file in given.items():
        spec = expected[name]
        data = Path(file).read_bytes()
        if len(data) != spec["bytes"]:
            raise RuntimeFailure(f"NRT_EXEC_BAD_INPUT: {name} has {len(data)} bytes, NEFF expects {spec['bytes']}")
        arrays[name] = np.frombuffer(data, dtype=numpy_dtype(spec["dtype"])).reshape(spec["shape"])
    return arrays


def _run_kernel(ir: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The device's result: the reference evaluated, then rounded to the output dtype."""
    outputs = load_kernel(ir["kernel_ref"]).reference(inputs, ir["params"])
    return {t["name"]: outputs[t["name"]].astype(numpy_dtype(t["dtype"])) for t in ir["outputs"]}


def _ntff_names(session: str, num_exec: int, nth: int | None) -> list[tuple[int, str]]:
    stem = session.removesuffix(".ntff")
    if num_exec == 1:
        return [(1, session)]
    if nth is not None:
        return [(nth, f"{stem}_exec_{nth}.ntff")]
    return [(1, session)] + [(i, f"{stem}_exec_{i}.ntff") for i in range(2, num_exec + 1)]


def _workload(ir: dict) -> Workload:
    return Workload(
        platform=PLATFORMS[ir["platform"]],
        lnc=ir["lnc"],
        dtype=ir["dtype"],
        flops=ir["flops"],
        hbm_bytes=ir["hbm_bytes"],
        input_bytes=sum(t["bytes"] for t in ir["inputs"]),
        output_bytes=sum(t["bytes"] for t in ir["outputs"]),
        dma_transfers=ir["dma_transfers"],
        engine=ir["engine"],
    )


def capture(args: argparse.Namespace, config: SimConfig) -> int:
    if args.profile_nth_exec is not None and not 1 <= args.profile_nth_exec <= args.num_exec:
        raise RuntimeFailure(f"--profile-nth-exec={args.profile_nth_exec} is outside 1..{args.num_exec}")
    try:
        neff = read_neff(Path(args.neff))
    except (OSError, NeffFormatError) as exc:
        raise RuntimeFailure(f"NRT_UNSUPPORTED_NEFF_VERSION: cannot load {args.neff}: {exc}") from None
    ir = neff.neff.get("kernelsweep_sim")
    if ir is None:
        raise RuntimeFailure("NRT_UNSUPPORTED_NEFF_VERSION: the simulator runs only NEFFs it compiled")
    with ExitStack() as stack:
        _hold_cores(stack, config, _visible_cores(config))
        inputs = _load_inputs(args.inputs, ir)
        outputs = _run_kernel(ir, inputs)
        if args.check_output_determinism and any(
            not np.array_equal(a, b) for a, b in zip(outputs.values(), _run_kernel(ir, inputs).values(), strict=True)
        ):
            raise RuntimeFailure("output determinism check failed")
        per_exec = predict(_workload(ir)).total
        time.sleep((LOAD_SECONDS + args.num_exec * per_exec) * config.time_scale)
        run_key = hashlib.sha256(Path(args.neff).read_bytes() + repr(args.inputs).encode()).hexdigest()
        for index, name in _ntff_names(args.session_file, args.num_exec, args.profile_nth_exec):
            write_ntff(Path(name), {"exec_index": index, "run_key": run_key, "ir": ir})
        if args.save_output or args.save_output_npy:
            _save_outputs(outputs, npy=args.save_output_npy)
    print(
        f"Profile captured: {args.num_exec} executions on NeuronCore(s) {os.environ.get('NEURON_RT_VISIBLE_CORES', 'all')} (simulated)"
    )
    return 0


def _save_outputs(outputs: dict[str, np.ndarray], npy: bool) -> None:
    for name, array in outputs.items():
        if npy:
            if array.dtype.name == "bfloat16":
                raise RuntimeFailure("--save-output-npy does not support bfloat16 outputs; use --save-output")
            file = f"{name}.npy"
            np.save(file, array)
        else:
            file = name
            Path(file).write_bytes(array.tobytes())
        print(f'saved output "{name}" as "{file}"')


def view(args: argparse.Namespace) -> int:
    try:
        record = read_ntff(Path(args.session_file))
    except (OSError, ValueError) as exc:
        raise RuntimeFailure(str(exc)) from None
    workload = _workload(record["ir"])
    timing = predict(workload, jitter_key=f"{record['run_key']}:{record['exec_index']}")
    fields = summary(workload, timing)
    info = {
        "instance_type": f"{workload.platform.name}.sim",
        "compiler_version": COMPILER_VERSION,
        "runtime_version": RUNTIME_VERSION,
        "profiler_version": PROFILER_VERSION,
        "is_simulation": True,
    }
    if args.output_format == "json":
        doc = {"summary": [{**fields, **info}], "instruction": _instructions(record, timing.total)}
        text = json.dumps(doc)
    elif args.output_format == "summary-json":
        fractions = {k: (v / 100 if k.endswith("_percent") else v) for k, v in fields.items()}
        text = json.dumps({f"n_{record['run_key'][:16]}": {**fractions, **info}}, indent=1)
    else:
        text = "\n".join(f"{k:<45} {v}" for k, v in {**fields, **info}.items())
    if args.output_file:
        Path(args.output_file).write_text(text)
    else:
        print(text)
    return 0


def _instructions(record: dict, total_seconds: float) -> list[dict]:
    count = record["ir"]["dma_transfers"]
    step = int(total_seconds * 1e9 / max(count, 1))
    return [
        {
            "timestamp": i * step,
            "duration": step // 2,
            "label": "qSyncIO",
            "opcode": "DMA",
            "hlo_name": record["ir"]["kernel"],
            "nki_source_location": f"{record['ir']['kernel']}.py:{i + 1}",
        }
        for i in range(count)
    ]


def main(argv: list[str] | None = None, prog: str = "neuron-profile") -> int:
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.version:
        print(f"{parser.prog} {PROFILER_VERSION}")
        return 0
    try:
        if args.command == "capture":
            return capture(args, SimConfig.from_env())
        if args.command == "view":
            return view(args)
    except RuntimeFailure as exc:
        print(f"ERROR   {exc}", file=sys.stderr)
        return EXIT_FAILED
    parser.print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
