"""Lineage: every artifact a row links is fetched from its store and checked against its sha256,
on a local store and on S3 (moto's server over HTTP), after a real sweep through Prefect."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3_server import apply_env, aws_test_env, create_bucket, list_keys

from kernelsweep.errors import UsageError
from kernelsweep.results import reader
from kernelsweep.results.schema import PARAM_PREFIX, schema_for
from kernelsweep.results.verify import render, verify_row
from kernelsweep.results.writer import object_key
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.load import parse_spec

pytestmark = pytest.mark.usefixtures("prefect_harness")

VECTOR_ADD = {
    "kernel": "kernelsweep.kernels.vector_add:vector_add",
    "dtypes": ["float32"],
    "grid": {"n": [2048], "free_size": [1, 16]},
}
MLP = {"kernel": "kernelsweep.kernels.mlp:mlp", "dtypes": ["bfloat16"], "grid": {"s": [128], "h": [256], "i": [128]}}
CRASHES = {"kernel": "kernels.faulty:crashes_on_device", "dtypes": ["float32"], "grid": {"n": [1024]}}
SINGLES = ("kernel_source", "ir", "neff", "ntff", "profile", "nki_source")  # nki_source: schema 3


def _sweep(results: str, artifacts: str, kernels: list[dict], platforms=("trn2",)):
    from kernelsweep.flows.sweep import sweep

    spec = parse_spec(
        {
            "name": "lineage",
            "platforms": list(platforms),
            "toolchain": "sim",
            "results": results,
            "artifacts": artifacts,
            "capture": {"num_exec": 2},
            "kernels": kernels,
        }
    )
    return spec, sweep(spec)


def _rows(results: str) -> list[dict]:
    return reader.read(results).to_pylist()


def _expected_names(row: dict) -> set[str]:
    lists = {f"{column}[{entry['name']}]" for column in ("inputs", "outputs") for entry in row[column]}
    return {name for name in SINGLES if row.get(f"{name}_uri")} | lists


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _assert_all_verified(report, row: dict) -> None:
    assert report.ok, render(report)
    assert {a.name for a in report.artifacts} == _expected_names(row)
    by_name = {a.name: a for a in report.artifacts}
    for name in (n for n in SINGLES if row.get(f"{n}_uri")):
        assert by_name[name].sha256 == row[f"{name}_sha256"] and by_name[name].uri == row[f"{name}_uri"]
    for entry in row["inputs"]:
        assert by_name[f"inputs[{entry['name']}]"].size_bytes == entry["size_bytes"]
    for check in report.artifacts:
        assert check.path.parent == report.dest and _sha(check.path) == check.sha256
        assert check.size_bytes == check.path.stat().st_size > 0
    assert f"all {len(report.artifacts)} artifacts verified" in render(report)


@pytest.fixture
def local_sweep(tmp_path):
    results, artifacts = str(tmp_path / "results"), str(tmp_path / "artifacts")
    spec, report = _sweep(results, artifacts, [VECTOR_ADD, MLP])
    assert all(r.ok for r in report.rows)
    return results, next(r for r in _rows(results) if r["kernel"] == "mlp")


def test_every_artifact_of_a_local_row_is_fetched_and_verified(tmp_path, local_sweep):
    results, row = local_sweep
    report = verify_row(results, row["row_id"], tmp_path / "check")
    _assert_all_verified(report, row)
    assert len(report.artifacts) == 6 + 4 + 1  # mlp: the singles (nki_source too), four inputs, one output
    assert {p.name for p in (tmp_path / "check").iterdir()} >= {"file.neff", "profile.ntff", "profile.json"}
    assert report.row.kernel == "mlp" and report.row.flow_run_id == row["flow_run_id"]
    again = verify_row(results, row["row_id"], tmp_path / "check")  # into the same folder: replaces, still ok
    _assert_all_verified(again, row)


def test_a_corrupt_and_a_missing_local_artifact_are_each_reported(tmp_path, local_sweep):
    results, row = local_sweep
    neff_in_store, ntff_in_store = (Path(urlsplit(row[f"{name}_uri"]).path) for name in ("neff", "ntff"))
    for corrupt in (neff_in_store, ntff_in_store):
        corrupt.chmod(0o644)  # the store keeps artifacts read-only
        corrupt.write_bytes(corrupt.read_bytes() + b"bit rot")
    rotten = {path: path.read_bytes() for path in (neff_in_store, ntff_in_store)}
    first_input = row["inputs"][0]
    Path(urlsplit(first_input["uri"]).path).unlink()

    report = verify_row(results, row["row_id"], tmp_path / "check")
    assert not report.ok
    failed = {a.name: a.error for a in report.failed}
    assert set(failed) == {"neff", "ntff", f"inputs[{first_input['name']}]"}
    assert "hash mismatch" in failed["neff"] and "missing" in failed[f"inputs[{first_input['name']}]"]
    assert "left in place" in failed["ntff"] and "removed" not in failed["ntff"]
    assert sum(a.ok for a in report.artifacts) == len(_expected_names(row)) - 3  # the rest still verified
    assert not (tmp_path / "check" / "file.neff").exists()  # bad bytes are never left behind as the NEFF
    text = render(report)
    assert text.count("FAILED") == 4 and f"3 of {len(report.artifacts)} artifacts FAILED" in text
    assert "neff: artifact" in text and "hash mismatch" in text
    # Verification only reads: the evidence is where it was, byte for byte (was: the NTFF was deleted).
    assert {path: path.read_bytes() for path in rotten} == rotten
    assert not (Path(urlsplit(row["neff_uri"]).path).parents[2] / "quarantine").exists()


def test_lineage_gaps_and_inconsistent_links_are_reported(tmp_path):
    results, artifacts = str(tmp_path / "results"), str(tmp_path / "artifacts")
    _sweep(results, artifacts, [CRASHES, VECTOR_ADD])
    rows = _rows(results)
    failed = next(r for r in rows if r["status"] == "failed")
    report = verify_row(results, failed["row_id"], tmp_path / "failed")
    # A capture failure links what was made before it, and nothing after it is demanded.
    assert report.ok, render(report)
    assert {a.name for a in report.artifacts} == {"kernel_source", "nki_source", "ir", "neff"} | {
        f"inputs[{i['name']}]" for i in failed["inputs"]
    }

    ok = next(r for r in rows if r["status"] == "ok")
    swapped = {**ok, "row_id": str(uuid.uuid4()), "neff_sha256": ok["profile_sha256"]}
    unlinked = {**ok, "row_id": str(uuid.uuid4()), "ir_uri": None, "ir_sha256": None, "outputs": None}
    resized = {
        **ok,
        "row_id": str(uuid.uuid4()),
        "inputs": [{**ok["inputs"][0], "size_bytes": ok["inputs"][0]["size_bytes"] + 1}, *ok["inputs"][1:]],
    }
    crafted = str(tmp_path / "crafted")
    _write_crafted(crafted, [swapped, unlinked, resized])

    errors = {a.name: a.error for a in verify_row(crafted, swapped["row_id"], tmp_path / "a").failed}
    assert errors == {"neff": "the uri does not name the row's sha256"}
    errors = {a.name: a.error for a in verify_row(crafted, unlinked["row_id"], tmp_path / "b").failed}
    assert errors == {"ir": "not linked, though the row is ok", "outputs": "not linked, though the row is ok"}
    errors = {a.name: a.error for a in verify_row(crafted, resized["row_id"], tmp_path / "c").failed}
    name = ok["inputs"][0]["name"]
    size = ok["inputs"][0]["size_bytes"]
    assert errors == {f"inputs[{name}]": f"{size} bytes, the row records {size + 1}"}


def _write_crafted(results_uri: str, rows: list[dict]) -> None:
    """Rows no sweep would write, straight to the dataset layout (the writer only takes built rows)."""
    key = object_key(rows[0]["platform"], rows[0]["run_date"], "crafted")
    schema = schema_for([k.removeprefix(PARAM_PREFIX) for k in rows[0] if k.startswith(PARAM_PREFIX)])
    target = Path(results_uri) / key
    target.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in schema.names} for r in rows], schema=schema), target)


def test_an_unknown_row_is_a_one_line_usage_error(tmp_path, local_sweep):
    results, _ = local_sweep
    with pytest.raises(UsageError) as caught:
        verify_row(results, "0000-not-a-row", tmp_path / "check")
    assert str(caught.value).startswith(f"no row 0000-not-a-row in {results}; ") and "\n" not in str(caught.value)
    assert not (tmp_path / "check").exists()
    with pytest.raises(UsageError, match="does not exist"):
        verify_row(str(tmp_path / "nowhere"), "x", tmp_path / "check")


# --- S3 ------------------------------------------------------------------------------------------


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_sweep_to_s3_reads_back_and_every_artifact_of_a_row_verifies(tmp_path, moto_endpoint, monkeypatch):
    apply_env(monkeypatch, aws_test_env(moto_endpoint))
    bucket = create_bucket(moto_endpoint)
    results, artifacts = f"s3://{bucket}/team/results", f"s3://{bucket}/team/artifacts"
    spec, report = _sweep(results, artifacts, [VECTOR_ADD, MLP], platforms=("trn2", "trn1"))

    run_id = report.flow_run_id
    objects = list_keys(moto_endpoint, bucket, "team/results/")
    assert len(objects) == 2 and all(k.endswith(f"/{run_id}.parquet") for k in objects)
    assert {k.split("/")[3] for k in objects} == {"platform=trn1", "platform=trn2"}
    rows = _rows(results)
    assert sorted((r["kernel"], r["shape"], r["dtype"], r["platform"]) for r in rows) == sorted(
        (p.kernel, p.shape, p.dtype, p.platform) for p in expand(spec)
    )
    assert len({r["row_id"] for r in rows}) == len(rows) and all(r["status"] == "ok" for r in rows)
    assert all(r["neff_uri"].startswith(f"s3://{bucket}/team/artifacts/sha256/") for r in rows)
    assert not list(tmp_path.iterdir())  # nothing went to a local folder

    row = next(r for r in rows if r["kernel"] == "mlp" and r["platform"] == "trn1")
    _assert_all_verified(verify_row(results, row["row_id"], tmp_path / "check"), row)

    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    neff_key = urlsplit(row["neff_uri"]).path.lstrip("/")
    s3.put_object(Bucket=bucket, Key=neff_key, Body=b"not the NEFF that was measured")
    output = row["outputs"][0]
    s3.delete_object(Bucket=bucket, Key=urlsplit(output["uri"]).path.lstrip("/"))
    report = verify_row(results, row["row_id"], tmp_path / "recheck")
    failed = {a.name: a.error for a in report.failed}
    assert set(failed) == {"neff", f"outputs[{output['name']}]"}, render(report)
    assert "hash mismatch" in failed["neff"] and "missing" in failed[f"outputs[{output['name']}]"]
    assert not list((tmp_path / "recheck").glob(".incoming-*"))  # failed downloads leave no partial files


# --- the CLI command (flows/cli.py) ----------------------------------------------------------------


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_cli_lineage_exit_codes(tmp_path, local_sweep):
    results, row = local_sweep
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "kernelsweep.flows.cli", "lineage", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )

    proc = run(row["row_id"], "--results", results)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"all {len(_expected_names(row))} artifacts verified" in proc.stdout
    assert (tmp_path / f"lineage-{row['row_id']}" / "file.neff").is_file()  # the default --dest

    profile = Path(urlsplit(row["profile_uri"]).path)
    profile.chmod(0o644)  # the store keeps artifacts read-only
    profile.write_bytes(b"{}")
    proc = run(row["row_id"], "--results", results, "--dest", "out")
    assert proc.returncode == 1 and "profile: artifact" in proc.stdout and "hash mismatch" in proc.stdout

    proc = run("no-such-row", "--results", results)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no row no-such-row in" in proc.stderr

    # A destination nothing can be written to: a usage error before any fetch (was: "10 of 10 FAILED").
    (tmp_path / "a-file").write_text("x")
    proc = run(row["row_id"], "--results", results, "--dest", "a-file/lineage")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--dest" in proc.stderr, proc.stderr
    assert proc.stdout == ""


@pytest.mark.slow  # a whole sweep through Prefect
def test_cli_lineage_shows_the_kernel_source_with_each_hot_lines_share(tmp_path):
    """Issue 25: `lineage` prints the row's NKI source (its fetched, verified nki_source artifact) with
    each hot line's share of instruction time, as the row's hotspots hold it."""
    from kernelsweep.flows.sweep import sweep

    results = str(tmp_path / "results")
    capture = {"num_exec": 2, "profile_format": "parquet"}  # hotspots = "auto": on with Parquet
    spec = {"name": "heat", "platforms": ["trn2"], "toolchain": "sim", "results": results,
            "artifacts": str(tmp_path / "artifacts"), "capture": capture, "kernels": [MLP]}  # fmt: skip
    assert all(r.ok for r in sweep(parse_spec(spec)).rows)
    [row] = _rows(results)
    assert row["hotspots"], row["hotspots_note"]
    shares: dict[int, float] = {}
    for spot in row["hotspots"]:
        shares[spot["line"]] = shares.get(spot["line"], 0.0) + spot["share_percent"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    proc = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "lineage", row["row_id"], "--results", results,
         "--dest", "out"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    source = (tmp_path / "out" / "nki_kernel.py").read_text().splitlines()
    heat = proc.stdout.split("hotspots in ", 1)[1].splitlines()[1:]
    assert len(heat) == len(source)  # every line of the kernel, in order
    for number, (line, text) in enumerate(zip(heat, source, strict=True), 1):
        assert line.endswith(f"{number:4d}  {text}"), line
        assert line[:7] == (f"{shares[number]:5.1f}% " if number in shares else " " * 7), line
    assert sum(line[:7] != " " * 7 for line in heat) == len(shares) > 0
