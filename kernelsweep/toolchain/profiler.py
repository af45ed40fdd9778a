"""`neuron-profile` / `neuron-explorer`: capture a NEFF on an exclusive core, then view it.

Both executables take the same `capture` interface (neuron-explorer replaced neuron-profile in SDK
2.30). `--profile-nth-exec=M` profiles EVERY Mth execution (reference Corrections 4), so captures run
`--num-exec=N --profile-nth-exec=N` by default, as AWS's harness does: one NTFF, of the last
execution. The default view is `summary-json` on stdout, which both tools support; Explorer's full
JSON is legacy with an undocumented layout, and its Parquet view needs `--ingest-only` or it starts
the UI servers and does not return.

DGE notifications: without `--enable-dge-notifs` Explorer's DMA figures "may not be accurate", and
with it "this can result in timeout errors for large NEFFs" (SDK neuron-explorer troubleshooting.rst
229-233). So a capture asked to collect them that times out is run once more without, and says so;
a view that prints the accuracy warning marks its profile's DMA figures unreliable.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kernelsweep import names
from kernelsweep.errors import CaptureError, ExtractError
from kernelsweep.toolchain.failures import capture_failure, view_failure
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

# The runtime's older name for the LNC (still in SDK examples): an inherited value would override
# the NEURON_LOGICAL_NC_CONFIG each capture sets.
CAPTURE_UNSET = ("NEURON_RT_VIRTUAL_CORE_SIZE",)
SESSION_NAME = names.NTFF
PROFILE_JSON_NAME = "profile.json"
# What `view` writes in the work folder for each format (summary-json goes to stdout; we save it).
PROFILE_OUTPUTS = {"json": PROFILE_JSON_NAME, "summary-json": "profile_summary.json", "parquet": "profile_parquet"}
EXPLORER_DATA = "explorer-data"  # a scratch --data-path per view, so concurrent views share nothing
_SAVED_OUTPUT = re.compile(r'saved output "([^"]+)" as "([^"]+)"')
# `neuron-profile 2.19.0.0%kaena-tools/2.19@c48a122 built on 2024-08-02T17:21:14Z` (aws-neuron-sdk#1007);
# `neuron-explorer --version` prints an undocumented format: the first dotted version anywhere counts.
_VERSION = re.compile(r"neuron-(?:profile|explorer)\s+v?(\d+(?:\.\d+)+(?:\+[\w.]+)?)")
_ANY_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)+(?:\+[\w.]+)?)")
DGE_NOTIFS_FLAG = "--enable-dge-notifs"
# Explorer's words (troubleshooting.rst:229), and the JSON warning's as seen on hosts (observed, third-party notes).
DMA_WARNING = re.compile(r"DMA results may not be accurate|Missing additional dynamic DMA metadata")


@dataclass(frozen=True)
class CaptureOutput:
    ntff: Path  # the last profiled execution's trace: the one a row reports
    outputs: dict[str, Path]  # as the runtime saved them, by the NEFF's output names
    ntffs: tuple[Path, ...] = ()  # every NTFF the capture wrote
    dge_notifs: bool = False  # whether this capture collected DGE notifications
    note: str | None = None  # a fallback taken (DGE notifications dropped after a timeout)


@dataclass(frozen=True)
class View:
    path: Path  # the profile in the format asked for (a folder for parquet)
    dma_warning: str | None = None  # the view's line saying its DMA figures may not be accurate


def expected_ntff_names(num_exec: int, profile_nth_exec: int | None) -> list[str]:
    """The NTFFs a capture writes, predicted up front so a silent miss is caught: every Mth execution
    (M = profile_nth_exec, default num_exec), `profile.ntff` for execution 1 and
    `profile_exec_<i>.ntff` for execution i > 1 (nki-samples: N=20, M=10 -> exec_10, exec_20)."""
    nth = num_exec if profile_nth_exec is None else profile_nth_exec
    if not 1 <= nth <= num_exec:
        raise ValueError(f"profile_nth_exec={nth} must be between 1 and num_exec={num_exec}")
    return [SESSION_NAME if i == 1 else f"profile_exec_{i}.ntff" for i in range(nth, num_exec + 1, nth)]


def ntff_execution(name: str) -> int:
    """Which execution an NTFF of `expected_ntff_names` holds (its inverse)."""
    return 1 if name == SESSION_NAME else int(name.removeprefix("profile_exec_").removesuffix(".ntff"))


def capture_argv(
    toolchain: Toolchain,
    neff: str,
    inputs: Mapping[str, str],
    *,
    num_exec: int,
    profile_nth_exec: int | None,
    save_output: bool = True,
    check_output_determinism: bool = False,
    dge_notifs: bool = False,
) -> list[str]:
    argv = toolchain.command(toolchain.profiler) + ["capture", "-n", neff, "-s", SESSION_NAME]
    nth = num_exec if profile_nth_exec is None else profile_nth_exec
    argv += [f"--num-exec={num_exec}", f"--profile-nth-exec={nth}"]
    if dge_notifs:
        argv.append(DGE_NOTIFS_FLAG)
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
    dge_notifs: bool = False,
) -> CaptureOutput:
    """One capture; with `dge_notifs`, a timeout is retried once without them (the flag's known cost)."""
    once = functools.partial(
        _capture_once, toolchain, neff, inputs, workdir, num_exec=num_exec, profile_nth_exec=profile_nth_exec,
        visible_cores=visible_cores, lnc=lnc, timeout_seconds=timeout_seconds,
        check_output_determinism=check_output_determinism,
    )  # fmt: skip
    try:
        return once(dge_notifs=dge_notifs)
    except CaptureError as exc:
        if not dge_notifs or exc.error_class != "Timeout":
            raise
        first = exc.message
    for stale in workdir.glob("*.ntff"):  # a killed capture may have left some
        stale.unlink()
    out = once(dge_notifs=False)
    note = f"with {DGE_NOTIFS_FLAG}: {first}; captured again without (DMA figures may be understated)"
    return replace(out, note=note)


def _capture_once(
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
    check_output_determinism: bool,
    dge_notifs: bool,
) -> CaptureOutput:
    argv = capture_argv(
        toolchain,
        str(neff),
        {n: str(p) for n, p in inputs.items()},
        num_exec=num_exec,
        profile_nth_exec=profile_nth_exec,
        check_output_determinism=check_output_determinism,
        dge_notifs=dge_notifs,
    )
    env = {**toolchain.env, "NEURON_RT_VISIBLE_CORES": visible_cores, "NEURON_LOGICAL_NC_CONFIG": str(lnc)}
    result = run_tool(argv, cwd=workdir, env=env, unset=CAPTURE_UNSET, timeout_seconds=timeout_seconds)
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
    return CaptureOutput(
        ntff=workdir / expected[-1],
        outputs=outputs,
        ntffs=tuple(workdir / n for n in expected),
        dge_notifs=dge_notifs,
    )


def view_argv(toolchain: Toolchain, neff: str, ntff: str, profile_format: str = "summary-json") -> list[str]:
    """`view -n file.neff -s profile.ntff --output-format=summary-json` (stdout); json and parquet
    name their output (seed 000's `--output-file=profile.json`); Explorer's Parquet view runs as
    AWS's harness runs it, `--ingest-only`, with a scratch `--data-path`."""
    if profile_format not in PROFILE_OUTPUTS:
        raise ValueError(f"unknown profile format {profile_format!r}; expected one of {sorted(PROFILE_OUTPUTS)}")
    argv = toolchain.command(toolchain.profiler) + ["view", "-n", neff, "-s", ntff, f"--output-format={profile_format}"]
    if profile_format != "summary-json":
        argv.append(f"--output-file={PROFILE_OUTPUTS[profile_format]}")
    if profile_format == "parquet" and toolchain.profiler == "neuron-explorer":
        argv += ["--ingest-only", f"--data-path={EXPLORER_DATA}"]
    return argv


def view(
    toolchain: Toolchain,
    neff: Path,
    ntff: Path,
    workdir: Path,
    timeout_seconds: float,
    profile_format: str = "summary-json",
) -> View:
    """Write the profile in `profile_format` under `workdir`; its path (a folder for parquet), and
    the view's DMA accuracy warning if it printed one."""
    argv = view_argv(toolchain, str(neff), str(ntff), profile_format)
    result = run_tool(argv, cwd=workdir, env=toolchain.env, timeout_seconds=timeout_seconds)
    if result.timed_out or result.returncode != 0:
        raise view_failure(result, toolchain.profiler)
    profile = workdir / PROFILE_OUTPUTS[profile_format]
    if profile_format == "summary-json":
        start = result.stdout.find("{")  # log lines may come first; the record is the JSON object
        profile.write_text(result.stdout[start:] if start >= 0 else result.stdout)
    elif profile_format == "parquet" and summary_table(profile) is None:
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
    return View(profile, dma_warning(result.output))


def dma_warning(text: str) -> str | None:
    """The line of a view's output (or a profile's warning) saying its DMA figures may be inaccurate."""
    return next((" ".join(line.split()) for line in text.splitlines() if DMA_WARNING.search(line)), None)


def outputs_by_kernel_name(
    saved: Mapping[str, Path], neff_outputs: Sequence[str], kernel_outputs: Sequence[str]
) -> dict[str, Path]:
    """The runtime saves outputs under the NEFF's names, which can still be output_0, ... even with
    output_names passed (nki-library renames them back too): where a kernel output's name was not
    saved, take the file of the NEFF output in the same position (sg00/def.json order)."""
    found = {name: saved[name] for name in kernel_outputs if name in saved}
    if len(neff_outputs) == len(kernel_outputs):
        for kernel_name, neff_name in zip(kernel_outputs, neff_outputs, strict=True):
            if kernel_name not in found and neff_name in saved:
                found[kernel_name] = saved[neff_name]
    return found | {name: path for name, path in saved.items() if name not in found and name not in neff_outputs}


def summary_table(folder: Path) -> Path | None:
    """Summary.parquet, or the first part of a table Explorer split (`Summary_0.parquet`)."""
    for candidate in (folder / "Summary.parquet", folder / "Summary_0.parquet"):
        if candidate.is_file():
            return candidate
    return None


def parse_profiler_version(output: str) -> str | None:
    """`neuron-profile 2.19.0.0%...`; else the first dotted version in the output; else None."""
    match = _VERSION.search(output) or _ANY_VERSION.search(output)
    return match.group(1) if match else None


def profiler_version(toolchain: Toolchain, timeout_seconds: float = 60) -> str | None:
    result = run_tool(
        toolchain.command(toolchain.profiler) + ["--version"], env=toolchain.env, timeout_seconds=timeout_seconds
    )
    return parse_profiler_version(result.output) if result.returncode == 0 else None
