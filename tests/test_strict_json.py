"""JSON for other programs is strict JSON (issue 41): a number left undefined (a NaN or infinite latency,
a throughput of it) is null, never bare `NaN`/`Infinity`, and the documents still match their schemas.
Was: `report --format json` and compare's JSON printed `NaN`, which strict parsers reject."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from report_rows import nights
from test_compare_outputs import SHAPES, _report

from kernelsweep.report.compare import compare_runs

REPO = Path(__file__).resolve().parent.parent
BAD = {"nan": float("nan"), "inf": float("inf")}


def _strict(text: str):
    def refuse(constant: str):
        raise AssertionError(f"not JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


def _rows(field: str, bad: float):
    rows = nights(np.random.default_rng(3), SHAPES, 12, run_noise=0.01, step={"free_size=8192": 1.2}, step_night=10)
    return [replace(r, **{field: bad}) if r.shape == "free_size=1" else r for r in rows]


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("field", ["mfu_percent", "achieved_tflops", "roofline_percent"])
def test_report_and_compare_json_print_null_for_undefined_numbers_and_match_their_schemas(capsys, field, bad):
    from kernelsweep.flows.cli.compare import emit as emit_comparison
    from kernelsweep.flows.cli.report import emit as emit_report

    rows = _rows(field, bad)
    emit_report("json", _report(rows), False)
    report = _strict(capsys.readouterr().out)
    Draft202012Validator(json.loads((REPO / "docs" / "report.schema.json").read_text())).validate(report)
    emit_comparison("json", compare_runs(rows, "run-009", "run-010"))
    comparison = _strict(capsys.readouterr().out)
    Draft202012Validator(json.loads((REPO / "docs" / "compare.schema.json").read_text())).validate(comparison)


def test_bench_json_prints_null_for_an_undefined_number(monkeypatch, tmp_path):
    from kernelsweep.flows.cli import bench

    measured = {"latency_median_us": float("nan"), "achieved_tflops": float("inf"), "latencies_us": [1.0, float("nan")]}
    monkeypatch.setattr(bench, "_measured", lambda spec, point, results: (dict(measured), "ok"))
    for compact in ([], ["--json"]):
        args = ["vector_add", "--shape", "n=2048", "--artifacts", str(tmp_path), *compact]
        done = CliRunner().invoke(bench.bench, args)
        assert done.exit_code == 0, done.output
        found = _strict(done.stdout)
        assert found == {"latency_median_us": None, "achieved_tflops": None, "latencies_us": [1.0, None]}
