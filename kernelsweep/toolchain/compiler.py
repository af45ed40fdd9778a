"""`neuronx-cc`: compile a legacy-traced kernel (penguin.py) to a NEFF, and report the compiler version.

Only the legacy route (SDK <= 2.26, `neuronxcc.nki` kernels) runs the compiler as a command; current
NKI compiles inside the tracing call (kernelsweep.toolchain.tracing.tracers).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kernelsweep import names
from kernelsweep.errors import CompileError
from kernelsweep.toolchain.failures import compile_failure
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

_VERSION = re.compile(r"NeuronX Compiler version\s+(\S+)")


FLAGS = ("--internal-tensorizer-opt-level=nki", "--pipeline", "compile", "SaveTemps")


def compile_options(target: str, lnc: int | None) -> str:
    """What a row records of a `neuronx-cc compile` (JSON, no paths): the numbers depend on it."""
    return json.dumps({"flags": list(FLAGS), "lnc": lnc, "target": target}, sort_keys=True)


def compile_argv(toolchain: Toolchain, ir_file: str, target: str, lnc: int | None) -> list[str]:
    """As `nki.baremetal` runs it (reference Corrections 2), with seed 000's `--lnc` on trn2:
    `neuronx-cc compile --framework XLA penguin.py --internal-tensorizer-opt-level=nki
    --pipeline compile SaveTemps --target trn2 [--lnc 2] --output=file.neff`."""
    argv = toolchain.command("neuronx-cc") + ["compile", "--framework", "XLA", ir_file]
    argv += [*FLAGS, "--target", target]
    if lnc is not None:  # only trn2/trn3 take --lnc; on trn1 it is an NCC_EARG001 error
        argv += ["--lnc", str(lnc)]
    return argv + [f"--output={names.NEFF}"]


def compile_ir(
    toolchain: Toolchain, ir_path: Path, workdir: Path, target: str, lnc: int | None, timeout_seconds: float
) -> Path:
    """Compile in `workdir` (penguin.py and its weights folder) and return the NEFF path; CompileError
    carries the tool's diagnostics."""
    argv = compile_argv(toolchain, ir_path.name, target, lnc)
    result = run_tool(argv, cwd=workdir, env=toolchain.env, timeout_seconds=timeout_seconds)
    if result.timed_out or result.returncode != 0:
        raise compile_failure(result, timeout_seconds)
    neff = workdir / names.NEFF
    if not neff.is_file():
        raise CompileError(
            f"neuronx-cc exited 0 but wrote no {names.NEFF}",
            error_class="MissingOutput",
            argv=argv,
            stderr_tail=result.output,
        )
    return neff


def parse_compiler_version(output: str) -> str | None:
    """`NeuronX Compiler version 2.14.227.0+2d4f85be` (the first line of `neuronx-cc --version`)."""
    match = _VERSION.search(output)
    return match.group(1) if match else None


def compiler_version(toolchain: Toolchain, timeout_seconds: float = 60) -> str | None:
    result = run_tool(
        toolchain.command("neuronx-cc") + ["--version"], env=toolchain.env, timeout_seconds=timeout_seconds
    )
    return parse_compiler_version(result.output) if result.returncode == 0 else None
