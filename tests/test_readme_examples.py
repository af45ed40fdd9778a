"""The README's reading examples, run verbatim on the results of two tiny sweeps: pandas, a filtered
read, and DuckDB over the pyarrow dataset; on the results folder and on the same objects in S3."""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import date
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest
from s3_server import apply_env, aws_test_env, create_bucket, moto_s3

from kernelsweep.sweepspec.load import parse_spec

pytestmark = [
    pytest.mark.usefixtures("prefect_harness"),
    pytest.mark.xdist_group("readme-examples"),  # one process builds `results_home`
]

README = Path(__file__).resolve().parents[1] / "README.md"

# The README shows these three blocks exactly as written here.
PANDAS = """\
from kernelsweep.results import reader

df = reader.read("results").to_pandas()
ok = df[df.status == "ok"]
medians = ok.groupby(["kernel", "shape", "dtype", "platform"])["total_time_us"].median()
print(medians)
"""
FILTERED = """\
from datetime import date

from kernelsweep.results import reader

trn2 = reader.read(
    "results",
    filters=[("platform", "=", "trn2"), ("run_date", ">=", date(2026, 1, 1))],
    columns=["kernel", "shape", "dtype", "total_time_us", "mfu_percent", "run_date"],
).to_pandas()
"""
DUCKDB = """\
import duckdb

from kernelsweep.results import reader

d = reader.dataset("results")
means = duckdb.sql("select kernel, shape, avg(total_time_us) from d group by all")
print(means)
"""
SNIPPETS = (PANDAS, FILTERED, DUCKDB)
POINT = ("kernel", "shape", "dtype", "platform")


@pytest.fixture(scope="module")
def results_home(tmp_path_factory, prefect_harness) -> Path:
    """A folder holding `results/` from two runs of the same tiny sweep (so averages average)."""
    from kernelsweep.flows.sweep import sweep

    home = tmp_path_factory.mktemp("readme")
    spec = parse_spec(
        {
            "name": "readme",
            "platforms": ["trn2", "trn1"],
            "toolchain": "sim",
            "results": str(home / "results"),
            "artifacts": str(home / "artifacts"),
            "capture": {"num_exec": 2},
            "kernels": [
                {
                    "kernel": "kernelsweep.kernels.vector_add:vector_add",
                    "dtypes": ["float32"],
                    "grid": {"n": [2048], "free_size": [1, 16]},
                }
            ],
        }
    )
    for _ in range(2):
        assert all(r.ok for r in sweep(spec).rows)
    return home


def _raw_rows(home: Path) -> list[dict]:
    """The stored rows read file by file with plain pyarrow: the expectation, independent of the reader."""
    files = sorted((home / "results").rglob("*.parquet"))
    assert len(files) == 4  # two runs x two platforms
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def _run(snippet: str, results: str) -> dict:
    namespace: dict = {}
    exec(compile(snippet.replace('"results"', f'"{results}"'), "README.md", "exec"), namespace)
    return namespace


def _check_snippets(home: Path, results: str, capsys) -> None:
    rows = _raw_rows(home)
    by_point = defaultdict(list)
    for r in rows:
        by_point[tuple(r[k] for k in POINT)].append(r["total_time_us"])

    pandas_ns = _run(PANDAS, results)
    assert len(pandas_ns["df"]) == len(rows) == 8 and set(pandas_ns["df"].platform) == {"trn1", "trn2"}
    assert pandas_ns["medians"].to_dict() == pytest.approx({k: statistics.median(v) for k, v in by_point.items()})
    assert "vector_add" in capsys.readouterr().out

    trn2 = _run(FILTERED, results)["trn2"]
    assert list(trn2.columns) == ["kernel", "shape", "dtype", "total_time_us", "mfu_percent", "run_date"]
    assert sorted(trn2.total_time_us) == sorted(r["total_time_us"] for r in rows if r["platform"] == "trn2")
    assert all(isinstance(d, date) and d >= date(2026, 1, 1) for d in trn2.run_date)  # a typed partition

    means = _run(DUCKDB, results)["means"]
    assert means.columns == ["kernel", "shape", "avg(total_time_us)"]
    by_shape = defaultdict(list)
    for (kernel, shape, _, _), times in by_point.items():
        by_shape[kernel, shape] += times
    averages = {(kernel, shape): avg for kernel, shape, avg in means.fetchall()}
    assert averages == pytest.approx({key: statistics.mean(times) for key, times in by_shape.items()})
    assert "avg(total_time_us)" in capsys.readouterr().out


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_readme_examples_on_a_results_folder(results_home, monkeypatch, capsys):
    monkeypatch.chdir(results_home)  # the README's examples read ./results, where the quickstart writes
    _check_snippets(results_home, "results", capsys)


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_readme_examples_on_s3(results_home, monkeypatch, capsys):
    with moto_s3() as endpoint:
        apply_env(monkeypatch, aws_test_env(endpoint))
        bucket = create_bucket(endpoint)
        client = boto3.client("s3", endpoint_url=endpoint)
        for path in (results_home / "results").rglob("*.parquet"):
            key = f"team/results/{path.relative_to(results_home / 'results').as_posix()}"
            client.upload_file(str(path), bucket, key)
        _check_snippets(results_home, f"s3://{bucket}/team/results", capsys)


def test_the_readme_shows_the_tested_snippets():
    text = README.read_text()
    missing = [s.splitlines()[-2] for s in SNIPPETS if s not in text]
    assert not missing, f"README.md no longer shows the tested examples: {missing}"
