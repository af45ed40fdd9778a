"""One kernel block's points: its grid axes covered by the block's strategy (kernelsweep.sweepspec.coverage),
crossed with its dtypes, platforms, LNC settings and toolchains, each checked against the kernel's own
rules, the platform's limits and the block's filters (kernelsweep.sweepspec.constraints). A point that fails a
check is dropped, counted under its reason, and dropped for that platform (or LNC, or toolchain) only;
kernelsweep.sweepspec.expansion fails a spec only when nothing valid is left.

A block with a `search` gives no measured points here but search targets: one per shape (and dtype,
platform, LNC, toolchain), whose tunables the search proposes while the sweep runs (kernelsweep.search).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from kernelsweep.dtypes import itemsize
from kernelsweep.errors import InvalidShapeError, UsageError
from kernelsweep.kernels import KernelDefinition
from kernelsweep.platforms import get_platform
from kernelsweep.sweepspec.constraints import FIXED_NAMES, Drops, Filters, Value
from kernelsweep.sweepspec.coverage import Combination, pick, tuple_coverage
from kernelsweep.sweepspec.models import KernelGrid, SweepSpec
from kernelsweep.sweepspec.point import Point
from kernelsweep.sweepspec.search_settings import SearchSettings

# A point's inputs are generated in host memory, and the reference (and, simulated, the device) works
# on float64 copies: a point may take several times its tensors' size. Kept under a quarter of it.
HOST_MEMORY_SHARE = 4


@dataclass(frozen=True)
class Limits:
    """What a point may need: unrolled instructions (the spec's), host memory (the host that runs it)."""

    unrolled_instructions: int
    host_memory_bytes: int | None = None


@dataclass(frozen=True)
class SearchTarget:
    """One shape whose tunables a search chooses: the point without tunables, and the choices."""

    point: Point
    block: int
    settings: SearchSettings
    space: dict[str, list[Value]]


@dataclass
class BlockPlan:
    """What a block gives: its points (or search targets), what its strategy picked and guarantees."""

    index: int
    kernel: str
    strategy: str
    grid_size: int
    picked: int
    guarantee: str
    points: list[Point] = field(default_factory=list)
    targets: list[SearchTarget] = field(default_factory=list)
    drops: Drops = field(default_factory=Drops)
    valid: Counter[str] = field(default_factory=Counter)  # points (or search targets) per dtype, kept or not


def filters_for(entry: KernelGrid, definition: KernelDefinition, where: str) -> Filters:
    names = {*definition.axes, *definition.tunables, *FIXED_NAMES}
    return Filters.of(entry.where, entry.exclude, names, where)


def check_tunables(entry: KernelGrid, definition: KernelDefinition, where: str) -> None:
    """Tunables the kernel declares, with values it allows."""
    for name, values in entry.tunable_axes.items():
        allowed = definition.tunables.get(name)
        if allowed is None:
            declared = ", ".join(definition.tunables) or "none"
            raise UsageError(f"{where}: kernel {definition.name} has no tunable {name!r}; its tunables: {declared}")
        bad = [v for v in values if v not in allowed]
        if bad:
            raise UsageError(
                f"{where}: tunable {name} of {definition.name} takes {', '.join(map(str, allowed))}, not {bad[0]!r}"
            )
    if entry.search is not None and not definition.tunables:
        raise UsageError(f"{where}: kernel {definition.name} declares no tunables, so there is nothing to search")


def plan_block(
    spec: SweepSpec,
    index: int,
    entry: KernelGrid,
    definition: KernelDefinition,
    where: str,
    limits: Limits,
    *,
    keep: bool = True,
    check: Callable[[Point], None] | None = None,
) -> BlockPlan:
    """The block's points (kept in the plan unless `keep` is false: then only counted), each valid one
    passed to `check` first."""
    filters = filters_for(entry, definition, where)
    grid: dict[str, list[int | str]] = {
        a: list(dict.fromkeys(entry.axes[a])) for a in definition.axes if a in entry.axes
    }
    if entry.search is None:
        grid |= {t: list(dict.fromkeys(v)) for t, v in entry.tunable_axes.items()}
    defaults = definition.resolve({})
    known = {*grid, *defaults}

    def allowed(combination: Combination) -> bool:
        """A sparse strategy spends no tuple on a combination the grid's own filters drop; the full grid
        keeps every combination here, so each dropped point is counted under its reason below."""
        return entry.coverage.strategy == "full" or filters.reason({**defaults, **combination}, known) is None

    combinations, size, picked, guarantee = _picked(entry, grid, allowed, lazy=not keep)
    plan = BlockPlan(index, definition.name, entry.coverage.describe(), size, picked, guarantee)
    for combination in combinations:
        params = definition.resolve({a: int(v) for a, v in combination.items() if a in definition.axes})
        params = {a: params[a] for a in definition.axes}
        tunables = {t: combination[t] for t in definition.tunables if t in combination}
        for point in _crossed(spec, entry, definition, params, tunables):
            reason = point_reason(point, definition, filters, limits, where)
            if reason:
                example = f"{point.shape} {point.tunables_text} {point.dtype} {point.platform} lnc={point.lnc}"
                plan.drops.add(f"{definition.name}: {_grouped(reason)}", f"{' '.join(example.split())}: {reason}")
                continue
            plan.valid[point.dtype] += 1
            if check is not None:
                check(point)
            if entry.search is not None:
                plan.targets.append(SearchTarget(point, index, entry.search, _space(entry, definition)))
            elif keep:
                plan.points.append(point)
    return plan


def _picked(
    entry: KernelGrid, grid: dict[str, list[Value]], allowed: Callable[[Combination], bool], lazy: bool
) -> tuple[Iterable[Combination], int, int, str]:
    """The combinations (one at a time for a full grid when `lazy`: a million are never held at once),
    the grid's size, how many were picked, and the guarantee."""
    size = math.prod(len(v) for v in grid.values())
    if lazy and entry.coverage.strategy == "full":
        names = list(grid)
        combinations = (dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values()))
        return combinations, size, size, "every combination"
    picked = pick(entry.coverage, grid, allowed)
    guarantee = _guarantee(picked.guarantee, picked.combinations, grid, entry)
    return picked.combinations, picked.grid_size, len(picked.combinations), guarantee


