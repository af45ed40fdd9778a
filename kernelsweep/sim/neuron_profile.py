"""Stand-in `neuron-profile` / `neuron-explorer`: `capture` on a simulated exclusive core, and `view`.

capture takes -n, -s, --num-exec, --profile-nth-exec (every Nth execution), --save-output,
--check-output-determinism, --enable-dge-notifs and NAME FILE input pairs, and runs the NEFF on the
simulated runtime (sim.capture). view writes json, summary-json and summary-text and, as
neuron-explorer only, Parquet (sim.views); Explorer's Parquet view needs `--ingest-only`: without
it, like the real tool, it starts the UI and API servers and does not return (until the caller's
timeout kills it). neuron-explorer prints its profile schema (`--show-profile-schema`, under `view`
from schema 12). What each generation of the tools offers is sim.tools' (KERNELSWEEP_SIM_TOOLS).
Errors are printed as runtime log lines. Configured faults (sim.faults) inject a busy core or a hang.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from kernelsweep.sim.config import setting
from kernelsweep.sim.nrt import RuntimeFailure
from kernelsweep.sim.tools import TOOLS_ENV, ToolsRelease

EXIT_FAILED = 1
HANG_SECONDS = 3600.0  # how long the UI "serves" before the caller's timeout kills it
BUILD = "%kernelsweep/sim@simulated built on 2026-01-01T00:00:00Z"  # real: %kaena-tools/2.19@c48a122 built on ...
VIEW_FORMATS = ("json", "summary-json", "summary-text")
EXPLORER_VIEW_FORMATS = (*VIEW_FORMATS, "parquet")  # Parquet output came with neuron-explorer (SDK 2.27)


class SessionFailure(Exception):
    """A view failure, printed as the profiler's own log line plus the bare message (aws-neuron-sdk#1007)."""


def _parser(prog: str, tools: ToolsRelease) -> argparse.ArgumentParser:
    explorer = prog == "neuron-explorer"
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--version", action="store_true")
    if explorer and not tools.schema_under_view:
        parser.add_argument("--show-profile-schema", action="store_true")
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
    cap.add_argument("--enable-dge-notifs", action="store_true")
    cap.add_argument("-r", dest="workers", type=int, default=1)
    cap.add_argument("inputs", nargs="*", metavar="NAME FILE")
    view = sub.add_parser("view")
    view.add_argument("-n", "--neff")
    view.add_argument("-s", "--session-file")
    formats: tuple[str, ...] = EXPLORER_VIEW_FORMATS if explorer else VIEW_FORMATS
    if explorer and not tools.full_json:  # 2.34: "2.33.0 is the last release to support ... JSON output"
        formats = tuple(f for f in formats if f != "json")
    view.add_argument("--output-format", default="summary-text", choices=formats)
    view.add_argument("--output-file")
    if explorer:
        view.add_argument("--ingest-only", action="store_true")
        view.add_argument("--data-path")
        if tools.schema_under_view:
            view.add_argument("--show-profile-schema", action="store_true")
    return parser


def view(args: argparse.Namespace, tools: ToolsRelease) -> int:
    from kernelsweep.sim import views
    from kernelsweep.sim.instructions import neff_debug_info
    from kernelsweep.sim.ntff import read_ntff

    if getattr(args, "show_profile_schema", False):
        print(views.schema_printout(tools))
        return 0
    if not (args.neff and args.session_file):
        raise SessionFailure("view needs -n NEFF and -s NTFF")
    try:
        record = read_ntff(Path(args.session_file))
    except (OSError, ValueError) as exc:
        raise SessionFailure(str(exc)) from None
    warning = views.dma_warning(record)
    if warning:
        print(f"WARN[0000] {warning}", file=sys.stderr)
    if args.output_format == "parquet":
        if args.data_path:
            Path(args.data_path).mkdir(parents=True, exist_ok=True)
        folder = (
            Path(args.output_file)
            if args.output_file
            else Path(args.data_path or ".") / "profiles/global/profile@latest"
        )
        views.write_parquet(record, folder, tools, neff_debug_info(Path(args.neff)))
        if not args.ingest_only:  # the real view goes on to serve the UI (ports 3001/3002)
            print("Neuron Explorer UI at http://localhost:3001 (API on 3002); press Ctrl+C to stop", flush=True)
            time.sleep(HANG_SECONDS)
        return 0
    if args.output_format == "json":  # the full profile: its instruction table reads the NEFF's debug info
        text = views.full_json(record, tools, neff_debug_info(Path(args.neff)))
    else:
        render = {"summary-json": views.summary_json, "summary-text": views.summary_text}
        text = render[args.output_format](record, tools)
    if args.output_file:
        Path(args.output_file).write_text(text)
    else:
        print(text)
    return 0


def capture(args: argparse.Namespace) -> int:
    # Imported here: the runtime, its configuration and the kernels it runs are a capture's alone.
    from kernelsweep.sim.capture import run
    from kernelsweep.sim.config import SimConfig, extend_import_path

    config = SimConfig.from_env()
    extend_import_path(config)
    print(run(args, config))
    return 0


def main(argv: list[str] | None = None, prog: str = "neuron-profile") -> int:
    tools: ToolsRelease = setting(TOOLS_ENV)
    parser = _parser(prog, tools)
    args = parser.parse_args(argv)
    if args.version:
        print(f"{parser.prog} {tools.profiler_version}{BUILD}")
        return 0
    try:
        if getattr(args, "show_profile_schema", False) and args.command is None:  # 7.x: a top-level flag
            from kernelsweep.sim.views import schema_printout

            print(schema_printout(tools))
            return 0
        if args.command == "capture":
            return capture(args)
        if args.command == "view":
            return view(args, tools)
    except RuntimeFailure as exc:
        from datetime import datetime, timezone

        stamp = datetime.now(timezone.utc).strftime("%Y-%b-%d %H:%M:%S.%f")
        for line in str(exc).splitlines():
            print(f"{stamp} {os.getpid()}:{os.getpid()}  ERROR   {line}", file=sys.stderr)
        return EXIT_FAILED
    except SessionFailure as exc:
        print(f'ERRO[0000] Failed to load profile session  NTFF={args.session_file} error="{exc}"', file=sys.stderr)
        print(
            f"{parser.prog} exited with an error.{parser.prog} {tools.profiler_version}{BUILD}\n\n{exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    parser.print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    from kernelsweep.sim.entry import run_tool_main

    run_tool_main(main)  # dies with its run; no interpreter shutdown
