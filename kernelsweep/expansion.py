"""A spec's points: counted before they are built, each checked against its kernel's own rules,
each swept once. Everything here runs before any work, and bounds its own cost: points are counted
from list lengths before any is built, and user code (kernel modules, check(), tensor infos) is
guarded so that whatever it does is one line.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kernelsweep.baselines import nki_ref, twin
from kernelsweep.dtypes import itemsize
from kernelsweep.errors import InvalidShapeError, UsageError
from kernelsweep.kernels import KernelDefinition, KernelSourceNotFound, load_kernel, nki_kernel_source
from kernelsweep.platforms import PlatformName, get_platform
from kernelsweep.spec import KernelGrid, Point, SweepSpec

DEFAULT_MAX_POINTS = 10_000  # above this a sweep must be asked for (`--max-points`)
# A point's inputs are generated in host memory, and the reference (and, simulated, the device) works
# on float64 copies: a point may take several times its tensors' size. Kept under a quarter of it.
HOST_MEMORY_SHARE = 4
# Names that become file names, object keys and column names.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Expansion:
    """A spec's points, each once, and what the user should hear about how they were derived."""

    points: list[Point]
    notices: list[str]


def count_points(spec: SweepSpec) -> int:
    """How many points the spec expands to, from list lengths alone: no kernel imported, no point built."""
    per_platform = sum(
        len(set(entry.dtypes))
        * math.prod(len(set(values)) for values in entry.axes.values())
        * (1 + bool(entry.baseline))  # a baseline's twin of each point
        for entry in spec.kernels
    )
    return len(set(spec.platforms)) * per_platform


def expand(
    spec: SweepSpec, source: str = "spec", *, max_points: int = DEFAULT_MAX_POINTS, host_memory_bytes: int | None = None
) -> list[Point]:
    return expand_spec(spec, source, max_points=max_points, host_memory_bytes=host_memory_bytes).points


def expand_spec(
    spec: SweepSpec, source: str = "spec", *, max_points: int = DEFAULT_MAX_POINTS, host_memory_bytes: int | None = None
) -> Expansion:
    """The full grid, each point once, checked against each kernel's own rules; all errors before any work.

    A value, dtype, platform or kernel block listed twice is swept once (with a notice): two rows with
    one `row_id` would otherwise land in one object. With `host_memory_bytes` (the host that will run
    the points), a point too big for it is refused too, before its inputs could exhaust it.
    """
    total = count_points(spec)
    if total > max_points:
        raise UsageError(
            f"{source}: expands to {total:,} points, over the limit of {max_points:,}; shrink the grid, "
            f"or pass --max-points {total} if you mean it"
        )
    notices = _repeated_values(spec, source)
    points: dict[str, Point] = {}
    block_of: dict[str, int] = {}
    repeats: Counter[int] = Counter()
    for index, entry in enumerate(spec.kernels):
        where = f"{source}: kernels[{index}]"
        definition = _import_kernel(entry.ref, where)
        _check_definition(definition, entry, where)
        _check_baseline(entry.baseline, where)
        axes = [a for a in definition.axes if a in entry.axes]
        for values in itertools.product(*(dict.fromkeys(entry.axes[a]) for a in axes)):
            params = definition.resolve(dict(zip(axes, values, strict=True)))
            params = {a: params[a] for a in definition.axes}
            for dtype in dict.fromkeys(entry.dtypes):
                _check_point(definition, params, dtype, spec.platforms, where, host_memory_bytes)
                _check_unrolled(definition, params, spec.execution.max_unrolled_instructions, where)
                for point in with_baseline(_per_platform(spec, entry.ref, definition, params, dtype), entry.baseline):
                    earlier = points.get(point.point_id)
                    if earlier is None:
                        points[point.point_id], block_of[point.point_id] = point, index
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
    return Expansion(list(points.values()), notices)


