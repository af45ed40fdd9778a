"""`compare --confirm`: the suspects of a comparison measured again, A and B interleaved on one core.

Each suspect's two rows name, in their lineage, the exact NEFF and input files they were measured
with (kernelsweep.stores.artifacts keeps them by content). Those bytes are fetched and checked
before anything is captured: a row whose NEFF is not linked or no longer in its store stops the
confirmation with one line (a usage error), before a capture runs or a row is written. Then, under
one NeuronCore lease per point, the production capture adapter captures A's NEFF, then B's, then
A's again..., each capture viewed by the profiler as a sweep's extract stage views it
(kernelsweep.stages), until kernelsweep.report.interleaved decides the point or the budget is spent.

The captures are rows too: one per side per point, status `confirmation`, under a flow run id of
their own, with the repeats and the message saying which compare and which row they confirm. They
are never a run of the point: reports and comparisons leave them out (kernelsweep.report.load).
"""

from __future__ import annotations

import math
import socket
import statistics
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelsweep import names
from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.profiles.metrics import LatencyStats
from kernelsweep.report.compare import Comparison, PointComparison
from kernelsweep.report.interleaved import REPEATS_PER_ROUND, Budget, Decision, Round, confirm
from kernelsweep.results import reader
from kernelsweep.results.columns import CONFIRMATION, PARAM_PREFIX
from kernelsweep.results.row_parts import latency_columns
from kernelsweep.results.rows import Row
from kernelsweep.results.writer import write_results
from kernelsweep.stages import capture_one, dge_notifs, viewed_latency
from kernelsweep.stores.artifacts import ArtifactRef, open_store_for
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.this_host.context import Locations, StageContext, prepare
from kernelsweep.toolchain import explorer

ROW_NAMESPACE = uuid.UUID("0c5e1d7a-52b4-4f0e-8d1e-3a9f6c2b7e41")


@dataclass(frozen=True)
class Fetched:
    """One side's row of a suspect: the whole record and its NEFF and inputs, fetched and verified."""

    record: dict[str, Any]
    neff: Path
    inputs: dict[str, Path]


@dataclass(frozen=True)
class Confirmed:
    """The comparison with its suspects decided (or still undecided, and why), and what it cost."""

    comparison: Comparison
    decisions: list[tuple[PointComparison, Decision]]
    flow_run_id: str

    @property
    def repeats(self) -> int:
        return sum(d.repeats for _, d in self.decisions)

    @property
    def seconds(self) -> float:
        return sum(d.seconds for _, d in self.decisions)

    def cost(self) -> str:
        return (
            f"{len(self.decisions)} suspect(s) re-measured, A and B captured interleaved on one core: their "
            f"verdicts rest on those rounds; cost {self.repeats} repeats, {self.seconds:.1f} s of captures "
            f"(rows with status confirmation, flow run {self.flow_run_id})"
        )

    def wanted(self, budget: Budget) -> str | None:
        """What budget would decide the points left undecided at the spread and pace seen: enough
        that even shares give every suspect the rounds the neediest one wants."""
        left = [d for _, d in self.decisions if d.outcome == "inconclusive"]
        if not left:
            return None
        if any(d.rounds_needed is None for d in left):
            return f"{len(left)} point(s) stayed undecided; one sits on the threshold, where no budget decides it"
        rounds = max(d.rounds_needed or 0 for d in left)
        pace = max((d.seconds_per_round for d in left if d.a_us), default=math.nan)
        shares = len(self.decisions)
        seconds = f" --budget-seconds {math.ceil(shares * rounds * pace)}" if math.isfinite(pace) else ""
        return (
            f"{len(left)} point(s) stayed undecided within {budget.describe()}; about --budget-repeats "
            f"{shares * REPEATS_PER_ROUND * rounds}{seconds} would decide them"
        )


def suspects(comparison: Comparison) -> list[PointComparison]:
    return [p for p in comparison.points if p.suspect]


