"""Each result column is declared once, as a field of the row part that fills it (`Row` is the parts'
union): the Arrow schema is derived from the declarations, and `Row`, the report's rows, the run summary
and docs/schema.md are checked against them here.

Adding a column: one field with its one-line docstring on the part that knows the value, filled by the
part's function, a test of the value, and the column's place at the end of `schema.COLUMN_ORDER` with a
new schema version; these tests say what else disagrees: a column declared twice or on `Row` itself, one
without its docstring, a released schema changed, a report field that is no column, docs/schema.md.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import re
import textwrap
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from kernelsweep.profiles.metrics import METRIC_FIELDS
from kernelsweep.report.load import ReportRow
from kernelsweep.results.columns import Int32
from kernelsweep.results.outcome import RowSummary
from kernelsweep.results.rows import PARTS, Row
from kernelsweep.results.schema import BASE_SCHEMA, COLUMN_ORDER, SCHEMA_VERSION, arrow_fields

DOCS = Path(__file__).resolve().parents[1] / "docs" / "schema.md"
# Each released schema: its column count and the sha256 of it as Arrow serializes it (names, order, types,
# nullability, metadata). Only a new SCHEMA_VERSION may change today's; the older ones stay the first
# columns of today's, so a reader that takes columns by position (Athena) reads every file alike.
RELEASED = {
    4: (154, "acc5c0bdb917c1306892954074b88f4bafc0820d360fc83c2e96fac517e9ebfd"),
    5: (156, "946e436118b43e397d0591366eccdbf1a42a5bd05d210c104415133c48040b0e"),
    6: (157, "678584a8578d0bf4cedd8ca4a876548105ece140ee076b7be821fa414b136b52"),
    7: (158, "01d392ed10ca0cd81f84760e223f85df6fa8d93cb093520910ee9c65a777ef9e"),
}


def _fingerprint(schema: pa.Schema) -> str:
    return hashlib.sha256(schema.serialize().to_pybytes()).hexdigest()


def test_the_derived_schema_is_the_released_one_byte_for_byte():
    assert (len(BASE_SCHEMA), _fingerprint(BASE_SCHEMA)) == RELEASED[SCHEMA_VERSION]


@pytest.mark.parametrize("version", sorted(RELEASED))
def test_every_released_schema_leads_todays_column_for_column(version):
    count, fingerprint = RELEASED[version]
    assert _fingerprint(pa.schema(list(BASE_SCHEMA)[:count])) == fingerprint


def test_each_column_is_declared_once_on_a_part_and_row_is_their_union():
    """Dataclass inheritance merges two parts' fields of one name without a word: two truths for one column."""
    declared = [name for part in PARTS for name in part.__dict__.get("__annotations__", {})]
    assert sorted({name for name in declared if declared.count(name) > 1}) == []
    assert Row.__dict__.get("__annotations__", {}) == {}, "declare a column on the part that fills it"
    assert sorted(declared) == sorted(f.name for f in dataclasses.fields(Row))
    assert sorted(COLUMN_ORDER) == sorted(declared)


def _docstrings(part: type) -> dict[str, list[str]]:
    """column -> its docstring's lines, from the part's source (a string right below the field)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(part))).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, list[str]] = {}
    for node, after in zip(body.body, [*body.body[1:], None], strict=True):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
            docs[node.target.id] = str(text).splitlines()
    return docs


@pytest.mark.parametrize("part", PARTS, ids=lambda part: part.__name__)
def test_each_column_has_its_one_line_doc(part):
    docs = _docstrings(part)
    assert set(docs) == set(part.__dict__["__annotations__"])
    assert {name: lines for name, lines in docs.items() if len(lines) != 1 or not lines[0].strip()} == {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Grown:
    """A row type with one column of each kind a new column may be."""

    status: str
    seconds_us: float | None = None
    count: int | None = None
    hit: bool | None = None
    at: datetime | None = None
    repeats: Int32 | None = None  # a 32-bit column: its annotation says so


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


def _documented(text: str) -> dict[str, tuple[str, bool | None]]:
    """column -> (type, nullable or None where the table has no null column) from the doc's tables: every
    name in backticks in a table row's first cell, before any parenthesis."""
    found: dict[str, tuple[str, bool | None]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) < 3:
            continue
        nullable = {"yes": True, "no": False}.get(cells[2])
        for name in re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", cells[0])):
            assert name not in found, f"{name} is documented twice"
            found[name] = (cells[1], nullable)
    return found


def test_docs_schema_md_documents_exactly_the_columns_with_their_type_and_nullability():
    text = DOCS.read_text()
    assert text.splitlines()[0] == f"# Results schema v{SCHEMA_VERSION}"
    documented = _documented(text)
    assert sorted(set(documented) - set(BASE_SCHEMA.names)) == [], "docs/schema.md names columns there are not"
    docs = {name: lines[0] for part in PARTS for name, lines in _docstrings(part).items() if lines}
    for field in BASE_SCHEMA:
        line = f"| `{field.name}` | {_doc_type(field.type)} | yes | {docs.get(field.name, '')} |"
        assert field.name in documented, f"docs/schema.md lacks {field.name}; start from {line}"
        kind, nullable = documented[field.name]
        assert kind == _doc_type(field.type), field.name
        assert nullable in (None, field.nullable), field.name
