"""`neuron-profile` / `neuron-explorer`: capture a NEFF on an exclusive core, then view it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import CaptureError, ExtractError
from kernelsweep.toolchain.failures import capture_failure
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

SESSION_NAME = "profile.ntff"
PROFILE_JSON_NAME = "profile.json"
_SAVED_OUTPUT = re.compile(r'saved output "([^"]+)" as "([^"]+)"')


@dataclass(frozen=True)
class CaptureResult:
    ntff: Path  # the profiled execution's trace
    outputs: dict[str, Path]
    log: str


def expected_ntff_names(num_exec: int, profile_nth_exec: int | None) -> list[str]:
    """The NTFF files capture writes, predicted up front so a silent miss is caught."""
    if num_exec == 1:
        return [SESSION_NAME]
    if profile_nth_exec is not None:
        return [f"profile_exec_{profile_nth_exec}.ntff"]
    return [SESSION_NAME] + [f"profile_exec_{i}.ntff" for i in range(2, num_exec + 1)]


def capture_argv(
    toolchain: Toolchain,
    neff: str,
    inputs: Mapping[str, str],
    *,
    num_exec: int,
    profile_nth_exec: int | None,
    save_output: bool = True,
) -> list[str]:
    argv = toolchain.command(toolchain.profiler) + ["capture", "-n", neff, "-s", SESSION_NAME]
    argv.append(f"--num-exec={num_exec}")
    if profile_nth_exec is not None and num_exec > 1:
        argv.append(f"--profile-nth-exec={profile_nth_exec}")
    if save_output:
        argv.append("--save-output")
    for name, path in inputs.items():
        argv += [name, path]
    return argv


def capture(
    toolchain: Toolchain,
    neff: Path,
    inputs: Mapping[str, Path],
    workdir: Path,
    *,
    num_exec: int,
    profile_nth_exec: int | None,
    visible_cores: str,
    lnc: int,
    timeout_seconds: float,
) -> CaptureResult:
    argv = capture_argv(
        toolchain,
        str(neff),
        {n: str(p) for n, p in inputs.items()},
        num_exec=num_exec,
        profile_nth_exec=profile_nth_exec,
    )
    env = {**toolchain.env, "NEURON_RT_VISIBLE_CORES": visible_cores, "NEURON_LOGICAL_NC_CONFIG": str(lnc)}
    result = run_tool(argv, cwd=workdir, env=env, timeout_seconds=timeout_seconds)
    if result.timed_out or result.returncode != 0:
        raise capture_failure(result, toolchain.profiler)
    expected = expected_ntff_names(num_exec, profile_nth_exec)
    missing = [name for name in expected if not (workdir / name).is_file()]
    if missing:
        raise CaptureError(f"capture exited 0 but wrote no {missing[0]}", argv=argv, stderr_tail=result.output)
    outputs = {name: workdir / file for name, file in _SAVED_OUTPUT.findall(result.stdout)}
    return CaptureResult(ntff=workdir / expected[-1], outputs=outputs, log=result.output)


def view_argv(toolchain: Toolchain, neff: str, ntff: str, profile_format: str = "json") -> list[str]:
    """As in seed 000: `view -n file.neff -s profile.ntff --output-format=json --output-file=profile.json`."""
    argv = toolchain.command(toolchain.profiler) + ["view", "-n", neff, "-s", ntff, f"--output-format={profile_format}"]
    if profile_format == "json":
        argv.append(f"--output-file={PROFILE_JSON_NAME}")
    return argv


def view_json(toolchain: Toolchain, neff: Path, ntff: Path, workdir: Path, timeout_seconds: float) -> Path:
    argv = view_argv(toolchain, str(neff), str(ntff))
    result = run_tool(argv, cwd=workdir, env=toolchain.env, timeout_seconds=timeout_seconds)
    profile = workdir / PROFILE_JSON_NAME
    if result.timed_out or result.returncode != 0 or not profile.is_file():
        detail = "timed out" if result.timed_out else (result.output.strip().splitlines() or ["no output"])[-1]
        retryable = result.timed_out
        raise ExtractError(
            f"{toolchain.profiler} view failed: {detail}",
            retryable=retryable,
            argv=argv,
            returncode=result.returncode,
            stderr_tail=result.output,
        )
    return profile