def run(comparison: Comparison, results_uri: str, locations: Locations, toolchain: str, budget: Budget) -> Confirmed:
    """Fetch every suspect's NEFFs and inputs, capture them interleaved, decide, write the rows."""
    confirm_id = f"confirm-{uuid.uuid4()}"
    chosen = suspects(comparison)
    with tempfile.TemporaryDirectory(prefix="kernelsweep-confirm-") as tmp:
        fetched = [(fetch(results_uri, p.a[0].row_id, Path(tmp) / f"{i}-a"),
                    fetch(results_uri, p.b[0].row_id, Path(tmp) / f"{i}-b")) for i, p in enumerate(chosen)]  # fmt: skip
        if not chosen:
            return Confirmed(comparison, [], confirm_id)
        ctx = context_for(fetched, toolchain, locations, "--confirm")
        rounds = [Interleaved(ctx, a, b, Path(tmp) / f"{i}-captures") for i, (a, b) in enumerate(fetched)]
        thresholds = [comparison.rule.threshold_for(p.kernel) for p in chosen]
        decisions = confirm(rounds, thresholds, comparison.rule.alpha, budget)
    rows = [
        row
        for (a, b), decided, side in zip(fetched, decisions, rounds, strict=True)
        for row in _rows(ctx, comparison, a, b, decided, side, confirm_id)
    ]
    if rows:
        _write(rows, results_uri, confirm_id, comparison)
    by_key = {p.key: d for p, d in zip(chosen, decisions, strict=True)}
    points = [_decided(p, by_key[p.key]) if p.key in by_key else p for p in comparison.points]
    done = Confirmed(comparison, list(zip(chosen, decisions, strict=True)), confirm_id)
    notes = [*comparison.notes, done.cost(), *filter(None, [done.wanted(budget)])]
    return replace(done, comparison=replace(comparison, points=points, notes=notes))


def fetch(results_uri: str, row_id: str, dest: Path) -> Fetched:
    """The row and its NEFF and inputs, verified against their hashes; one line when any is missing."""
    record = reader.find_row(results_uri, row_id)
    if record is None:
        raise UsageError(f"row {row_id} is no longer in {results_uri}; compare again")
    point = f"row {row_id} ({record['kernel']} {record['shape']} {record['platform']})"
    uri, sha = record.get("neff_uri"), record.get("neff_sha256")
    if not uri or not sha:
        raise UsageError(
            f"{point} has no NEFF in its lineage, so it cannot be captured again; compare without --confirm"
        )
    dest.mkdir(parents=True)
    neff = _fetched(point, "NEFF", {"uri": uri, "sha256": sha}, dest / names.NEFF)
    inputs = {
        entry["name"]: _fetched(point, f"input {entry['name']}", entry, dest / names.input_file(entry["name"]))
        for entry in record.get("inputs") or []
    }
    return Fetched(record, neff, inputs)


def _fetched(point: str, what: str, link: dict[str, Any], dest: Path) -> Path:
    ref = ArtifactRef(link["uri"], link["sha256"], link.get("size_bytes") or 0)
    try:
        return open_store_for(ref).fetch(ref, dest)
    except (KernelsweepError, OSError) as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(
            f"{point}: its {what} {ref.sha256[:12]} cannot be fetched ({problem}); restore the artifact store "
            "the sweep wrote to, or compare without --confirm"
        ) from None


def context_for(
    fetched: Sequence[tuple[Fetched, Fetched]], toolchain: str, locations: Locations, asked: str
) -> StageContext:
    """The stage context a sweep of these points would prepare: toolchain, leases at their LNCs
    (`asked`: the option or command that wants the captures, named in a refusal)."""
    first = fetched[0][0].record
    data = {
        "name": "confirm",
        "platforms": sorted({side.record["platform"] for pair in fetched for side in pair}),
        "kernels": [{"kernel": first["kernel_ref"], "grid": {"confirm": [0]},
                     "lnc": sorted({side.record["lnc"] for pair in fetched for side in pair})}],
        "toolchain": toolchain,
        "artifacts": tempfile.gettempdir(),  # nothing is put: the NEFFs come from the rows' own stores
    }  # fmt: skip
    ctx, _ = prepare(parse_spec(data, source="compare --confirm"), locations)
    records = [side.record for pair in fetched for side in pair]
    if ctx.toolchain.is_simulation and not all(r["is_simulation"] for r in records):
        raise UsageError(
            f"{asked}: the rows were measured on a device and this host captures on the {ctx.toolchain.kind} "
            "toolchain, whose times are a model; capture on a Neuron host of their platform (--toolchain neuron)"
        )
    foreign = sorted({r["platform"] for r in records if not ctx.host.runs(r["platform"])})
    if foreign:
        raise UsageError(f"{asked}: this host captures {ctx.host.family} points only, not {', '.join(foreign)}; "
                         "capture on a host of that platform")  # fmt: skip
    return ctx


