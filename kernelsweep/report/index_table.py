"""The report index's table (`kernelsweep.report.index`): a few columns of every row, text as
dictionary codes, one row per row id, each row's variant, sorted by series then by time.

Every step works on the integer codes of the dictionary-encoded columns, never on the text: at a
year of nights (a million rows) casting a column back to text, joining on it or hashing every row
id at once costs several times the memory of the table itself, which was most of a report's peak.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kernelsweep.report.load import variant_parts
from kernelsweep.sweepspec.shapes import natural_order

SERIES = ["kernel", "shape", "dtype", "platform", "variant"]
VARIANT = ["platform", "lnc", "tunables", "toolchain_name"]  # what a row's variant is made of
ORDER = [("run_date", "ascending", "at_start"), ("started_at", "ascending", "at_start")]  # no time: oldest


def codes(table: pa.Table, name: str) -> np.ndarray:
    """A dictionary column's codes (-1 for null); an integer column's values (-1 for null)."""
    column = table.column(name).combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.indices
    return column.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def dictionary(table: pa.Table, name: str) -> list[str | None]:
    return table.column(name).combine_chunks().dictionary.to_pylist()


def without_copies(table: pa.Table) -> pa.Table:
    """Per row id, the row of the latest attempt (re-executed flow runs keep their row ids).

    A row id is made from its run's id and its point (kernelsweep.results.rows.row_id), so copies of
    a row are only ever within one run: each run's ids are checked apart, and only the runs that hold
    copies are sorted."""
    runs = codes(table, "flow_run_id")
    order = np.argsort(runs, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(runs[order])) + 1)
    ids = table.column("row_id").combine_chunks()
    copied = [g for g in groups if len(g) > 1 and pc.count_distinct(ids.take(g)).as_py() < len(g)]
    if not copied:
        return table
    suspects = np.concatenate(copied)
    keep = np.ones(table.num_rows, dtype=bool)
    keep[suspects] = False
    keep[suspects[latest_of(table.take(suspects))]] = True
    return table.filter(pa.array(keep))


def latest_of(table: pa.Table) -> np.ndarray:
    """The positions of each row id's latest row (by run date, then start; ties: the later copy)."""
    order = pc.sort_indices(table, sort_keys=[("row_id", "ascending", "at_start"), *ORDER]).to_numpy()
    ids = table.column("row_id").take(order).to_numpy(zero_copy_only=False)
    return np.sort(order[np.r_[ids[1:] != ids[:-1], True]]) if len(ids) else order


def with_variant(table: pa.Table) -> pa.Table:
    """A dictionary-encoded `variant` column, worked out once per distinct (platform, LNC, tunables,
    toolchain): a search's configurations or two SDKs are never one series."""
    combos, inverse = distinct(table, VARIANT)
    texts = {n: dictionary(table, n) for n in VARIANT if n != "lnc"}
    names: dict[str, int] = {}
    code_of_combo = [
        names.setdefault(
            " ".join(
                variant_parts(
                    texts["platform"][platform] or "",
                    None if lnc < 0 else int(lnc),
                    texts["tunables"][tunables] if tunables >= 0 else None,
                    texts["toolchain_name"][toolchain] if toolchain >= 0 else None,
                )
            ),
            len(names),
        )
        for platform, lnc, tunables, toolchain in combos.tolist()
    ]
    variant = np.asarray(code_of_combo, dtype=np.int32)[inverse]
    return table.append_column("variant", pa.DictionaryArray.from_arrays(variant, list(names)))


def by_series(table: pa.Table) -> pa.Table:
    """Sorted by series (shapes in numeric order), then by when each row was measured."""
    combos, inverse = distinct(table, SERIES)
    texts = [dictionary(table, n) for n in SERIES]
    keys = [tuple(_text(texts[c], code) for c, code in enumerate(combo)) for combo in combos.tolist()]
    rank = np.empty(len(keys), dtype=np.int64)
    rank[sorted(range(len(keys)), key=lambda k: natural_order(keys[k]))] = np.arange(len(keys))
    started = table.column("started_at").cast(pa.int64()).fill_null(np.iinfo(np.int64).min).to_numpy()
    dates = table.column("run_date").cast(pa.int32()).fill_null(np.iinfo(np.int32).min).to_numpy()
    order = np.lexsort((started, dates, rank[inverse]))
    return table.take(order)


def _text(names: list[str | None], code: int) -> str:
    return (names[code] or "") if code >= 0 else ""


def distinct(table: pa.Table, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct combinations of the columns' codes (one row each), and each row's combination.

    The codes are folded into one integer key per row (re-numbered densely whenever the next column
    could overflow it), so this is a sort of integers, not of rows."""
    columns = [codes(table, n) for n in names]
    key = np.zeros(table.num_rows, dtype=np.int64)
    for column in columns:
        width = int(column.max(initial=-1)) + 2  # codes run from -1 (null)
        if int(key.max(initial=0)) >= np.iinfo(np.int64).max // width:
            key = np.unique(key, return_inverse=True)[1].ravel()
        key = key * width + (column + 1)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    combos = np.stack([column[first] for column in columns], axis=1) if columns else np.empty((0, 0), np.int64)
    return combos, inverse.ravel()
