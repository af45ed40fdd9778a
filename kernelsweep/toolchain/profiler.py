"""`neuron-profile` / `neuron-explorer`: capture a NEFF on an exclusive core, then view it.

Both executables take the same `capture` interface (neuron-explorer replaced neuron-profile in SDK
2.30); `view` adds Parquet output on neuron-explorer, and full JSON output ends after 2.33.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelsweep import names
from kernelsweep.errors import CaptureError, ExtractError
from kernelsweep.toolchain.failures import capture_failure, view_failure
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

SESSION_NAME = names.NTFF
PROFILE_JSON_NAME = "profile.json"
# What `view` writes in the work folder for each format (summary-json goes to stdout; we save it).
PROFILE_OUTPUTS = {"json": PROFILE_JSON_NAME, "summary-json": "profile_summary.json", "parquet": "profile_parquet"}
LAST_FULL_JSON_RELEASE = (2, 33)  # the last SDK whose Explorer writes the full JSON profile
_SAVED_OUTPUT = re.compile(r'saved output "([^"]+)" as "([^"]+)"')
# `neuron-profile 2.19.0.0%kaena-tools/2.19@c48a122 built on 2024-08-02T17:21:14Z` (aws-neuron-sdk#1007)
_VERSION = re.compile(r"neuron-(?:profile|explorer)\s+v?(\d+(?:\.\d+)+(?:\+[\w.]+)?)")


@dataclass(frozen=True)
class CaptureOutput:
    ntff: Path  # the profiled execution's trace
    outputs: dict[str, Path]


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
    check_output_determinism: bool = False,
) -> list[str]:
    argv = toolchain.command(toolchain.profiler) + ["capture", "-n", neff, "-s", SESSION_NAME]
    argv.append(f"--num-exec={num_exec}")
    if profile_nth_exec is not None and num_exec > 1:
        argv.append(f"--profile-nth-exec={profile_nth_exec}")
    if check_output_determinism:
        argv.append("--check-output-determinism")
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
    check_output_determinism: bool = False,
) -> CaptureOutput:
    argv = capture_argv(
        toolchain,
        str(neff),
        {n: str(p) for n, p in inputs.items()},
        num_exec=num_exec,
        profile_nth_exec=profile_nth_exec,
        check_output_determinism=check_output_determinism,
    )
    env = {**toolchain.env, "NEURON_RT_VISIBLE_CORES": visible_cores, "NEURON_LOGICAL_NC_CONFIG": str(lnc)}
    result = run_tool(argv, cwd=workdir, env=env, timeout_seconds=timeout_seconds)
    if result.timed_out or result.returncode != 0:
        raise capture_failure(result, toolchain.profiler)
    expected = expected_ntff_names(num_exec, profile_nth_exec)
    missing = [name for name in expected if not (workdir / name).is_file()]
    if missing:
        raise CaptureError(
            f"capture exited 0 but wrote no {missing[0]}",
            error_class="MissingOutput",
            argv=argv,
            stderr_tail=result.output,
        )
    outputs = {name: workdir / file for name, file in _SAVED_OUTPUT.findall(result.stdout)}
    return CaptureOutput(ntff=workdir / expected[-1], outputs=outputs)


def view_argv(toolchain: Toolchain, neff: str, ntff: str, profile_format: str = "json") -> list[str]:
    """As in seed 000: `view -n file.neff -s profile.ntff --output-format=json --output-file=profile.json`.

    summary-json is printed to stdout (reference section 5); json and parquet name their output.
    """
    if profile_format not in PROFILE_OUTPUTS:
        raise ValueError(f"unknown profile format {profile_format!r}; expected one of {sorted(PROFILE_OUTPUTS)}")
    argv = toolchain.command(toolchain.profiler) + ["view", "-n", neff, "-s", ntff, f"--output-format={profile_format}"]
    if profile_format != "summary-json":
        argv.append(f"--output-file={PROFILE_OUTPUTS[profile_format]}")
    return argv


def view(
    toolchain: Toolchain, neff: Path, ntff: Path, workdir: Path, timeout_seconds: float, profile_format: str = "json"
) -> Path:
    """Write the profile in `profile_format` under `workdir` and return its path (a folder for parquet)."""
    argv = view_argv(toolchain, str(neff), str(ntff), profile_format)
    result = run_tool(argv, cwd=workdir, env=toolchain.env, timeout_seconds=timeout_seconds)
    if result.timed_out or result.returncode != 0:
        raise view_failure(result, toolchain.profiler)
    profile = workdir / PROFILE_OUTPUTS[profile_format]
    if profile_format == "summary-json":
        profile.write_text(result.stdout)
    elif profile_format == "parquet" and not (profile / "Summary.parquet").is_file():
        raise ExtractError(
            f"{toolchain.profiler} view wrote no {profile.name}/Summary.parquet",
            error_class="MissingOutput",
            argv=argv,
            stderr_tail=result.output,
        )
    elif not profile.exists():
        raise ExtractError(
            f"{toolchain.profiler} view wrote no {profile.name}",
            error_class="MissingOutput",
            argv=argv,
            stderr_tail=result.output,
        )
    return profile


def default_profile_format(profiler_tool: str, profiler_version: str | None) -> str:
    """Full JSON where it is still written; Parquet on Explorers newer than its last JSON release."""
    release = _release(profiler_version)
    if profiler_tool == "neuron-explorer" and release is not None and release > LAST_FULL_JSON_RELEASE:
        return "parquet"
    return "json"


def _release(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_profiler_version(output: str) -> str | None:
    match = _VERSION.search(output)
    return match.group(1) if match else None


def profiler_version(toolchain: Toolchain, timeout_seconds: float = 60) -> str | None:
    result = run_tool(
        toolchain.command(toolchain.profiler) + ["--version"], env=toolchain.env, timeout_seconds=timeout_seconds
    )
    return parse_profiler_version(result.output) if result.returncode == 0 else None
