"""Each result column is declared once, as a field of `Row`: the Arrow schema is derived from it, and the
report's rows, the run summary and docs/schema.md are checked against it here.

Adding a column: one field on `Row` (filled by the row part that knows the value), its line in
docs/schema.md, and a test of the value; the schema follows, and these tests say what else disagrees:
a part's field that is not the row's, a column no part and no identity argument fills, or one filled twice.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.report.load import ReportRow
from kernelsweep.results.outcome import RowSummary
from kernelsweep.results.row_parts import PARTS
from kernelsweep.results.rows import Row, build_row
from kernelsweep.results.schema import BASE_SCHEMA, SCHEMA_VERSION, arrow_fields

DOCS = Path(__file__).resolve().parents[1] / "docs" / "schema.md"
# sha256 of each schema as Arrow serializes it (names, order, types, nullability, metadata), as released:
# every dataset written since v4 reads back through it. Only a new SCHEMA_VERSION may change it.
RELEASED = {
    4: "acc5c0bdb917c1306892954074b88f4bafc0820d360fc83c2e96fac517e9ebfd",
    5: "946e436118b43e397d0591366eccdbf1a42a5bd05d210c104415133c48040b0e",
}


def test_the_derived_schema_is_the_released_one_byte_for_byte():
    assert hashlib.sha256(BASE_SCHEMA.serialize().to_pybytes()).hexdigest() == RELEASED[SCHEMA_VERSION]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Grown:
    """A row type with one column of each kind a new column may be."""

    status: str
    seconds_us: float | None = None
    count: int | None = None
    hit: bool | None = None
    at: datetime | None = None
    repeats: int | None = None  # a 32-bit column by name


def test_a_new_field_becomes_its_column_with_the_type_its_python_type_says():
    assert arrow_fields(_Grown) == [
        pa.field("status", pa.string(), nullable=False),
        pa.field("seconds_us", pa.float64()),
        pa.field("count", pa.int64()),
        pa.field("hit", pa.bool_()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("repeats", pa.int32()),
    ]


def test_a_field_whose_type_has_no_column_type_is_refused_by_name():
    @dataclasses.dataclass
    class Odd:
        ratio: complex | None = None

    with pytest.raises(TypeError, match=r"Odd\.ratio: complex \| None has no Arrow column type"):
        arrow_fields(Odd)


def _row_types() -> dict[str, str]:
    types = {f.name: str(f.type) for f in dataclasses.fields(Row) if f.name != "metrics"}
    return types | {name: f"{kind.__name__} | None" for name, kind in METRIC_FIELDS}


@pytest.mark.parametrize("projection", [ReportRow, RowSummary], ids=lambda t: t.__name__)
def test_the_report_rows_and_the_summary_are_projections_of_the_row(projection):
    """Each of their fields is a row column of the same type (nullable where a row's is not: older rows)."""
    row, partition = _row_types(), {"run_date"}  # run_date is the dataset's partition, not a row column
    for field in dataclasses.fields(projection):
        if field.name in partition:
            continue
        assert field.name in row, f"{projection.__name__}.{field.name} is no column of Row"
        assert str(field.type) in (row[field.name], f"{row[field.name]} | None"), field.name


def _doc_type(kind: pa.DataType) -> str:
    """An Arrow type as docs/schema.md writes it."""
    if pa.types.is_map(kind):
        return f"map<{_doc_type(kind.key_type)},{_doc_type(kind.item_type)}>"
    if pa.types.is_list(kind):
        return f"list<{_doc_type(kind.value_type)}>"
    if pa.types.is_struct(kind):
        return f"struct<{', '.join(kind.field(i).name for i in range(kind.num_fields))}>"
    if pa.types.is_timestamp(kind):
        return f"timestamp[{kind.unit}, {kind.tz}]"
    return str(kind)


def _documented(text: str, columns: set[str]) -> dict[str, tuple[str, bool | None]]:
    """column -> (type, nullable or None where the table has no null column) from the doc's tables."""
    found: dict[str, tuple[str, bool | None]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) < 3:
            continue
        nullable = {"yes": True, "no": False}.get(cells[2])
        for name in re.findall(r"`(\w+)`", cells[0]):
            if name in columns:
                assert name not in found, f"{name} is documented twice"
                found[name] = (cells[1], nullable)
    return found


def test_docs_schema_md_documents_every_column_with_its_type_and_nullability():
    text = DOCS.read_text()
    assert text.splitlines()[0] == f"# Results schema v{SCHEMA_VERSION}"
    documented = _documented(text, set(BASE_SCHEMA.names))
    for field in BASE_SCHEMA:
        assert field.name in documented, f"docs/schema.md lacks {field.name}"
        kind, nullable = documented[field.name]
        assert kind == _doc_type(field.type), field.name
        assert nullable in (None, field.nullable), field.name


def _filled_by_build_row() -> list[str]:
    """The columns `build_row` sets: its `Row(...)` call's keywords, and every field of each part it
    spreads in with `**columns(Part.of(...))` (or a variable holding one)."""
    tree = ast.parse(inspect.getsource(build_row))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "Row")
    parts = {part.__name__: part for part in PARTS}
    named = {
        target.id: part
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
        for part in parts
        if ast.unparse(node.value).startswith(f"{part}.of(")
    }
    filled = []
    for keyword in call.keywords:
        if keyword.arg is not None:
            filled.append(keyword.arg)
            continue
        given = [
            n.args[0] for n in ast.walk(keyword.value) if isinstance(n, ast.Call) and ast.unparse(n.func) == "columns"
        ]
        spread = [parts[named.get(ast.unparse(arg), ast.unparse(arg).partition(".of(")[0])] for arg in given]
        assert len(spread) == 1, f"build_row spreads {ast.unparse(keyword.value)}: not one row part"
        filled += [f.name for f in dataclasses.fields(spread[0])]
    return filled


def test_build_row_fills_every_column_of_the_row_exactly_once():
    """A new field on `Row` must be filled by one part (or an identity argument of `build_row`): a column
    declared but filled nowhere would be null in every row, and one filled twice is two truths."""
    filled = _filled_by_build_row()
    twice = sorted({name for name in filled if filled.count(name) > 1})
    assert twice == [], f"filled more than once: {twice}"
    defaulted = {"schema_version"}  # the version a row is written under: Row's default, never passed
    assert sorted(set(filled) ^ ({f.name for f in dataclasses.fields(Row)} - defaulted)) == []
