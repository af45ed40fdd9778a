"""Stand-in `neuron-profile` / `neuron-explorer`: `capture` on a simulated exclusive core, `view`.

capture honours -n, -s, --num-exec, --profile-nth-exec, --save-output, --check-output-determinism
and NAME FILE input pairs, runs the kernel's numpy reference in the kernel's dtype to produce the
outputs, and writes NTFFs under the real names. Like the runtime, it takes every visible core for
the whole process and fails with the NRT busy error when another process holds one; configured
faults (sim.faults) inject that error or a hang. view writes json, summary-json and summary-text,
and, as neuron-explorer only, Parquet (sim.views). Errors are printed as runtime log lines.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import sys
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from kernelsweep.dtypes import numpy_dtype
from kernelsweep.kernels import load_kernel
from kernelsweep.locks import parse_visible_cores
from kernelsweep.neff import NeffFormatError, read_neff
from kernelsweep.sim import PROFILER_VERSION, views
from kernelsweep.sim.config import SimConfig, extend_import_path
from kernelsweep.sim.faults import take
from kernelsweep.sim.model import predict
from kernelsweep.sim.ntff import read_ntff, write_ntff

LOAD_SECONDS = 1.2  # emulated NEFF load + runtime init per capture (captures take ~1-2 s)
EXIT_FAILED = 1
HANG_SECONDS = 3600.0  # an injected capture-timeout hangs until the caller's timeout kills it
BUILD = "%kernelsweep/sim@simulated built on 2026-01-01T00:00:00Z"  # real: %kaena-tools/2.19@c48a122 built on ...
VIEW_FORMATS = ("json", "summary-json", "summary-text")
EXPLORER_VIEW_FORMATS = (*VIEW_FORMATS, "parquet")  # Parquet output came with neuron-explorer (SDK 2.27)


class RuntimeFailure(Exception):
    """A capture failure, printed as Neuron runtime log lines (`... ERROR   NRT:<function>  <text>`)."""


class SessionFailure(Exception):
    """A view failure, printed as the profiler's own log line plus the bare message (aws-neuron-sdk#1007)."""


def _nrt(function: str, text: str) -> str:
    return f"{function:<44}{text}"


def _busy(requested: str) -> RuntimeFailure:
    return RuntimeFailure(
        _nrt("NRT:nrt_allocate_neuron_cores", f"NeuronCore(s) not available - Requested:{requested} Available:0")
        + "\n"
        + _nrt("NRT:nrt_init", "nrt_init failed. Status = 1")
    )


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
    formats = EXPLORER_VIEW_FORMATS if prog == "neuron-explorer" else VIEW_FORMATS
    view.add_argument("--output-format", default="summary-text", choices=formats)
    view.add_argument("--output-file")
    return parser


def _visible_cores(config: SimConfig) -> list[int]:
    value = os.environ.get("NEURON_RT_VISIBLE_CORES")
    if not value:
        return list(range(config.cores))
    cores = parse_visible_cores(value)
    if any(c >= config.cores for c in cores):
        raise RuntimeFailure(_nrt("TDRV:tdrv_get_dev_info", f"No neuron device available (cores {value})"))
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
            raise _busy(f"nc{core}-nc{core}") from None


def _load_inputs(pairs: list[str], ir: dict) -> dict[str, np.ndarray]:
    if len(pairs) % 2:
        raise RuntimeFailure(
            _nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: inputs must be NAME FILE pairs ({len(pairs)})")
        )
    given = dict(zip(pairs[::2], pairs[1::2], strict=True))
    expected = {t["name"]: t for t in ir["inputs"]}
    if set(given) != set(expected):
        raise RuntimeFailure(
            _nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: inputs {sorted(given)} are not the NEFF's {sorted(expected)}")
        )
    arrays = {}
    for name, file in given.items():
        spec = expected[name]
        data = Path(file).read_bytes()
        if len(data) != spec["bytes"]:
            raise RuntimeFailure(
                _nrt("NRT:nrt_execute", f"NRT_EXEC_BAD_INPUT: {name} has {len(data)} bytes, expected {spec['bytes']}")
            )
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


