"""Stand-in `neuronx-cc`: `--version`, and `compile` of a simulated legacy penguin.py into a NEFF.

Only the legacy route (SDK <= 2.26) runs the compiler as a command: current NKI compiles inside the
tracing call (sim.tracer). It takes the command line `nki.baremetal` runs (reference Corrections 2):
`--internal-tensorizer-opt-level=nki` is required for a penguin.py (inferred: the flag is what tells
the compiler its input is NKI-traced penguin IR), `--pipeline compile SaveTemps` and `--output`, and
it reads the IR's weights folder next to penguin.py. Failures look like the real compiler's:
`[NCC_E...]` diagnostics on log-prefixed ERROR lines, the `Diagnostic logs stored in ...` tail, exit
code 70. Kernel constraint violations never reach it: as on a real host, they fail at trace time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kernelsweep.sim.config import SimConfig

TARGETS = ("inf2", "trn1", "trn1n", "trn2", "trn3")
EXIT_COMPILE_FAILED = 70


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuronx-cc")
    parser.add_argument("--version", action="store_true")
    sub = parser.add_subparsers(dest="command")
    comp = sub.add_parser("compile")
    comp.add_argument("model_file")
    comp.add_argument("--framework", required=True, choices=("XLA",))
    comp.add_argument("--target", required=True, choices=TARGETS)
    comp.add_argument("--lnc", "--logical-nc-config", dest="lnc", type=int, choices=(1, 2))
    comp.add_argument("-O", dest="opt_level", type=int, choices=(1, 2, 3), default=2)
    comp.add_argument("--model-type", choices=("generic", "transformer", "unet-inference"))
    comp.add_argument("--auto-cast", choices=("none", "matmult", "all"))
    comp.add_argument("--auto-cast-type", choices=("bf16", "fp16", "tf32", "fp8_e4m3"))
    comp.add_argument("--output", default="file.neff")
    comp.add_argument("--logfile", default="log-neuron-cc.txt")
    comp.add_argument("--verbose")
    comp.add_argument("--pipeline", nargs="+")
    comp.add_argument("--disable-dge", action="store_true")
    comp.add_argument("--internal-tensorizer-opt-level")
    comp.add_argument("--disable-internal-io-dge", action="store_true")
    return parser


def _fail(message: str, logfile: Path) -> int:
    """`2024-08-15T14:01:19Z ERROR 1320 [neuronx-cc]: [NCC_...] ...`, as the real compiler logs."""
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} ERROR {os.getpid()} [neuronx-cc]: {message}", file=sys.stderr)
    print(f"Diagnostic logs stored in {logfile.resolve()}", file=sys.stderr)
    logfile.write_text(message + "\n")
    return EXIT_COMPILE_FAILED


def compile_command(args: argparse.Namespace, config: SimConfig) -> int:
    # Imported here: `--version`, the other command, needs none of the compiler.
    from kernelsweep.platforms import PLATFORMS
    from kernelsweep.sim.compile import diagnose, emulate_compile_time, write_sim_neff
    from kernelsweep.sim.ir import read_ir

    logfile = Path(args.logfile)
    if args.internal_tensorizer_opt_level != "nki":
        return _fail(
            f"[NCC_EARG002] {args.model_file} is NKI-traced penguin IR: compile it with "
            "--internal-tensorizer-opt-level=nki, as nki.baremetal does",
            logfile,
        )
    try:
        ir = read_ir(Path(args.model_file))
    except (OSError, ValueError) as exc:
        return _fail(f"[NCC_EARG002] cannot read model file: {exc}", logfile)
    if not (Path(args.model_file).parent / "weights").is_dir():
        return _fail(f"[NCC_EARG002] the weights folder of {args.model_file} is missing", logfile)
    problem = diagnose(ir, args.target, args.lnc, config)
    if problem:
        return _fail(problem, logfile)
    emulate_compile_time(ir, config)
    lnc = args.lnc or PLATFORMS[ir["platform"]].default_lnc
    write_sim_neff(Path(args.output), ir, args.target, lnc, [t["name"] for t in ir["outputs"]], config)
    print("Compiler status PASS")
    return 0


def _numpy_version() -> str:
    """Read from numpy's own version file: importing numpy, or importlib.metadata's scan of every
    installed distribution, would cost more than the rest of the call."""
    import importlib.util

    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return "not installed"
    for line in (Path(spec.origin).parent / "version.py").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.version:
        version = SimConfig.from_env().compiler_version
        print(f"NeuronX Compiler version {version}")
        print(f"\nPython version {sys.version.split()[0]}")
        print(f"HWM version {version}")
        print(f"NumPy version {_numpy_version()}")
        return 0
    if args.command != "compile":
        _parser().print_usage(sys.stderr)
        return 2
    return compile_command(args, SimConfig.from_env())


if __name__ == "__main__":
    from kernelsweep.sim.entry import run_tool_main

    run_tool_main(main)  # dies with its run; no interpreter shutdown
