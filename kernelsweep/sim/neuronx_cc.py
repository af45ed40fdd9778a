"""Stand-in `neuronx-cc`: `--version`, and `compile` of a simulated penguin.py into a NEFF.

Failures look like the real compiler's: `[NCC_E...]` diagnostics on log-prefixed ERROR lines, the
`Diagnostic logs stored in ...` tail, exit code 70. Kernel constraint violations never reach it:
as on a real host, they fail at trace time (see toolchain.tracing.sim_trace).
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy

from kernelsweep.neff import write_neff
from kernelsweep.platforms import PLATFORMS
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.ir import read_ir
from kernelsweep.sim.model import compile_seconds

TARGETS = ("inf2", "trn1", "trn1n", "trn2", "trn3")
EXIT_COMPILE_FAILED = 70
INJECTED = "injected by KERNELSWEEP_SIM_FAULTS"


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
    return parser


def _fail(message: str, logfile: Path) -> int:
    """`2024-08-15T14:01:19Z ERROR 1320 [neuronx-cc]: [NCC_...] ...`, as the real compiler logs."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} ERROR {os.getpid()} [neuronx-cc]: {message}", file=sys.stderr)
    print(f"Diagnostic logs stored in {logfile.resolve()}", file=sys.stderr)
    logfile.write_text(message + "\n")
    return EXIT_COMPILE_FAILED


def compile_command(args: argparse.Namespace, config: SimConfig) -> int:
    logfile = Path(args.logfile)
    if args.lnc == 2 and not args.target.startswith(("trn2", "trn3")):
        return _fail(f"[NCC_EARG001] --lnc 2 is not supported for target {args.target}", logfile)
    try:
        ir = read_ir(Path(args.model_file))
    except (OSError, ValueError) as exc:
        return _fail(f"[NCC_EARG002] cannot read model file: {exc}", logfile)
    platform = PLATFORMS[ir["platform"]]
    total_bytes = sum(t["bytes"] for t in ir["inputs"] + ir["outputs"])
    if total_bytes > platform.hbm_bytes_per_chip:
        return _fail("[NCC_EVRF009] Size of total input and output tensors exceeds HBM limit", logfile)
    if ir["kernel"] in config.faults.compile_errors:
        return _fail(f"[NCC_EVRF009] Size of total input and output tensors exceeds HBM limit ({INJECTED})", logfile)
    time.sleep(compile_seconds(ir["flops"]) * config.time_scale)
    lnc = args.lnc or platform.default_lnc
    variables = {t["name"]: {"type": "input", "shape": t["shape"], "dtype": t["dtype"]} for t in ir["inputs"]}
    variables |= {t["name"]: {"type": "output", "shape": t["shape"], "dtype": t["dtype"]} for t in ir["outputs"]}
    version, factor = config.compiler_version, config.slowdown(ir["kernel"], ir["params"])
    built = {**ir, "compiler_version": version} | ({"code_factor": factor} if factor != 1.0 else {})
    write_neff(
        Path(args.output),
        name=ir["kernel"],
        info={"tool_version": version, "num_tpb": lnc, "target": args.target, "is_simulation": True},
        neff={"kernelsweep_sim": built},
        variables=variables,
        lnc_size=lnc,
        build_version=version,
    )
    print("Compiler status PASS")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.version:
        version = SimConfig.from_env().compiler_version
        print(f"NeuronX Compiler version {version}")
        print(f"\nPython version {host_platform.python_version()}")
        print(f"HWM version {version}")
        print(f"NumPy version {numpy.__version__}")
        return 0
    if args.command != "compile":
        _parser().print_usage(sys.stderr)
        return 2
    return compile_command(args, SimConfig.from_env())


if __name__ == "__main__":
    sys.exit(main())
