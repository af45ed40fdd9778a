"""The simulated runtime behind `capture`: load a NEFF as the Neuron runtime would, run it, trace it.

What the real runtime enforces, this enforces, with the runtime's log lines:
  * a NEFF compiled for another platform family is refused at load (a trn1 NEFF on a trn2 host; only
    NEURON_RT_ALLOW_LEGACY_NEFF=1 lets an older NEFF run on a newer arch), as is one compiled for
    another LNC than the NEURON_LOGICAL_NC_CONFIG in force;
  * NEURON_RT_VISIBLE_CORES names LOGICAL cores at that LNC, and the process holds every physical
    core behind them for its lifetime; another process holding one gets the NRT busy error;
  * the NEFF's outputs are saved under the NEFF's own output names (`output_0` ... for a NEFF
    compiled without output names), announced as `saved output "<name>" as "<file>"`;
  * `--profile-nth-exec=M` profiles every Mth execution: profile.ntff for execution 1 and
    profile_exec_<i>.ntff for execution i;
  * `--enable-dge-notifs` is recorded in the NTFF, and `view` models what its absence costs.
The device's result is the kernel definition's numpy reference, rounded to the output dtype. A
platform the performance model has no calibration for (trn3, whose clocks are unpublished) is
refused at load: the simulator will not make up its timing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kernelsweep.sim import views
from kernelsweep.sim.config import SimConfig
from kernelsweep.sim.faults import take
from kernelsweep.sim.latency import CAPTURE, emulate, ir_point_key
from kernelsweep.sim.model import CALIBRATION, predict
from kernelsweep.sim.noise import run_factor
from kernelsweep.sim.nrt import RuntimeFailure, busy, nrt
from kernelsweep.sim.ntff import write_ntff
from kernelsweep.toolchain.neff import NeffFormatError, NeffInfo, read_neff

LOAD_SECONDS = 1.2  # emulated NEFF load + runtime init per capture (captures take ~1-2 s)
HANG_SECONDS = 3600.0  # an injected capture-timeout hangs until the caller's timeout kills it
OLDER_ARCH = {"trn2": ("trn1", "inf2")}  # what NEURON_RT_ALLOW_LEGACY_NEFF lets a host run


def _load_failure(neff: str, why: str) -> RuntimeFailure:
    # The second line is the runtime's observed shape (aws-neuron-sdk#779); the first line's wording is ours.
    return RuntimeFailure(
        nrt("NEFF:neff_parse", why) + "\n" + nrt("NMGR:kmgr_load_nn_post_metrics", f"Failed to load NN: {neff}, err: 1")
    )


def ntff_names(session: str, num_exec: int, nth: int) -> list[tuple[int, str]]:
    stem = session.removesuffix(".ntff")
    if nth <= 0:  # "Passing 0 disables profiling"
        return []
    return [(i, session if i == 1 else f"{stem}_exec_{i}.ntff") for i in range(nth, num_exec + 1, nth)]


def load(neff_path: str, config: SimConfig, lnc: int) -> tuple[NeffInfo, dict]:
    try:
        neff = read_neff(Path(neff_path))
    except (OSError, NeffFormatError) as exc:
        raise RuntimeFailure(nrt("NRT:nrt_load", f"NRT_UNSUPPORTED_NEFF_VERSION: {neff_path}: {exc}")) from None
    ir = neff.neff.get("kernelsweep_sim")
    if ir is None:
        raise RuntimeFailure(nrt("NRT:nrt_load", "NRT_UNSUPPORTED_NEFF_VERSION: the simulator runs only its own NEFFs"))
    if ir["platform"] not in CALIBRATION:
        raise RuntimeFailure(
            nrt(
                "NRT:nrt_load", f"the simulated runtime has no model of {ir['platform']} (its clocks are unpublished); "
            )
            + f"capture {ir['platform']} points on a {ir['platform']} host"
        )
    target = str(neff.info.get("target", ir["platform"]))
    family = "trn1" if target == "trn1n" else target
    host = config.platform
    legacy_ok = os.environ.get("NEURON_RT_ALLOW_LEGACY_NEFF", "").lower() in ("1", "true")
    if host is not None and family != host and not (legacy_ok and family in OLDER_ARCH.get(host, ())):
        raise _load_failure(
            neff_path, f"NEFF was compiled for {target}; this instance is {host} (recompile with --target {host})"
        )
    if neff.num_tpb != lnc:
        raise _load_failure(neff_path, f"NEFF was compiled for LNC={neff.num_tpb}; NEURON_LOGICAL_NC_CONFIG is {lnc}")
    return neff, ir


def _visible(value: str) -> list[int]:
    """The runtime's reading of NEURON_RT_VISIBLE_CORES (`0`, `0-2`, `0,1`); parsed here, not with the
    lease code's parser, so the simulated runtime checks what the sweep sends instead of echoing it."""
    cores: list[int] = []
    for part in value.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or not (hi or lo).isdigit() or int(hi or lo) < int(lo):
            raise RuntimeFailure(nrt("NRT:nrt_init", f"invalid NEURON_RT_VISIBLE_CORES value {value!r}"))
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return cores


