"""What the simulated compiler does with a traced kernel, whichever route reached it: the simulated
NKI frontend (which compiles in the tracing call, as the real one does) or the stand-in
`neuronx-cc compile` of a legacy penguin.py.

It refuses what the real compiler refuses (`diagnose`: the `[NCC_...]` diagnostics), takes the
modelled compile time, and writes the NEFF in the real container shape (kernelsweep.toolchain.neff): a gzipped
tar whose sg00/def.json names the NEFF's inputs and outputs. The outputs carry the names the caller
gave and otherwise `output_0`, `output_1`, ..., as a frontend-compiled NEFF does (reference
Corrections 1); the simulated runtime saves outputs under exactly those names.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kernelsweep.platforms import PLATFORMS
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.latency import COMPILE, emulate, ir_point_key
from kernelsweep.sim.model import compile_seconds
from kernelsweep.sim.sdk_tuning import sdk_code_factor
from kernelsweep.toolchain.neff import write_neff

INJECTED = "injected by KERNELSWEEP_SIM_FAULTS"
DEBUG_INFO_FILE = "kernel_debug_info.json"
PAGE_BYTES = 4096


def scalar_inputs(names: Sequence[str]) -> str | None:
    """What the compiler says to 0-d inputs ("neuronxcc cannot handle 0-d tensor inputs", the reason
    awslabs/nki-autotune inlines a kernel's scalars before compiling: runner/compile.py @ d57bcc3),
    or None when there are none. The words are AWS Labs'; no public log shows the compiler's own."""
    if not names:
        return None
    return f"neuronxcc cannot handle 0-d tensor inputs: {', '.join(names)} (bind scalars into the kernel)"


def diagnose(ir: dict, target: str, lnc: int | None, config: SimConfig) -> str | None:
    """The compiler's diagnostic for this kernel, or None when it compiles."""
    scalars = scalar_inputs([t["name"] for t in ir["inputs"] if not t["shape"]])
    if scalars:
        return scalars
    if lnc == 2 and not target.startswith(("trn2", "trn3")):
        return f"[NCC_EARG001] --lnc 2 is not supported for target {target}"
    kernel_lnc = ir.get("kernel_lnc")
    if ir.get("nki_generation") == "0.7" and lnc is not None and kernel_lnc != lnc:  # addendum F10
        return (
            f"[NCC_EVRF066] NKI kernel '{ir['kernel']}' is configured with LNC={kernel_lnc}, "
            f"but neuronx-cc is using LNC={lnc}"
        )
    platform = PLATFORMS[ir["platform"]]
    total_bytes = sum(t["bytes"] for t in ir["inputs"] + ir["outputs"])
    if total_bytes > platform.hbm_bytes_per_chip:
        return "[NCC_EVRF009] Size of total input and output tensors exceeds HBM limit"
    if lnc == 2 and ir["kernel"] in config.faults.lnc2_compile_errors:
        return f"[NCC_IXLV002] Core barrier name mismatch between the logical core's physical cores ({INJECTED})"
    if ir["kernel"] in config.faults.compile_errors:
        return f"[NCC_EVRF009] Size of total input and output tensors exceeds HBM limit ({INJECTED})"
    return None


def allocation(ir: dict, config: SimConfig) -> None:
    """NKI's allocator falling back to neuronx-cc's (KERNELSWEEP_SIM_FAULTS alloc-fallback=K): a line on
    fd 2, where the compiler's words go. Its wording is the SDK's description of the setting (NKI 0.7
    CompileConfig.nki_alloc_fallback); no public log shows the compiler's own."""
    if ir["kernel"] in config.faults.alloc_fallbacks:
        os.write(2, f"WARNING: NKI LinearScanAllocation failed for '{ir['kernel']}'; falling back to the default "
                    f"neuronx-cc allocation flow ({INJECTED})\n".encode())  # fmt: skip


def emulate_compile_time(ir: dict, config: SimConfig) -> None:
    """Hold the configured compile memory (KERNELSWEEP_SIM_COMPILE_MEMORY) while sleeping the modelled
    compile time (scaled), recording it in the state dir (sim.latency). The memory is written, page by
    page, so it is resident (what a host runs out of), not merely reserved."""
    held = bytearray(config.compile_memory_bytes)
    held[::PAGE_BYTES] = b"\1" * len(range(0, len(held), PAGE_BYTES))
    emulate(config.state_dir, COMPILE, ir_point_key(ir), compile_seconds(ir["flops"]), config.time_scale)
    del held


def debug_info_requested() -> bool:
    """NKI_DEBUG_INFO=True before compiling, as the SDK reads it (Explorer glossary)."""
    return os.environ.get("NKI_DEBUG_INFO", "").lower() in ("true", "1")


def debug_info(ir: dict) -> dict:
    """kernel_debug_info.json: each instruction group of the program mapped to its kernel source
    line (the file's base name, as profiles print `nki_source_location`)."""
    return {
        "file": Path(ir["source_file"]).name,
        "instructions": [{"line": line, "engine": engine, "count": count} for line, engine, count, _ in ir["lines"]],
    }


def write_sim_neff(
    path: Path,
    ir: dict,
    target: str,
    lnc: int,
    output_names: Sequence[str] | None,
    config: SimConfig,
    with_debug_info: bool = False,
) -> Path:
    """The configured compiler version goes into the NEFF, and with it any slowdown of the code it
    emits (sim.config's COMPILER_SLOWDOWN): the profiler's model applies it whenever this NEFF runs.
    `with_debug_info` adds kernel_debug_info.json, which the simulated view reads, as Explorer does."""
    version = config.compiler_version
    factor = config.slowdown(ir["kernel"], ir["params"])
    factor *= sdk_code_factor(version, ir["kernel"], ir["params"], ir.get("tunables", {}))
    built = {**ir, "compiler_version": version} | ({"code_factor": factor} if factor != 1.0 else {})
    names = list(output_names) if output_names else [f"output_{i}" for i in range(len(ir["outputs"]))]
    if len(names) != len(ir["outputs"]):
        raise ValueError(f"{len(names)} output names for {len(ir['outputs'])} outputs")
    variables = {t["name"]: {"type": "input", "shape": t["shape"], "dtype": t["dtype"]} for t in ir["inputs"]}
    variables |= {
        name: {"type": "output", "shape": t["shape"], "dtype": t["dtype"]}
        for name, t in zip(names, ir["outputs"], strict=True)
    }
    write_neff(
        path,
        name=ir["kernel"],
        info={"tool_version": version, "num_tpb": lnc, "target": target, "is_simulation": True},
        neff={"kernelsweep_sim": built},
        variables=variables,
        build_version=version,
        extra={DEBUG_INFO_FILE: debug_info(ir)} if with_debug_info and ir.get("lines") else None,
    )
    return path
