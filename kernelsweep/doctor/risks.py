"""The risks a first real host must settle, and which smoke step settles each.

N1..N8 are the second real-host audit's (../shared/reviews/real-host-audit-2.md, section 2), R2 and R6 the
third's (real-host-audit-3.md, section 1); O1 and
O5 the NKI 0.7 addendum's open questions (nki-0.7-addendum.md, section 4); C3, F16 and F17 the
format changes of SDK 2.33/2.34 (user-needs.md section 4, the addendum's facts). A step rules a risk
out when it passes; a step that warns, fails or is skipped leaves it open, and the report says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelsweep.doctor.smoke_steps import FAIL, INFO, OK, SKIP, WARN, Step

RISKS: dict[str, str] = {
    "N1": "the driver tracer misreads the compile API's result shape (the (bir, cr) pair)",
    "N2": "the compiler's own diagnostics are lost on the trace-and-compile route",
    "N3": "DMA and MBU figures understated without DGE notifications",
    "N4": "at LNC=2 a row reports one core's summary entry; MFU normalised wrongly",
    "N5": "fully unrolled loops make larger shapes trace and compile for hours",
    "N6": "the bf16 matmul/MLP instruction mix (PSUM, transpose, activation) never ran",
    "N7": "the stand-ins accept what the SDK rejects",
    "N8": "compile options and the SBUF budget differ from nki-library's",
    "O1": "NKI 0.7's programmatic driver signatures are unpublished",
    "R2": "a tuned point hands its tunables to the compiler as 0-d inputs, which neuronxcc refuses",
    "R6": "at LNC=2 summary entries are combined by a rule no AWS source confirms (summed counters)",
    "O5": "`acc += nl.matmul(...)` under the tracing front end",
    "C3": "this Explorer's profile schema lacks Summary fields rows name (12.x is a MAJOR bump)",
    "F16": "Explorer's Parquet profile, full JSON's successor after SDK 2.33, is misread",
    "F17": "neuron-ls's JSON on this host (2.34 drops -j for --output-format json) is misread",
}
_SETTLED = {OK: "ruled out", INFO: "answered"}


def risk_lines(step: Step) -> list[str]:
    """The step's risks, each with what this run did to it."""
    state = _SETTLED.get(step.status, "left open")
    return [f"{state}: {risk} ({RISKS[risk]})" for risk in step.risks]


def summary(steps: Sequence[Step]) -> str:
    """Every risk, the steps that ruled it out or left it open; `not checked` where none does."""
    lines = ["risks (real-host audits 2 N1-N8 and 3 R2/R6, NKI 0.7 addendum O1/O5, SDK 2.33/2.34 formats):"]
    for risk, text in RISKS.items():
        found = [(index, step) for index, step in enumerate(steps, 1) if risk in step.risks]
        if not found:
            lines.append(f"  {risk:<4}not checked by the smoke: {text}")
            continue
        open_at = [str(i) for i, s in found if s.status in (FAIL, WARN, SKIP)]
        where = ", ".join(str(i) for i, _ in found)
        settled = "answered" if all(s.status == INFO for _, s in found) else "ruled out"
        verdict = f"open (step {', '.join(open_at)})" if open_at else f"{settled} (step {where})"
        lines.append(f"  {risk:<4}{verdict}: {text}")
    return "\n".join(lines)