def visible_physical_cores(config: SimConfig, lnc: int) -> list[int]:
    logical_count = config.physical_cores // lnc
    value = os.environ.get("NEURON_RT_VISIBLE_CORES")
    logical = _visible(value) if value else list(range(logical_count))
    if any(c >= logical_count for c in logical):
        raise RuntimeFailure(nrt("TDRV:tdrv_get_dev_info", f"No neuron device available (cores {value} at LNC={lnc})"))
    return [p for c in logical for p in range(c * lnc, (c + 1) * lnc)]


def hold(stack: ExitStack, config: SimConfig, physical: list[int], requested: str) -> None:
    """Take every physical core for this process's lifetime, as the Neuron runtime does."""
    runtime_dir = config.state_dir / "runtime"
    runtime_dir.mkdir(parents=True, exist_ok=True)
    for core in physical:
        handle = stack.enter_context(open(runtime_dir / f"pnc{core}.lock", "a+"))
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy(requested) from None


def run(args: Any, config: SimConfig) -> str:
    """One capture; returns the runtime's closing line."""
    lnc = config.lnc_for(os.environ.get("NEURON_LOGICAL_NC_CONFIG"))
    neff, ir = load(args.neff, config, lnc)
    physical = visible_physical_cores(config, lnc)
    requested = os.environ.get("NEURON_RT_VISIBLE_CORES", "all")
    if take(config.state_dir, "capture-busy", config.faults.capture_busy):
        raise busy(f"nc{requested}-nc{requested}")
    with ExitStack() as stack:
        hold(stack, config, physical, f"nc{requested}-nc{requested}")
        if take(config.state_dir, "capture-timeout", config.faults.capture_timeout):
            time.sleep(HANG_SECONDS)
        if args.enable_dge_notifs and take(config.state_dir, "dge-timeout", config.faults.dge_timeout):
            raise RuntimeFailure(nrt("NRT:nrt_execute", "NRT_TIMEOUT: execution timed out (DGE notifications on)"))
        from kernelsweep.sim import execute  # numpy: only a capture that runs the kernel needs it

        inputs = execute.load_inputs(args.inputs, ir, RuntimeFailure, nrt)
        outputs = execute.run_kernel(ir, inputs)
        if ir["kernel"] in config.faults.zero_outputs:  # runs, times, and returns zeros: only a check sees it
            outputs = execute.zeroed(outputs)
        if args.check_output_determinism and not execute.same(outputs, execute.run_kernel(ir, inputs)):
            raise RuntimeFailure(nrt("NRT:nrt_execute", "output determinism check failed"))
        per_exec = predict(views.workload(ir)).total
        emulate(config.state_dir, CAPTURE, ir_point_key(ir), LOAD_SECONDS + args.num_exec * per_exec, config.time_scale)
        # each capture draws its own run-to-run noise, as repeated captures on hardware differ; `view`
        # of one NTFF is still deterministic
        neff_bytes = Path(args.neff).read_bytes()
        salt = noise_salt(config, hashlib.sha256(neff_bytes).hexdigest())
        run_key = hashlib.sha256(neff_bytes + salt).hexdigest()
        nth = 1 if args.profile_nth_exec is None else args.profile_nth_exec
        factor = run_factor(config, ir_point_key(ir))
        for index, name in ntff_names(args.session_file, args.num_exec, nth):
            record = {"exec_index": index, "run_key": run_key, "ir": ir, "dge_notifs": args.enable_dge_notifs}
            write_ntff(Path(name), {**record, "run_factor": factor})
        if args.save_output or args.save_output_npy:
            named = dict(zip(neff.outputs, outputs.values(), strict=True))  # the NEFF's names, in its order
            for line in execute.save_outputs(named, npy=args.save_output_npy, failure=RuntimeFailure):
                print(line)
    return f"Profile captured: {args.num_exec} executions on NeuronCore(s) {requested} at LNC={lnc} (simulated)"


def noise_salt(config: SimConfig, neff_sha256: str) -> bytes:
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
