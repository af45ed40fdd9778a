"""Sweeps against S3 (moto's server over HTTP): `kernelsweep run` killed mid-way and run again loses
and duplicates nothing; re-running an unchanged sweep compiles nothing."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

import boto3
import pytest
from s3_server import aws_test_env, list_keys

from kernelsweep.results import reader
from kernelsweep.spec import expand, load_spec, parse_spec

# 16 points, compiles one at a time: at time scale 0.05 the points take several seconds, so a kill
# at the first finished point lands well before the end (the run writes its objects only at the end).
SPEC = """
name = "s3-sweep"
platforms = ["trn2", "trn1"]
[execution]
compile_slots = 1
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.mlp:mlp"
dtypes = ["bfloat16", "float16"]
grid = { s = [128, 256], h = [256, 512], i = [128] }
"""
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
RUN_TIMEOUT_S = 300
FIRST_POINT_TIMEOUT_S = 180
_RESULT_LINE = re.compile(r"^results: (s3://\S+/platform=(\w+)/run_date=[0-9-]+/([0-9a-f-]+)\.parquet)$", re.M)


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory, moto_endpoint):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_", "KERNELSWEEP_"))}
    env |= {k: v for k, v in aws_test_env(moto_endpoint).items() if v is not None}
    env["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"  # a loaded CI host starts it slowly
    env["KERNELSWEEP_SIM_STATE"] = str(tmp_path_factory.mktemp("sim-state"))
    env["KERNELSWEEP_LOCK_DIR"] = str(tmp_path_factory.mktemp("leases"))
    return env


def _argv(spec: Path, bucket: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kernelsweep.flows.cli",
        "run",
        str(spec),
        "--toolchain",
        "sim",
        "--results",
        f"s3://{bucket}/results",
        "--artifacts",
        f"s3://{bucket}/artifacts",
    ]


def _run(argv: list[str], env: dict, cwd: Path) -> tuple[str, dict[str, str]]:
    """Run to completion; returns (flow run id, {platform: object uri}) from the printed result lines."""
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = _RESULT_LINE.findall(proc.stdout)
    assert found and len({run_id for _, _, run_id in found}) == 1, proc.stdout
    return found[0][2], {platform: uri for uri, platform, _ in found}


class ProfileWatch:
    """Counts profile JSONs in the artifact store: a point's profile is the last artifact it stores,
    so one there means a point is done. Each new object is read once (just its first bytes unless
    they could open a JSON document)."""

    def __init__(self, endpoint: str, bucket: str, prefix: str) -> None:
        self.client = boto3.client("s3", endpoint_url=endpoint)
        self.bucket, self.prefix = bucket, prefix
        self.seen: set[str] = set()
        self.profiles = 0

    def poll(self) -> int:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        for key in (obj["Key"] for page in pages for obj in page.get("Contents", [])):
            if key in self.seen:
                continue
            self.seen.add(key)
            head = self.client.get_object(Bucket=self.bucket, Key=key, Range="bytes=0-15")["Body"].read()
            if not head.lstrip().startswith(b"{"):
                continue
            try:
                doc = json.loads(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())
            except ValueError:
                continue
            # a full JSON profile, or (the default) a summary-json one keyed by profile id
            self.profiles += isinstance(doc, dict) and ("summary" in doc or any(str(k).startswith("n_") for k in doc))
        return self.profiles


def test_a_sweep_killed_mid_way_and_run_again_loses_and_duplicates_nothing(tmp_path, cli_env, bucket, moto_endpoint):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC)
    points = {(p.kernel, p.shape, p.dtype, p.platform) for p in expand(load_spec(str(spec_path)))}
    assert len(points) == 16
    argv = _argv(spec_path, bucket)

    slow = cli_env | {"KERNELSWEEP_SIM_TIME_SCALE": "0.05"}
    killed = subprocess.Popen(
        argv,
        env=slow,
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch = ProfileWatch(moto_endpoint, bucket, "artifacts/sha256/")
    deadline = time.monotonic() + FIRST_POINT_TIMEOUT_S
    try:
        while watch.poll() == 0:
            assert killed.poll() is None, f"the sweep ended before any point was seen done: {killed.stderr.read()}"
            assert time.monotonic() < deadline, "no point finished in time"
            time.sleep(0.05)  # polling interval, not a wait for the outcome
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(killed.pid, signal.SIGKILL)  # the CLI, its Prefect server and any running tool
        killed.wait(timeout=30)
        killed.stderr.close()
    assert killed.returncode == -signal.SIGKILL
    left_by_killed = list_keys(moto_endpoint, bucket, "results/")

    run_id, objects = _run(argv, slow, tmp_path)

    keys = list_keys(moto_endpoint, bucket, "results/")
    completed = [k for k in keys if run_id in k]
    assert sorted(objects) == ["trn1", "trn2"] and len(completed) == 2  # one object per platform, no attempt copy
    assert {k.split("/")[2] for k in completed} == {"platform=trn1", "platform=trn2"}
    assert sorted(set(keys) - set(completed)) == left_by_killed  # the rerun touched nothing else

    rows = reader.read(f"s3://{bucket}/results").to_pylist()
    by_run = Counter(r["flow_run_id"] for r in rows)
    mine = [r for r in rows if r["flow_run_id"] == run_id]
    seen = Counter((r["kernel"], r["shape"], r["dtype"], r["platform"]) for r in mine)
    assert set(seen) == points and set(seen.values()) == {1}  # every point, exactly once
    assert all(r["status"] == "ok" for r in mine)
    if left_by_killed:  # the killed run got as far as writing: still whole, still no duplicate rows
        others = [r for r in rows if r["flow_run_id"] != run_id]
        assert all(count == len(points) for other, count in by_run.items() if other != run_id)
        assert len({r["row_id"] for r in others}) == len(others)
    else:
        assert set(by_run) == {run_id}
        # Killed mid-way: what it compiled was reused, the rest was compiled now.
        assert 0 < sum(r["compile_cache_hit"] for r in mine) < len(points)


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