def with_baseline(points: list[Point], baseline: str) -> list[Point]:
    """Each point, then (when the block names a baseline) its baseline's twin (kernelsweep.baselines)."""
    if not baseline:
        return points
    return [p for point in points for p in (point.model_copy(update={"baseline": baseline}), twin(point, baseline))]


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


def _check_point(
    definition: KernelDefinition,
    params: dict[str, int],
    dtype: str,
    platforms: list[PlatformName],
    where: str,
    host_memory_bytes: int | None,
) -> None:
    """The kernel's own rules, then what every kernel must satisfy: tensors with safe names that fit on
    the smallest device swept (a shape that cannot fit would only fail after its inputs filled host memory)."""
    shape = ",".join(f"{k}={v}" for k, v in params.items())
    try:
        definition.check(params, dtype)
        tensors = definition.input_infos(params, dtype) + definition.output_infos(params, dtype)
        sizes = [(t.name, math.prod(t.shape), itemsize(t.dtype)) for t in tensors]
    except InvalidShapeError as exc:
        raise UsageError(f"{where}: {definition.name} {shape} {dtype} is invalid: {exc}") from None
    except Exception as exc:  # the definition's own bug, reported as such rather than as ours
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(
            f"{where}: {definition.name}.check({shape}, {dtype}) raised {detail}; fix the kernel definition"
        ) from None
    for name, elements, _ in sizes:
        if not _SAFE_NAME.match(str(name)):
            raise UsageError(
                f"{where}: tensor name {str(name)[:80]!r} of {definition.name} cannot name a file; "
                "use letters, digits, '.', '_' and '-'"
            )
        if elements <= 0:
            raise UsageError(f"{where}: {definition.name} {shape} {dtype} gives tensor {name} no elements")
    total = sum(elements * size for _, elements, size in sizes)
    smallest = min((get_platform(p) for p in platforms), key=lambda p: p.hbm_bytes_per_chip)
    needs = f"{where}: {definition.name} {shape} {dtype} needs {total / 2**30:.1f} GiB of inputs and outputs"
    if total > smallest.hbm_bytes_per_chip:
        raise UsageError(
            f"{needs}, more than {smallest.name}'s {smallest.hbm_bytes_per_chip / 2**30:.0f} GiB of device memory; "
            "use a smaller shape"
        )
    if host_memory_bytes is not None and total * HOST_MEMORY_SHARE > host_memory_bytes:
        raise UsageError(
            f"{needs}; with its working copies that is more than this host's {host_memory_bytes / 2**30:.0f} GiB "
            "of memory; use a smaller shape or a host with more memory"
        )


def _check_unrolled(definition: KernelDefinition, params: dict[str, int], limit: int, where: str) -> None:
    """A kernel that unrolls to too many instructions would only fail at its trace or compile timeout,
    after holding a compile slot for it (real-host audit 2, N5): refused here, naming what to shrink."""
    try:
        unrolled = definition.unrolled(params)
    except Exception as exc:  # the definition's own bug, reported as such
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(f"{where}: {definition.name}.unrolled() raised {detail}; fix the kernel definition") from None
    if unrolled is not None and unrolled.instructions > limit:
        shape = ",".join(f"{k}={v}" for k, v in params.items())
        raise UsageError(
            f"{where}: {definition.name} {shape} unrolls to about {unrolled.instructions:,} instructions (NKI "
            f"unrolls every loop), over execution.max_unrolled_instructions={limit:,}; shrink {unrolled.axis}"
        )


def _per_platform(
    spec: SweepSpec, ref: str, definition: KernelDefinition, params: dict[str, int], dtype: str
) -> list[Point]:
    return [
        Point(
            sweep=spec.name,
            kernel=definition.name,
            kernel_ref=ref,
            params=params,
            dtype=dtype,
            platform=platform,
            lnc=get_platform(platform).default_lnc,
            seed=spec.seed,
        )
        for platform in dict.fromkeys(spec.platforms)
    ]
