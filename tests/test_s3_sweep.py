"""Sweeps against S3 (moto's server over HTTP): re-running an unchanged sweep compiles nothing.

A sweep killed mid-way and run again is tests/test_reliability_kill.py's."""

from __future__ import annotations

import tomllib

import pytest

from kernelsweep.results import reader
from kernelsweep.sweepspec.load import parse_spec

SMALL_SPEC = """
name = "s3-rerun"
platforms = ["trn2"]
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [2048], free_size = [1, 16] }
[[kernels]]
kernel = "kernelsweep.kernels.mlp:mlp"
dtypes = ["bfloat16"]
grid = { s = [128], h = [256], i = [128] }
"""


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_rerunning_an_unchanged_sweep_compiles_nothing(tmp_path, bucket, prefect_harness):
    """Through the sweep flow in-process, with the results and the caches on S3."""
    from kernelsweep.flows.sweep import sweep

    spec = parse_spec({**tomllib.loads(SMALL_SPEC), "toolchain": "sim", "results": f"s3://{bucket}/results",
                       "artifacts": f"s3://{bucket}/artifacts"})  # fmt: skip
    first_id, second_id = sweep(spec).flow_run_id, sweep(spec).flow_run_id
    assert first_id != second_id

    rows = reader.read(f"s3://{bucket}/results").to_pylist()
    first = [r for r in rows if r["flow_run_id"] == first_id]
    second = [r for r in rows if r["flow_run_id"] == second_id]
    assert len(first) == len(second) == 3 and all(r["status"] == "ok" for r in first + second)
    assert [(r["trace_cache_hit"], r["compile_cache_hit"]) for r in first] == [(False, False)] * 3
    assert [(r["trace_cache_hit"], r["compile_cache_hit"]) for r in second] == [(True, True)] * 3
    assert all(r["compile_seconds"] is None for r in second) and all(r["compile_seconds"] > 0 for r in first)
    by_point = {(r["kernel"], r["shape"]): r for r in first}
    for row in second:  # the very same IR and NEFF bytes, from the store
        assert (row["ir_sha256"], row["neff_sha256"]) == (
            by_point[row["kernel"], row["shape"]]["ir_sha256"],
            by_point[row["kernel"], row["shape"]]["neff_sha256"],
        )
