"""How `doctor --smoke` shows its steps: on the terminal as they finish (each tool run's first lines),
and in full in a report file to attach to a bug report; each step ends with the risks it rules out
or leaves open, and the check ends with every risk's state (kernelsweep.doctor.risks).

    == 8/17 capture: every 2nd of 4 executions
    $ NEURON_LOGICAL_NC_CONFIG=2 NEURON_RT_VISIBLE_CORES=0 neuron-explorer capture -n ... --num-exec=4 ...
    | saved output "out" as "out"
    ok    --num-exec=4 --profile-nth-exec=2 wrote ['profile_exec_2.ntff', 'profile_exec_4.ntff'] ...
"""

from __future__ import annotations

import platform as host
import shlex
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from kernelsweep.doctor import risks
from kernelsweep.doctor.smoke_steps import FAIL, Step
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain.process import ToolResult
from kernelsweep.toolchain.resolve import Toolchain

SHOWN_LINES = 6  # of each tool run's output, on the terminal; the report keeps all of it
SHOWN_ENV = ("NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VISIBLE_CORES", "NEURON_PLATFORM_TARGET_OVERRIDE")


def header(toolchain: Toolchain, point: Point) -> str:
    kind = "simulated toolchain (every result below is SIMULATED)" if toolchain.is_simulation else "Neuron toolchain"
    return (
        f"kernelsweep doctor --smoke: {kind}, platform {point.platform} at LNC={point.lnc}\n"
        f"points: {point.kernel} {point.shape} {point.dtype}, then mlp; host {host.node()}, "
        f"{datetime.now(UTC).isoformat(timespec='seconds')}"
    )


def command_line(run: ToolResult) -> str:
    env = " ".join(f"{k}={run.env[k]}" for k in SHOWN_ENV if k in run.env)
    return f"$ {env + ' ' if env else ''}{shlex.join(run.argv)}"


def render_step(index: int, total: int, step: Step, full: bool = False) -> str:
    lines = [f"== {index}/{total} {step.title}"]
    for run in step.runs:
        lines.append(command_line(run))
        output = [line for line in run.output.splitlines() if line.strip()]
        shown = output if full or step.show_all else output[:SHOWN_LINES]
        lines += [f"| {line}" for line in shown]
        if len(shown) < len(output):
            lines.append(f"| ... {len(output) - len(shown)} more lines in the report")
        ending = "killed at its timeout" if run.timed_out else f"exit {run.returncode}"
        lines.append(f"  ({ending})")
    lines += [f"  {detail}" for detail in step.details]
    lines.append(f"{step.status:<5} {step.verdict}")
    lines += [f"      {line}" for line in risks.risk_lines(step)]
    return "\n".join(lines)


def summary(steps: Sequence[Step], report: Path | None) -> str:
    counts = Counter(step.status for step in steps)
    text = ", ".join(f"{counts[s]} {s}" for s in ("ok", "warn", "fail", "info", "skip") if counts[s])
    where = f"; report: {report}" if report else ""
    return f"smoke check: {text}{where}"


def exit_code(steps: Sequence[Step]) -> int:
    """0 when no step failed; 1 otherwise (warnings and open questions do not fail the check)."""
    return 1 if any(step.status == FAIL for step in steps) else 0


def write_report(path: Path, head: str, steps: Sequence[Step]) -> Path:
    body = [head, ""] + [render_step(i, len(steps), step, full=True) + "\n" for i, step in enumerate(steps, 1)]
    path.write_text("\n".join(body) + risks.summary(steps) + "\n\n" + summary(steps, None) + "\n")
    return path
