"""One shape's search: Optuna proposes tunables, each proposal becomes an ordinary point, and its row's
objective goes back to the study.

What counts toward the budget is configurations measured: a proposal the kernel's rules or the
block's filters drop is told to Optuna as pruned (with its reason) and not measured; a configuration
measured before is told its earlier value and not measured again; a trial a killed run left running
is measured again (its configuration asked first). A failed or incorrect row is a failed trial: a
fast wrong kernel never wins. The run journal, not the study, is the record of what was measured: a
resumed search is told every journaled row of its shape that its study lost (a damaged study log),
and trials that do not fit its space (another study's) are ignored with one warning. The sampler is
seeded (Optuna's TPE by default, multivariate, with the constant liar so a batch of trials asked at
once spreads out). Each proposed trial carries its captures (the block's effort) and the bar the best
trial so far sets: one clearly slower after its first captures is captured no further
(kernelsweep.search.dropping); it is told its row like any other, fewer repeats and all.

A study may be shared by several processes (a fleet run's search shards, each with its own journal):
each marks the trials it measures with its `owner`, a configuration another is measuring is not asked
again and counts toward the budget, and a resumed process asks again only the running trials that are
its own (its dead attempt's), never the ones its live peers are measuring.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import optuna
from optuna.trial import TrialState

from kernelsweep.results.rows import Row
from kernelsweep.results.schema import OK
from kernelsweep.search import dropping
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.point import Point

REASON = "kernelsweep_reason"  # a trial's user attribute: why it was not measured
OWNER = "kernelsweep_owner"  # a trial's user attribute: the search shard measuring it (a shared study)
INTERRUPTED, REPEATED = "interrupted", "repeated"
MAX_ASKS_PER_POINT = 50  # proposals per wanted point before a search whose space is used up stops
# How long a proposal waits for a peer's trial, asked before it, to get all its parameters (a study log on
# S3 writes each with a put of its own); one still without them then is a dead process's, never waited on again.
PEER_ASK_SECONDS = 30.0
_PEER_POLL_SECONDS = 0.1

optuna.logging.set_verbosity(optuna.logging.WARNING)
log = logging.getLogger(__name__)


@dataclass
class ShapeSearch:
    target: SearchTarget
    study: optuna.Study
    invalid: Callable[[Point], str | None]  # why a proposed point cannot run, or None
    owner: str | None = None  # which of the processes sharing the study this is (None: the only one)
    leader: Row | None = field(default=None, init=False)  # the best trial so far, which sets the drop bar
    _abandoned: set[int] = field(default_factory=set, init=False)  # peers' trials that never got their parameters

    @classmethod
    def open(
        cls,
        target: SearchTarget,
        storage: optuna.storages.BaseStorage,
        invalid: Callable[[Point], str | None],
        owner: str | None = None,
    ) -> ShapeSearch:
        settings = target.settings
        sampler: optuna.samplers.BaseSampler
        if settings.sampler == "random":
            sampler = optuna.samplers.RandomSampler(seed=settings.seed)
        else:
            sampler = optuna.samplers.TPESampler(
                seed=settings.seed, n_startup_trials=settings.startup_trials, multivariate=True, constant_liar=True
            )
        study = optuna.create_study(
            study_name=target.point.point_id,
            storage=storage,
            sampler=sampler,
            direction="minimize",
            load_if_exists=True,
        )
        return cls(target, study, invalid, owner)

    @property
    def measured(self) -> int:
        """Trials that measured a configuration (complete or failed), the budget's unit."""
        return sum(
            t.state in (TrialState.COMPLETE, TrialState.FAIL) and REASON not in t.user_attrs for t in self._trials()
        )

    def _running(self) -> dict[str, optuna.trial.FrozenTrial]:
        """Trials being measured (by another process sharing the study, or by a dead one until its retry
        asks them again), by their configuration: they count toward the budget and are not asked twice."""
        return {self.point(t).tunables_text: t for t in self._trials(states=(TrialState.RUNNING,))}

    def point(self, trial: optuna.trial.FrozenTrial | optuna.Trial) -> Point:
        tunables = {name: _value(values, trial.params[name]) for name, values in self.target.space.items()}
        return self.target.point.model_copy(update={"tunables": tunables, "search_trial": trial.number})

    def _trials(self, states: tuple[TrialState, ...] | None = None) -> list[optuna.trial.FrozenTrial]:
        """The study's trials that fit this search's space: a trial whose parameters are not this
        space's (another study's, a half-written one) names no point of it."""
        return [t for t in self.study.get_trials(deepcopy=False, states=states) if self._fits(t)]

    def _fits(self, trial: optuna.trial.FrozenTrial) -> bool:
        wanted = self._distributions
        inside = (d._contains(d.to_internal_repr(trial.params[n])) for n, d in wanted.items())
        return trial.distributions == wanted and all(inside)

    def resume(self, journaled: Callable[[list[Point]], dict[str, Row]], recorded: Iterable[Row] = ()) -> list[Row]:
        """After a killed run: trials it (this owner) left running are told their journaled row, else asked again;
        `recorded` rows (the run journal's) of this shape the study has no trial for are told to it as
        trials of their own. Returns the rows of every configuration this search measured before (they
        join the run's objects), each once."""
        everything = self.study.get_trials(deepcopy=False)
        trials = self._trials()
        if len(trials) < len(everything):
            log.warning(
                "search study %s holds %d trial(s) that do not fit its space (another study's, or half-written); "
                "ignored", self.study.study_name, len(everything) - len(trials),
            )  # fmt: skip
        points = [self.point(t) for t in trials if t.state in (TrialState.COMPLETE, TrialState.RUNNING)]
        known = {p.point_id for p in points}
        lost = [p for p in map(self._recorded_point, recorded) if p is not None and p.point_id not in known]
        rows = journaled(points + lost)
        for trial in [t for t in trials if t.state == TrialState.RUNNING and t.user_attrs.get(OWNER) == self.owner]:
            row = rows.get(self.point(trial).point_id)
            if row is not None:
                self._tell(trial.number, row)
            else:
                # Optuna sets user attributes on a running trial through its Trial object, which a
                # loaded study only offers by the frozen trial's storage id
                optuna.Trial(self.study, trial._trial_id).set_user_attr(REASON, INTERRUPTED)
                self.study.tell(trial.number, state=TrialState.FAIL)
                self.study.enqueue_trial(dict(trial.params), skip_if_exists=False)
        for point in lost:
            if point.point_id in rows:
                self._add(point, rows[point.point_id])
        for row in rows.values():
            self._lead(row)
        return list(rows.values())

    def seed(self, configs: list[dict[str, int | str]]) -> int:
        """A fresh study's first trials: these configurations (a warm start from the tuned store), asked
        before the sampler's own; one outside the search space is skipped. How many were queued."""
        if self.study.get_trials(deepcopy=False):
            return 0  # a resumed study keeps what it had
        queued = 0
        for config in configs:
            if config.keys() == self.target.space.keys() and all(v in self.target.space[n] for n, v in config.items()):
                self.study.enqueue_trial({n: _param(self.target.space[n], v) for n, v in config.items()})
                queued += 1
        return queued

    def _recorded_point(self, row: Row) -> Point | None:
        """The point of this search a journaled row measured, or None when it is not one of its."""
        base = self.target.point
        if (row.sweep, row.kernel, row.kernel_ref, row.shape, row.dtype, row.platform, row.lnc) != (
            base.sweep, base.kernel, base.kernel_ref, base.shape, base.dtype, base.platform, base.lnc,
        ) or row.search_trial is None:  # fmt: skip
            return None
        given = dict(part.split("=", 1) for part in (row.tunables or "").split(",") if "=" in part)
        if list(given) != list(self.target.space):
            return None
        tunables = {}
        for name, values in self.target.space.items():
            match = [v for v in values if str(v) == given[name]]
            if not match:
                return None
            tunables[name] = match[0]
        return base.model_copy(update={"tunables": tunables, "search_trial": row.search_trial})

    def _add(self, point: Point, row: Row) -> None:
        """A measured configuration the study lost, told to it as a finished trial (never asked again)."""
        params = {
            name: sorted(values).index(point.tunables[name]) if all(isinstance(v, int) for v in values)
            else point.tunables[name]
            for name, values in self.target.space.items()
        }  # fmt: skip
        value = self._objective(row)
        state = TrialState.COMPLETE if value is not None else TrialState.FAIL
        self.study.add_trial(
            optuna.trial.create_trial(params=params, distributions=self._distributions, value=value, state=state)
        )

    def propose(self, wanted: int) -> list[Point]:
        """Up to `wanted` new configurations to measure, within the budget."""
        running = self._running()
        room = min(wanted, self.target.settings.budget - self.measured - len(running))
        seen = self._values()
        found: list[Point] = []
        for _ in range(max(0, room) * MAX_ASKS_PER_POINT):
            if len(found) >= room:
                break
            trial = self._ask()
            point = self.point(trial)
            reason = self.invalid(point)
            key = point.tunables_text
            if reason is not None:
                trial.set_user_attr(REASON, reason)
                self.study.tell(trial.number, state=TrialState.PRUNED)
            elif key in seen or key in running or any(p.tunables_text == key for p in found) or self._taken(trial):
                trial.set_user_attr(REASON, REPEATED)
                value = seen.get(key)
                self.study.tell(trial.number, value, state=None if value is not None else TrialState.PRUNED)
            else:
                found.append(point)
        return [p.model_copy(update=self._measuring()) for p in found]

    def _ask(self) -> optuna.Trial:
        """A new trial, its owner recorded before its parameters. A trial whose parameters are all there
        counts toward the budget (`_running`), so one with no owner, its process dead between the two,
        would hold its place with nobody to ask it again: a fleet search once ended a trial short that
        way. Now a death before the parameters leaves a trial outside the space, which counts for nothing.
        Sampled as `study.ask(distributions)` samples, one parameter after the other."""
        trial = self.study.ask()
        if self.owner is not None:
            trial.set_user_attr(OWNER, self.owner)
        for name, distribution in self._distributions.items():
            if isinstance(distribution, optuna.distributions.IntDistribution):
                trial.suggest_int(name, distribution.low, distribution.high)
            else:
                trial.suggest_categorical(name, distribution.choices)  # type: ignore[attr-defined]
        return trial

    def _taken(self, trial: optuna.Trial) -> bool:
        """Whether another process sharing the study asked this configuration since this proposal began:
        of two such trials the one numbered lower (first in the shared log) is measured. A peer's earlier
        trial whose parameters are still being written is waited for: two shards seeded alike propose the
        same first configuration, and the later one, reading the earlier half-written, measured it too."""
        if self.owner is None:
            return False
        key = self.point(trial).tunables_text
        deadline = time.monotonic() + PEER_ASK_SECONDS
        while True:
            running = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            earlier = [t for t in running if t.number < trial.number and t.user_attrs.get(OWNER) != self.owner]
            if any(self._fits(t) and self.point(t).tunables_text == key for t in earlier):
                return True
            asking = {t.number for t in earlier if self._being_asked(t)} - self._abandoned
            if not asking:
                return False
            if time.monotonic() > deadline:
                self._abandoned |= asking
                return False
            time.sleep(_PEER_POLL_SECONDS)

    def _being_asked(self, trial: optuna.trial.FrozenTrial) -> bool:
        """Some of this space's parameters and not yet all (another space's trial is not one of ours)."""
        wanted = self._distributions
        return trial.distributions != wanted and all(wanted.get(n) == d for n, d in trial.distributions.items())

    def _measuring(self) -> dict[str, object]:
        """How hard a new trial is measured: its captures, and the bar it must clear to get them all."""
        settings, leader = self.target.settings, self.leader
        drop = None
        if leader is not None and leader.latencies_us:
            drop = dropping.bar(settings.drop_after, leader.latencies_us, leader.tunables or "")
        return {"repeats": settings.repeats, "drop": drop}

    def _lead(self, row: Row) -> None:
        """The row becomes the leader when its objective beats the leader's."""
        value, best = self._objective(row), self._objective(self.leader) if self.leader is not None else None
        if value is not None and (best is None or value < best):
            self.leader = row

    @property
    def _distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {n: _distribution(v) for n, v in self.target.space.items()}

    def record(self, point: Point, row: Row) -> None:
        assert point.search_trial is not None
        self._tell(point.search_trial, row)

    def _tell(self, number: int, row: Row) -> None:
        self._lead(row)
        value = self._objective(row)
        if value is not None:
            self.study.tell(number, value)
        else:
            self.study.tell(number, state=TrialState.FAIL)

    def _objective(self, row: Row) -> float | None:
        """The row's objective, or None when the trial failed (a failed or incorrect row, no number)."""
        value = getattr(row, self.target.settings.column)
        ok = row.status == OK and row.correct is not False and value is not None and math.isfinite(value)
        return float(value) if ok else None

    def _values(self) -> dict[str, float]:
        """Each measured configuration's objective, by its tunables."""
        out: dict[str, float] = {}
        for trial in self._trials(states=(TrialState.COMPLETE,)):
            if trial.value is not None and REASON not in trial.user_attrs:
                out[self.point(trial).tunables_text] = trial.value
        return out


def _distribution(values: list[int | str]) -> optuna.distributions.BaseDistribution:
    """Numbers (tile sizes) are ordered: TPE is given their rank, an integer, so it can learn that
    larger (or smaller) is better; a categorical choice would treat 128 and 512 as unrelated names,
    which left a 16-trial search short of the best far more often (benchmarks/search_quality.py)."""
    if all(isinstance(v, int) for v in values):
        return optuna.distributions.IntDistribution(0, len(values) - 1)
    return optuna.distributions.CategoricalDistribution(values)


def _param(values: list[int | str], value: int | str) -> int | str:
    """A tunable's value as the study's parameter: `_value` the other way round."""
    if all(isinstance(v, int) for v in values):
        return sorted(values).index(value)
    return value


def _value(values: list[int | str], param: int | str) -> int | str:
    """A trial's parameter as the tunable's value: the rank among the sorted numbers, or the choice."""
    if all(isinstance(v, int) for v in values):
        return sorted(values)[int(param)]
    return param