class Interleaved:
    """One suspect's rounds: a capture of A's NEFF, then one of B's, on one core leased for the point
    (entered when its turn comes, released when it is decided). A bisection's step captures its
    positions' NEFFs in turn through `capture` under the same lease."""

    def __init__(self, ctx: StageContext, a: Fetched, b: Fetched, workdir: Path) -> None:
        self.ctx, self.a, self.b, self.workdir = ctx, a, b, workdir
        self.lnc, self.platform = int(a.record["lnc"]), str(a.record["platform"])
        self.format = explorer.view_format(ctx.capture.profile_format, ctx.toolchain.profiler, ctx.versions.profiler)
        self.captures = 0
        self.visible_cores = ""
        self.started: datetime | None = None
        self._held = ExitStack()

    def __enter__(self) -> Round:
        self.started = datetime.now(UTC)
        lease = self.ctx.leaser_for(self.lnc).lease(waiting_for=f"confirm {self.a.record['row_id']}")
        self.visible_cores = self._held.enter_context(lease).visible_cores
        return self.round

    def __exit__(self, *exc: object) -> None:
        self._held.close()

    def round(self) -> tuple[float, float]:
        return self.capture(self.a), self.capture(self.b)

    def capture(self, side: Fetched) -> float:
        run_dir = self.workdir / f"capture-{self.captures}"
        run_dir.mkdir(parents=True)
        self.captures += 1
        dge = dge_notifs(self.ctx, self.platform)
        out = capture_one(self.ctx, side.neff, side.inputs, run_dir, self.visible_cores, self.lnc, dge)
        return viewed_latency(self.ctx, side.neff, out.ntff, run_dir, self.format, self.captures - 1)[0]


def _decided(point: PointComparison, decided: Decision) -> PointComparison:
    """The point with the confirmation's verdict and its captures' medians (when it had any); a point
    still undecided stays the suspect exit 3 means."""
    confirmed = replace(
        point,
        outcome=decided.outcome,
        why=f"confirmed: {decided.why}",
        effect=decided.effect or point.effect,
        suspect=decided.outcome == "inconclusive",
    )
    if not decided.a_us:
        return confirmed
    return replace(confirmed, a_us=statistics.median(decided.a_us), b_us=statistics.median(decided.b_us))


def _rows(
    ctx: StageContext,
    comparison: Comparison,
    a: Fetched,
    b: Fetched,
    decided: Decision,
    captured: Interleaved,
    confirm_id: str,
) -> list[Row]:
    """A row per side of one confirmed point, holding its captures (none when the budget allowed none)."""
    if not decided.a_us:
        return []
    message = (
        f"confirmation repeats of compare {comparison.title}: A (row {a.record['row_id']}) and B "
        f"(row {b.record['row_id']}) captured interleaved on core {captured.visible_cores}; {decided.outcome}"
    )
    return [
        _row(ctx, side.record, latencies, f"side {name}: {message}", confirm_id, captured)
        for name, side, latencies in (("A", a, decided.a_us), ("B", b, decided.b_us))
    ]


_COPIED = (  # what the confirmed row's NEFF was made with and from: the lineage the captures share
    "sweep", "kernel", "kernel_ref", "shape", "dtype", "platform", "lnc", "seed", "kernel_source_uri",
    "kernel_source_sha256", "ir_uri", "ir_sha256", "neff_uri", "neff_sha256", "inputs", "tracer",
    "compiler_version", "nki_version", "tunables", "toolchain_name", "compile_options", "nki_compiler_frontend",
    "cost_flops", "cost_hbm_bytes", "neff_compile_host", "neff_debug_info",
)  # fmt: skip


def _row(
    ctx: StageContext,
    record: dict[str, Any],
    latencies: list[float],
    message: str,
    confirm_id: str,
    captured: Interleaved,
) -> Row:
    params = {k.removeprefix(PARAM_PREFIX): v for k, v in record.items() if k.startswith(PARAM_PREFIX)}
    copied: dict[str, Any] = {name: record.get(name) for name in _COPIED}
    return Row(
        **copied,
        row_id=str(uuid.uuid5(ROW_NAMESPACE, f"{confirm_id}/{record['row_id']}")),
        params={axis: value for axis, value in params.items() if value is not None},
        toolchain=ctx.toolchain.kind,
        is_simulation=ctx.toolchain.is_simulation,
        status=CONFIRMATION,
        error_message=message,
        **latency_columns(LatencyStats.of(latencies)),
        timing_source="simulator" if ctx.toolchain.is_simulation else "device",
        runtime_version=ctx.versions.runtime,
        profiler_version=ctx.versions.profiler,
        profiler_tool=ctx.versions.profiler_tool,
        instance_type=ctx.versions.instance_type,
        host=ctx.host_name or socket.gethostname(),
        hostname=socket.gethostname(),
        visible_cores=captured.visible_cores,
        flow_run_id=confirm_id,
        started_at=captured.started,
        finished_at=datetime.now(UTC),
    )


def _write(rows: list[Row], results_uri: str, confirm_id: str, comparison: Comparison) -> None:
    lineage = {"confirms": comparison.title, "flow_run_id": confirm_id, "points": len(rows) // 2}
    write_results(rows, results_uri, flow_run_id=confirm_id, run_date=datetime.now(UTC).date(), lineage=lineage)
