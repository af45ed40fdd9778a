"""The best configuration for a kernel call, read at run time: no Prefect, no server, no pyarrow.

A model's code or a kernel library asks `best(kernel, shape, dtype=..., platform=..., source=...)`
where `source` is a file `kernelsweep tuned export` wrote (JSON or TOML) or a results folder (its
tuned store, `<results>/_tuned/`). What comes back always says where its tunables came from: the
exact key, the nearest tuned shape of the same kernel, an older SDK's best, or the kernel's defaults
when nothing near was ever tuned. A source is read once per file version (its modification time),
so a lookup per call costs a dictionary walk.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelsweep.tuned.keys import numbers, sealed, shape_distance, shape_text, version_order

STORE_FOLDER = "_tuned"  # under a results location; kernelsweep.tuned.store writes it
EXACT, NEAREST, OLDER_SDK, DEFAULTS = "exact", "nearest shape", "older sdk", "defaults"


@dataclass(frozen=True)
class Tuned:
    """Tunables to call the kernel with, how they were found (`match`) and why, in words."""

    tunables: dict[str, int | str]
    match: str
    why: str
    entry: dict[str, Any] | None = field(default=None, repr=False)  # the stored entry, None for defaults


@dataclass(frozen=True)
class Table:
    """Every stored best of a source, and each kernel's default tunables where the source has them."""

    entries: tuple[dict[str, Any], ...]
    defaults: dict[str, dict[str, int | str]]
    source: str

    def best(
        self,
        kernel: str,
        shape: str | dict[str, Any],
        *,
        dtype: str,
        platform: str,
        lnc: int | None = None,
        sdk: str | dict[str, str] | None = None,
    ) -> Tuned:
        """The stored best for this call, else the nearest tuned shape, else the kernel's defaults."""
        wanted = numbers(shape_text(shape))
        candidates = [
            e
            for e in self.entries
            if (k := e["key"])["kernel"] == kernel
            and k["dtype"] == dtype
            and k["platform"] == platform
            and (lnc is None or k.get("lnc") == lnc)
            and _sdk_usable(k["sdk"], sdk)
        ]
        distances = [_distance(e, wanted) for e in candidates]
        nearest = min(distances, default=math.inf)
        if math.isfinite(nearest):
            at = [e for e, d in zip(candidates, distances, strict=True) if d == nearest]
            return _found(max(at, key=lambda e: _sdk_rank(e, sdk)), nearest, sdk)
        defaults = self.defaults.get(kernel)
        near = f"no tuned {kernel} {dtype} on {platform}" + (f" at LNC {lnc}" if lnc is not None else "")
        if defaults is not None:
            return Tuned(dict(defaults), DEFAULTS, f"{near} near {shape_text(shape)}: the kernel's defaults")
        return Tuned({}, DEFAULTS, f"{near} near {shape_text(shape)}: call the kernel with its own defaults")


def _distance(entry: dict[str, Any], wanted: dict[str, int | str]) -> float:
    return shape_distance(numbers(entry["key"]["shape"]), wanted)


def _compiler(sdk: str | dict[str, str] | None) -> str | None:
    return sdk if isinstance(sdk, str) or sdk is None else sdk.get("compiler")


def _sdk_usable(stored: dict[str, str | None], asked: str | dict[str, str] | None) -> bool:
    """Any SDK when none is asked; else the asked one or an older compiler (never a newer one: a best
    found on a newer SDK may use what the asked one cannot compile)."""
    compiler = _compiler(asked)
    if compiler is None:
        return True
    return version_order(stored.get("compiler")) <= version_order(compiler)


def _sdk_rank(entry: dict[str, Any], asked: str | dict[str, str] | None) -> tuple[bool, Any, str]:
    """Among one shape's usable entries: every asked version matching first, then the newest compiler,
    then the most recently confirmed."""
    stored = entry["key"]["sdk"]
    exact = isinstance(asked, dict) and all(stored.get(n) == v for n, v in asked.items())
    return exact, version_order(stored.get("compiler")), entry["confirmed"]["at"]


def _found(entry: dict[str, Any], distance: float, sdk: str | dict[str, str] | None) -> Tuned:
    key, tunables = entry["key"], dict(entry["best"]["tunables"])
    compiler = _compiler(sdk)
    stored = key["sdk"].get("compiler")
    if distance > 0:
        return Tuned(tunables, NEAREST, f"nearest tuned shape {key['shape']} ({distance:.2g} octaves away)", entry)
    if compiler is not None and stored != compiler:
        return Tuned(tunables, OLDER_SDK, f"tuned on compiler {stored}, not yet on {compiler}", entry)
    return Tuned(tunables, EXACT, f"tuned {key['shape']} on compiler {stored}", entry)


def read_table(source: str | os.PathLike[str]) -> Table:
    """A source's entries: an exported file (JSON, or TOML by its name) or a results folder's store.
    A store entry whose seal does not match its content (edited by hand) is left out, with a warning."""
    path = Path(source)
    stat = path.stat()
    return _read(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _read(path: str, _mtime_ns: int, _size: int) -> Table:
    where = Path(path)
    if where.is_dir():
        folder = where if where.name == STORE_FOLDER else where / STORE_FOLDER
        documents = [json.loads(p.read_bytes()) for p in sorted(folder.rglob("*.json")) if not p.name.startswith(".")]
        return Table(tuple(_kept(documents, path)), {}, path)
    text = where.read_bytes()
    if where.suffix == ".toml":
        import tomllib  # 7 ms of import a JSON reader never pays

        document = tomllib.loads(text.decode())
    else:
        document = json.loads(text)
    return Table(tuple(_kept(document.get("tuned", []), path)), document.get("defaults", {}), path)


def _kept(entries: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    good = [e for e in entries if sealed(e)]
    if len(good) < len(entries):
        warnings.warn(
            f"{source}: {len(entries) - len(good)} tuned entries do not match their seal (edited by hand?) "
            "and are ignored; write them with a search or `kernelsweep report --export-best`",
            stacklevel=3,
        )
    return good


def best(
    kernel: str,
    shape: str | dict[str, Any],
    *,
    dtype: str,
    platform: str,
    source: str | os.PathLike[str],
    lnc: int | None = None,
    sdk: str | dict[str, str] | None = None,
) -> Tuned:
    """The tunables to call `kernel` with at `shape`, from `source` (read once per file version)."""
    return read_table(source).best(kernel, shape, dtype=dtype, platform=platform, lnc=lnc, sdk=sdk)