def _guarantee(text: str, combinations: list[Combination], grid: dict[str, list[Value]], entry: KernelGrid) -> str:
    """The strategy's guarantee, with the tuples it covered (fewer when filters left some out)."""
    if entry.coverage.strategy not in ("pairwise", "nwise") or len(grid) < 2:
        return text
    covered, total = tuple_coverage(combinations, grid, min(entry.coverage.tuple_size, len(grid)))
    if covered < total:
        return f"{text}; {covered} of {total} covered, the other {total - covered} occur only in filtered combinations"
    return f"{text} ({covered} of {total})"


def _grouped(reason: str) -> str:
    """Reasons that differ only in their sizes (numbers of 3 digits or more) count as one; `validate`
    shows one example in full. The block's own filters are named as written."""
    if reason.startswith(("where `", "excluded (")):
        return reason
    return re.sub(r"\d{1,3}(,\d{3})+|\d{3,}", "#", reason)


def _space(entry: KernelGrid, definition: KernelDefinition) -> dict[str, list[Value]]:
    given = entry.tunable_axes
    return {t: list(given.get(t, values)) for t, values in definition.tunables.items()}


def _crossed(
    spec: SweepSpec, entry: KernelGrid, definition: KernelDefinition, params: dict[str, int], tunables: dict[str, Value]
) -> Iterator[Point]:
    toolchains = entry.toolchains or [t.name for t in spec.toolchains] or [""]
    for dtype in dict.fromkeys(entry.dtypes):
        for platform in dict.fromkeys(spec.platforms):
            lncs = entry.lnc or [get_platform(platform).default_lnc]
            for lnc in dict.fromkeys(lncs):
                for toolchain in dict.fromkeys(toolchains):
                    yield Point(
                        sweep=spec.name,
                        kernel=definition.name,
                        kernel_ref=entry.ref,
                        params=params,
                        dtype=dtype,
                        platform=platform,
                        lnc=lnc,
                        seed=spec.seed,
                        tunables=tunables,
                        toolchain_name=toolchain,
                    )


