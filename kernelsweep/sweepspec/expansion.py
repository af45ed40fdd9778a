"""A spec's points: counted before they are built, each checked against its kernel's own rules, the
platforms and the block's filters (kernelsweep.sweepspec.blocks: a point that fails is dropped with its reason),
each swept once. Everything here runs before any work, and bounds its own cost: points are counted
from list lengths before any is built, and user code (kernel modules, check(), tensor infos) is
guarded so that whatever it does is one line.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelsweep.baselines import nki_ref, twin
from kernelsweep.errors import UsageError
from kernelsweep.kernels import KernelDefinition, KernelSourceNotFound, load_kernel, nki_kernel_source
from kernelsweep.sweepspec.blocks import BlockPlan, Limits, SearchTarget, block_bound, check_tunables, plan_block
from kernelsweep.sweepspec.constraints import Drops
from kernelsweep.sweepspec.models import KernelGrid, SweepSpec
from kernelsweep.sweepspec.point import Point

DEFAULT_MAX_POINTS = 10_000  # above this a sweep must be asked for (`--max-points`)
# Names that become file names, object keys and column names.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Expansion:
    """A spec's points, each once, its search targets, what each block picked and dropped, and what the
    user should hear about how they were derived."""

    points: list[Point]
    notices: list[str]
    blocks: list[BlockPlan] = field(default_factory=list)
    targets: list[SearchTarget] = field(default_factory=list)

    @property
    def drops(self) -> Drops:
        merged = Drops()
        for block in self.blocks:
            for reason, count in block.drops.counts.items():
                merged.add(reason, block.drops.examples[reason], count)
        return merged


def count_points(spec: SweepSpec) -> int:
    """At most how many points the spec expands to (a search counts its budget per shape), from list
    lengths and covering arrays alone: no kernel imported, no point built."""
    return sum(block_bound(spec, entry) * (1 + bool(entry.baseline)) for entry in spec.kernels)  # + baseline twins


def expand(
    spec: SweepSpec, source: str = "spec", *, max_points: int = DEFAULT_MAX_POINTS, host_memory_bytes: int | None = None
) -> list[Point]:
    return expand_spec(spec, source, max_points=max_points, host_memory_bytes=host_memory_bytes).points


def expand_spec(
    spec: SweepSpec, source: str = "spec", *, max_points: int = DEFAULT_MAX_POINTS, host_memory_bytes: int | None = None
) -> Expansion:
    """Each block's points (kernelsweep.sweepspec.blocks), each once; points the kernel, the platform or the
    block's filters rule out are dropped with their reason, and the spec fails only when none is left.

    A value, dtype, platform or kernel block listed twice is swept once (with a notice): two rows with
    one `row_id` would otherwise land in one object. With `host_memory_bytes` (the host that will run
    the points), a point too big for it is refused, before its inputs could exhaust it.
    """
    _check_total(spec, source, max_points)
    notices = _repeated_values(spec, source)
    points: dict[str, Point] = {}
    targets: dict[str, SearchTarget] = {}
    block_of: dict[str, int] = {}
    repeats: Counter[int] = Counter()
    plans = []
    for index, entry in enumerate(spec.kernels):
        where = f"{source}: kernels[{index}]"
        definition = _import_kernel(entry.ref, where)
        _check_definition(definition, entry, where)
        check_tunables(entry, definition, where)
        _check_baseline(entry.baseline, where)
        limits = Limits(spec.execution.max_unrolled_instructions, host_memory_bytes)
        plan = plan_block(spec, index, entry, definition, where, limits)
        plans.append(plan)
        found = [(p, None) for p in with_baseline(plan.points, entry.baseline)] + [(t.point, t) for t in plan.targets]
        for point, target in found:
            _check_tensors(definition, point, where)
            earlier = points.get(point.point_id) or (
                targets[point.point_id].point if point.point_id in targets else None
            )
            if earlier is None:
                block_of[point.point_id] = index
                if target is None:
                    points[point.point_id] = point
                else:
                    targets[point.point_id] = target
            elif earlier.kernel_ref != point.kernel_ref:
                raise UsageError(
                    f"{where}: {entry.ref} and kernels[{block_of[point.point_id]}] "
                    f"({earlier.kernel_ref}) are both named {point.kernel!r}, so their rows would "
                    "share ids; give one of them another name"
                )
            else:
                repeats[index] += 1
    notices += [
        f"{source}: kernels[{index}] repeats {n} point(s) listed before it; each is swept once"
        for index, n in sorted(repeats.items())
    ]
    expansion = Expansion(list(points.values()), notices, plans, list(targets.values()))
    if not points and not targets:
        drops = expansion.drops
        reasons = drops.counts.most_common(1)
        why = f"; {reasons[0][1]} of them: {drops.examples[reasons[0][0]]}" if reasons else ""
        raise UsageError(
            f"{source}: no valid point is left: the kernels' rules, the platforms and the filters drop all "
            f"{drops.total}{why}; `kernelsweep validate` lists every reason"
        )
    return expansion


def count_spec(
    spec: SweepSpec, source: str = "spec", *, max_points: int = DEFAULT_MAX_POINTS, host_memory_bytes: int | None = None
) -> Expansion:
    """Every point checked as `expand_spec` checks it, one at a time, and counted, none kept (the plans'
    `valid` counts): `validate` of a million-point grid in bounded memory. Blocks that list the same
    points count them once each (only `expand_spec` merges them)."""
    _check_total(spec, source, max_points)
    refs: dict[str, tuple[int, str]] = {}
    plans = []
    for index, entry in enumerate(spec.kernels):
        where = f"{source}: kernels[{index}]"
        definition = _import_kernel(entry.ref, where)
        earlier, ref = refs.setdefault(definition.name, (index, entry.ref))
        if ref != entry.ref:
            raise UsageError(
                f"{where}: {entry.ref} and kernels[{earlier}] ({ref}) are both named {definition.name!r}, so their "
                "rows would share ids; give one of them another name"
            )
        _check_definition(definition, entry, where)
        check_tunables(entry, definition, where)
        limits = Limits(spec.execution.max_unrolled_instructions, host_memory_bytes)
        check = functools.partial(_check_tensors, definition, where=where)
        plans.append(plan_block(spec, index, entry, definition, where, limits, keep=False, check=check))
    return Expansion([], _repeated_values(spec, source), plans)


def _check_total(spec: SweepSpec, source: str, max_points: int) -> None:
    total = count_points(spec)
    if total > max_points:
        raise UsageError(
            f"{source}: expands to {total:,} points, over the limit of {max_points:,}; shrink the grid, "
            f"or pass --max-points {total} if you mean it"
        )


def with_baseline(points: list[Point], baseline: str) -> list[Point]:
    """Each point, then (when the block names a baseline) its baseline's twin (kernelsweep.baselines)."""
    if not baseline:
        return points
    paired = [p for point in points for p in (point.model_copy(update={"baseline": baseline}), twin(point, baseline))]
    return list({p.point_id: p for p in paired}.values())  # a shape's configurations share one baseline point