def capture(args: argparse.Namespace, config: SimConfig) -> int:
    if args.profile_nth_exec is not None and not 1 <= args.profile_nth_exec <= args.num_exec:
        raise RuntimeFailure(f"--profile-nth-exec={args.profile_nth_exec} is outside 1..{args.num_exec}")
    try:
        neff = read_neff(Path(args.neff))
    except (OSError, NeffFormatError) as exc:
        raise RuntimeFailure(_nrt("NRT:nrt_load", f"NRT_UNSUPPORTED_NEFF_VERSION: {args.neff}: {exc}")) from None
    ir = neff.neff.get("kernelsweep_sim")
    if ir is None:
        raise RuntimeFailure(
            _nrt("NRT:nrt_load", "NRT_UNSUPPORTED_NEFF_VERSION: the simulator runs only its own NEFFs")
        )
    cores = _visible_cores(config)
    if take(config.state_dir, "capture-busy", config.faults.capture_busy):
        raise _busy(f"nc{cores[0]}-nc{cores[-1]}")
    with ExitStack() as stack:
        _hold_cores(stack, config, cores)
        if take(config.state_dir, "capture-timeout", config.faults.capture_timeout):
            time.sleep(HANG_SECONDS)
        inputs = _load_inputs(args.inputs, ir)
        outputs = _run_kernel(ir, inputs)
        if args.check_output_determinism and any(
            not np.array_equal(a, b) for a, b in zip(outputs.values(), _run_kernel(ir, inputs).values(), strict=True)
        ):
            raise RuntimeFailure(_nrt("NRT:nrt_execute", "output determinism check failed"))
        per_exec = predict(views.workload(ir)).total
        time.sleep((LOAD_SECONDS + args.num_exec * per_exec) * config.time_scale)
        # each capture draws its own run-to-run noise, as repeated captures on hardware differ; `view`
        # of one NTFF is still deterministic
        neff_bytes = Path(args.neff).read_bytes()
        run_key = hashlib.sha256(neff_bytes + _noise_salt(config, hashlib.sha256(neff_bytes).hexdigest())).hexdigest()
        for index, name in _ntff_names(args.session_file, args.num_exec, args.profile_nth_exec):
            write_ntff(Path(name), {"exec_index": index, "run_key": run_key, "ir": ir})
        if args.save_output or args.save_output_npy:
            _save_outputs(outputs, npy=args.save_output_npy)
    visible = os.environ.get("NEURON_RT_VISIBLE_CORES", "all")
    print(f"Profile captured: {args.num_exec} executions on NeuronCore(s) {visible} (simulated)")
    return 0


def _noise_salt(config: SimConfig, neff_sha256: str) -> bytes:
    """Fresh noise, or with KERNELSWEEP_SIM_NOISE_SEED the seed and which capture of this NEFF this is
    (counted in the state dir across processes; one point's repeats run one after another)."""
    if config.noise_seed is None:
        return os.urandom(16)
    folder = config.state_dir / "noise"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{neff_sha256[:32]}.count", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        count = int(os.read(fd, 32) or b"0")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(count + 1).encode())
    finally:
        os.close(fd)
    return f"{config.noise_seed}:{count}".encode()


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
        raise SessionFailure(str(exc)) from None
    if args.output_format == "parquet":
        if not args.output_file:
            raise SessionFailure("--output-format parquet needs --output-file DIR")
        views.write_parquet(record, Path(args.output_file))
        return 0
    render = {"json": views.full_json, "summary-json": views.summary_json, "summary-text": views.summary_text}
    text = render[args.output_format](record)
    if args.output_file:
        Path(args.output_file).write_text(text)
    else:
        print(text)
    return 0


def main(argv: list[str] | None = None, prog: str = "neuron-profile") -> int:
    extend_import_path()
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.version:
        print(f"{parser.prog} {PROFILER_VERSION}{BUILD}")
        return 0
    try:
        if args.command == "capture":
            return capture(args, SimConfig.from_env())
        if args.command == "view":
            return view(args)
    except RuntimeFailure as exc:
        stamp = datetime.now(timezone.utc).strftime("%Y-%b-%d %H:%M:%S.%f")
        for line in str(exc).splitlines():
            print(f"{stamp} {os.getpid()}:{os.getpid()}  ERROR   {line}", file=sys.stderr)
        return EXIT_FAILED
    except SessionFailure as exc:
        print(f'ERRO[0000] Failed to load profile session  NTFF={args.session_file} error="{exc}"', file=sys.stderr)
        print(f"{parser.prog} exited with an error.{parser.prog} {PROFILER_VERSION}{BUILD}\n\n{exc}", file=sys.stderr)
        return EXIT_FAILED
    parser.print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