def point_reason(
    point: Point, definition: KernelDefinition, filters: Filters, limits: Limits, where: str
) -> str | None:
    """Why `point` cannot be measured, or None: the platform's LNC settings and device memory, the
    kernel's own rules, the block's filters, the host's memory, the unrolled-instruction limit. A
    definition that raises anything but InvalidShapeError is the definition's bug: a usage error."""
    platform = get_platform(point.platform)
    if point.lnc not in platform.supported_lnc:
        return f"{platform.name} runs at LNC {', '.join(map(str, platform.supported_lnc))}, not {point.lnc}"
    values: dict[str, Value] = {**point.params, **point.tunables}
    values |= {"dtype": point.dtype, "platform": point.platform, "lnc": point.lnc, "toolchain": point.toolchain_name}
    reason = filters.reason(values)
    if reason:
        return reason
    try:
        definition.check(point.params, point.dtype)
        if point.tunables:
            definition.check_tunables(point.params, point.tunables, point.dtype)
        tensors = definition.input_infos(point.params, point.dtype) + definition.output_infos(point.params, point.dtype)
    except InvalidShapeError as exc:
        return str(exc)
    except Exception as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(
            f"{where}: {definition.name}.check({point.shape}, {point.dtype}) raised {detail}; fix the kernel definition"
        ) from None
    total = sum(math.prod(t.shape) * itemsize(t.dtype) for t in tensors)
    needs = f"needs {total / 2**30:.1f} GiB of inputs and outputs"
    if total > platform.hbm_bytes_per_chip:
        return f"{needs}, more than {platform.name}'s {platform.hbm_bytes_per_chip / 2**30:.0f} GiB of device memory"
    if limits.host_memory_bytes is not None and total * HOST_MEMORY_SHARE > limits.host_memory_bytes:
        return (
            f"{needs}; with its working copies that is more than this host's "
            f"{limits.host_memory_bytes / 2**30:.0f} GiB of memory; use a smaller shape or a host with more memory"
        )
    return _unrolled_reason(point, definition, limits.unrolled_instructions, where)


def _unrolled_reason(point: Point, definition: KernelDefinition, limit: int, where: str) -> str | None:
    """A kernel that unrolls to too many instructions would only fail at its trace or compile timeout,
    after holding a compile slot for it (real-host audit 2, N5)."""
    try:
        unrolled = (
            definition.unrolled(point.params, point.tunables) if point.tunables else definition.unrolled(point.params)
        )
    except Exception as exc:  # the definition's own bug, reported as such
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(f"{where}: {definition.name}.unrolled() raised {detail}; fix the kernel definition") from None
    if unrolled is not None and unrolled.instructions > limit:
        return (
            f"unrolls to about {unrolled.instructions:,} instructions (NKI unrolls every loop), over "
            f"execution.max_unrolled_instructions={limit:,}; shrink {unrolled.axis}"
        )
    return None


def block_bound(spec: SweepSpec, entry: KernelGrid) -> int:
    """At most how many points the block gives (a search: its budget per shape), before anything is
    imported or checked: what `--max-points` is held against."""
    grid: dict[str, list[int | str]] = {a: list(dict.fromkeys(v)) for a, v in entry.axes.items()}
    if entry.search is None:
        grid |= {t: list(dict.fromkeys(v)) for t, v in entry.tunable_axes.items()}
    size = math.prod(len(v) for v in grid.values())
    if entry.coverage.strategy == "random":
        size = min(size, entry.coverage.budget or 0)
    elif entry.coverage.strategy != "full" and len(grid) > 1:
        size = len(pick(entry.coverage, grid, lambda _: True).combinations)
    toolchains = len(set(entry.toolchains)) or len(spec.toolchains) or 1
    crossed = len(set(entry.dtypes)) * len(set(spec.platforms)) * (len(set(entry.lnc)) or 1) * toolchains
    return size * crossed * (entry.search.budget if entry.search else 1)


def point_check(spec: SweepSpec, target: SearchTarget) -> Callable[[Point], str | None]:
    """Why a configuration a search proposes for `target` cannot run, or None: the same checks as a
    grid point's (kernel rules with its tunables, the block's filters, the limits)."""
    from kernelsweep.kernels import load_kernel

    entry = spec.kernels[target.block]
    definition = load_kernel(entry.ref)
    where = f"kernels[{target.block}]"
    filters = filters_for(entry, definition, where)
    limits = Limits(spec.execution.max_unrolled_instructions)
    return lambda point: point_reason(point, definition, filters, limits, where)
