"""The re-check on a new SDK: each stored best measured again against its runner-up on the toolchain
this host has now, and only the keys where the verdict flips searched again.

For every stored key of a kernel the spec searches (its newest SDK's entry), a contest of the best
and the runner-up runs on the current toolchain (kernelsweep.tuned.contest). A key whose runner-up
now wins clearly is re-tuned: the spec's search block for that kernel, on that one shape, warm-started
from the store (the old best and runner-up come first), its winner confirmed against the best carried
over from the older SDK. Every other key keeps its best, now confirmed on the current SDK (a tie keeps
it too). The store then holds, for the current SDK, each key's best and what happened to it: a re-tuned
key's history names the best it replaced and the verdict that replaced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelsweep.report.stats import Rule
from kernelsweep.sweepspec.blocks import SearchTarget
from kernelsweep.sweepspec.expansion import expand_spec
from kernelsweep.sweepspec.load import parse_spec
from kernelsweep.sweepspec.models import SweepSpec
from kernelsweep.tuned.contest import Contest, Runner, contest_bests, run_contests
from kernelsweep.tuned.keys import key_id, numbers, version_order
from kernelsweep.tuned.record import Change, entry_key, record
from kernelsweep.tuned.store import TunedStore

RETUNE_SUFFIX = "-retune"
WARM_SEEDS = 2  # at least the old best and its runner-up come first in a re-tune


@dataclass(frozen=True)
class Outcome:
    held: list[Change]  # keys whose best held on the current SDK
    retuned: list[tuple[dict[str, Any], dict[str, Any] | None]]  # (the stored entry, its key's entry now)
    skipped: list[str]  # keys that could not be re-checked, and why

    def lines(self) -> list[str]:
        """What held and what was re-tuned, from what to what and why, one line a key."""
        out = [f"held: {change.line()}" for change in self.held]
        for before, now in self.retuned:
            line = (
                f"re-tuned {before['key']['kernel']} {before['key']['shape']}: was {_text(before['best']['tunables'])}"
            )
            if now is not None and now["best"]["tunables"] != before["best"]["tunables"]:
                line += f", now {_text(now['best']['tunables'])} ({now['history'][0]['why']})"
            else:
                line += ", kept: the re-tune's winner did not beat it clearly"
            out.append(line)
        return out

    def summary(self) -> str:
        checked = len(self.held) + len(self.retuned)
        return f"re-checked {checked} stored best(s): {len(self.held)} held, {len(self.retuned)} re-tuned"


def _text(tunables: dict[str, Any]) -> str:
    return ",".join(f"{n}={v}" for n, v in tunables.items())


def place(key: dict[str, Any]) -> tuple[Any, ...]:
    """A key without its SDK: what one best stands for across SDKs."""
    return (key["kernel"], key["shape"], key["dtype"], key["platform"], key.get("lnc"))


def newest(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each place's entry on its newest SDK."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in entries:
        at = place(e["key"])
        if at not in latest or version_order(e["key"]["sdk"].get("compiler")) > version_order(
            latest[at]["key"]["sdk"].get("compiler")
        ):
            latest[at] = e
    return [latest[k] for k in sorted(latest, key=str)]


def recheck(spec: SweepSpec, run: Runner, rule: Rule | None = None) -> Outcome:
    """Re-check every stored best of the spec's searched kernels and platforms; re-tune where it flipped."""
    rule = rule or Rule()
    store = TunedStore(spec.results_location)
    searched = {t.point.kernel: t for t in expand_spec(spec).targets}
    entries, skipped = [], []
    for e in newest(store.entries()):
        k = e["key"]
        if k["kernel"] not in searched or k["platform"] not in spec.platforms:
            continue
        if e.get("runner_up") is None:
            skipped.append(f"{_where(k)}: one configuration measured, nothing to re-check it against")
        else:
            entries.append(e)
    contests = [_contest(e, searched[e["key"]["kernel"]]) for e in entries]
    rows = run_contests(spec, contests, run) if contests else []
    now = {place(entry_key(b.best)): b for b in contest_bests(rows, rule)}
    held: list[Change] = []
    retuned: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for e in entries:
        b = now.get(place(e["key"]))
        if b is None:
            skipped.append(f"{_where(e['key'])}: neither configuration measured on this toolchain (see the report)")
            continue
        current = entry_key(b.best)
        if key_id(current) != key_id(e["key"]) and store.get(current) is None:
            store.put(_carried(e, current))  # the incumbent on the new SDK until something beats it
        flipped = numbers(b.best.tunables or "") != e["best"]["tunables"] and b.verdict == "clear win"
        if not flipped:
            held += record(store, [b], by="recheck")
            continue
        run(_retune_spec(spec, searched[e["key"]["kernel"]], e))
        retuned.append((e, store.get(current)))
    return Outcome(held, retuned, skipped)


def _where(k: dict[str, Any]) -> str:
    return f"{k['kernel']} {k['shape']} {k['dtype']} {k['platform']} lnc={k.get('lnc')}"


def _contest(e: dict[str, Any], target: SearchTarget) -> Contest:
    k = e["key"]
    configs = (e["best"]["tunables"], e["runner_up"]["tunables"])
    params = {name: int(v) for name, v in numbers(k["shape"]).items()}
    return Contest(target.point.kernel_ref, params, k["dtype"], k["platform"], k["lnc"], "", configs)


def _carried(e: dict[str, Any], key: dict[str, Any]) -> dict[str, Any]:
    """The older SDK's entry filed under the current SDK's key, saying so."""
    entry = {name: value for name, value in e.items() if name != "seal"}
    return {**entry, "key": key, "carried_from": e["key"]["sdk"]}


def _retune_spec(spec: SweepSpec, target: SearchTarget, e: dict[str, Any]) -> SweepSpec:
    """The spec's search block for this kernel, on the entry's shape, dtype, platform and LNC only."""
    k = e["key"]
    block = spec.kernels[target.block].model_dump(mode="json")
    search = block["search"] | {"warm_start": max(block["search"].get("warm_start", 0), WARM_SEEDS)}
    block |= {
        "grid": [{"axis": a, "values": [int(v)]} for a, v in numbers(k["shape"]).items()],
        "dtypes": [k["dtype"]],
        "lnc": [k["lnc"]],
        "search": search,
        "coverage": {},
    }
    data = spec.model_dump(mode="json", exclude={"kernels", "name", "platforms"})
    return parse_spec({**data, "name": spec.name + RETUNE_SUFFIX, "platforms": [k["platform"]], "kernels": [block]})