def _check_baseline(baseline: str, where: str) -> None:
    """The baseline's NKI kernel must be findable as source, as the tracer will need it."""
    if baseline:
        try:
            nki_kernel_source(nki_ref(baseline))
        except KernelSourceNotFound as exc:
            raise UsageError(f"{where}: baseline {baseline!r}: {exc}; check the module is on the Python path") from None


def _repeated_values(spec: SweepSpec, source: str) -> list[str]:
    lists: list[tuple[str, Sequence[object]]] = [("platforms", spec.platforms)]
    for index, entry in enumerate(spec.kernels):
        lists.append((f"kernels[{index}].dtypes", entry.dtypes))
        lists += [(f"kernels[{index}].grid.{axis}", values) for axis, values in entry.axes.items()]
    return [
        f"{source}: {where} lists {value} {'twice' if count == 2 else f'{count} times'}; swept once"
        for where, values in lists
        for value, count in Counter(values).items()
        if count > 1
    ]


def _check_definition(definition: KernelDefinition, entry: KernelGrid, where: str) -> None:
    if not _SAFE_NAME.match(str(definition.name)):
        raise UsageError(
            f"{where}: kernel name {str(definition.name)[:80]!r} cannot name files and keys; "
            "use letters, digits, '.', '_' and '-' (at most 64)"
        )
    bad_axes = [a for a in definition.axes if not _AXIS_NAME.match(str(a))]
    if bad_axes:
        raise UsageError(
            f"{where}: axis name {str(bad_axes[0])[:80]!r} of kernel {definition.name} is not an identifier"
        )
    unknown = sorted(set(entry.axes) - set(definition.axes))
    if unknown:
        raise UsageError(
            f"{where}: kernel {definition.name} takes no axis {unknown[0]!r}; its axes are {', '.join(definition.axes)}"
        )
    missing = [a for a in definition.axes if a not in entry.axes and a not in definition.defaults]
    if missing:
        raise UsageError(f"{where}: axis {missing[0]!r} of kernel {definition.name} needs values")
    for dtype in entry.dtypes:
        if dtype not in definition.dtypes:
            raise UsageError(
                f"{where}: kernel {definition.name} does not support dtype {dtype}; "
                f"use one of {', '.join(definition.dtypes)}"
            )


def _import_kernel(ref: str, where: str) -> KernelDefinition:
    """A user's module runs arbitrary code at import: whatever it raises, or an exit, is one line."""
    try:
        return load_kernel(ref)
    except (ImportError, AttributeError, TypeError) as exc:
        raise UsageError(
            f"{where}: cannot import kernel {ref!r} ({exc}); "
            "give module:attribute of a KernelDefinition on the Python path"
        ) from None
    except (Exception, SystemExit) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(f"{where}: importing kernel {ref!r} failed ({detail}); fix the module") from None


def _check_tensors(definition: KernelDefinition, point: Point, where: str) -> None:
    """What every kernel must satisfy whatever the point: tensors with safe names and elements."""
    tensors = definition.input_infos(point.params, point.dtype) + definition.output_infos(point.params, point.dtype)
    for tensor in tensors:
        if not _SAFE_NAME.match(str(tensor.name)):
            raise UsageError(
                f"{where}: tensor name {str(tensor.name)[:80]!r} of {definition.name} cannot name a file; "
                "use letters, digits, '.', '_' and '-'"
            )
        if math.prod(tensor.shape) <= 0:
            raise UsageError(
                f"{where}: {definition.name} {point.shape} {point.dtype} gives tensor {tensor.name} no elements"
            )
