"""Results writer and reader against a folder and against moto's S3 server over HTTP."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import random
import re
import threading
import uuid
from datetime import UTC, date, datetime
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from s3_server import FaultProxy, apply_env, aws_test_env, list_keys

from kernelsweep.errors import StoreError, UsageError
from kernelsweep.platforms import PLATFORMS
from kernelsweep.results import reader
from kernelsweep.results.rows import METRIC_NAMES, Row
from kernelsweep.results.schema import BASE_SCHEMA, SCHEMA_VERSION
from kernelsweep.results.writer import object_key, parquet_bytes, rows_to_table, write_results
from kernelsweep.stores import s3

REPO = Path(__file__).resolve().parents[1]
RUN_DATE = date(2026, 3, 1)
LINEAGE = {"sweep": "nightly", "toolchain": "sim", "is_simulation": True, "points": 4}
_NS = uuid.UUID("0b0c6f4e-1d52-4b8e-8f0e-5a4c2b9d7e11")


def make_rows(flow_run_id: str, platform: str = "trn2", total_us: float = 10.0) -> list[Row]:
    """Rows like a sweep's: ok points with metrics and lineage, and one failed point."""
    rows = []
    for i, (m, k, lnc) in enumerate([(128, 512, 1), (128, 512, 2), (256, 512, 1)]):
        sha = hashlib.sha256(f"{flow_run_id}{i}".encode()).hexdigest()
        rows.append(
            {
                "schema_version": 1,
                "row_id": str(uuid.uuid5(_NS, f"{flow_run_id}/{platform}/{i}")),
                "sweep": "nightly",
                "kernel": "matmul",
                "kernel_ref": "kernelsweep.kernels.matmul:MATMUL",
                "shape": f"m={m},k={k}",
                "params": {"m": m, "k": k},
                "dtype": "bfloat16",
                "platform": platform,
                "lnc": lnc,
                "seed": 0,
                "toolchain": "sim",
                "is_simulation": True,
                "status": "ok",
                "total_time_us": total_us + i,
                "latencies_us": [total_us + i, total_us + i + 0.2, total_us + i - 0.1],
                "model_flops": 2 * m * k * 512,
                "roofline_bound": "compute",
                "extra_metrics": {"pe_utilization": 0.5},
                "neff_uri": f"s3://bucket/art/sha256/{sha[:2]}/{sha}",
                "neff_sha256": sha,
                "inputs": [
                    {"name": "a", "uri": f"s3://bucket/art/sha256/{sha[:2]}/{sha}", "sha256": sha, "size_bytes": 4}
                ],
                "flow_run_id": flow_run_id,
                "task_run_ids": {"trace": "t1"},
                "started_at": datetime(2026, 3, 1, 2, 0, i, tzinfo=UTC),
                "host": "ip-10-0-0-1",
            }
        )
    rows.append(
        {
            "schema_version": 1,
            "row_id": str(uuid.uuid5(_NS, f"{flow_run_id}/{platform}/failed")),
            "sweep": "nightly",
            "kernel": "vector_add",
            "kernel_ref": "kernelsweep.kernels.vector_add:vector_add",
            "shape": "n=1024",
            "params": {"n": 1024},
            "dtype": "float32",
            "platform": platform,
            "lnc": 1,
            "seed": 0,
            "toolchain": "sim",
            "is_simulation": True,
            "status": "failed",
            "error_stage": "compile",
            "error_class": "CompileError",
            "error_message": "neuronx-cc: SBUF overflow",
            "flow_run_id": flow_run_id,
        }
    )
    return [_row(r) for r in rows]


def _row(columns: dict) -> Row:
    """A Row from flat column values: summary fields go to `metrics`, `param_*` come from `params`."""
    metrics = {k: columns.pop(k) for k in list(columns) if k in METRIC_NAMES}
    return Row(metrics=metrics, **{k: v for k, v in columns.items() if not k.startswith("param_")})


@pytest.fixture(params=["local", "s3"])
def results_uri(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "results")
    return f"s3://{request.getfixturevalue('bucket')}/kernelsweep/results"


def _body(endpoint: str, bucket: str, key: str) -> bytes:
    return boto3.client("s3", endpoint_url=endpoint).get_object(Bucket=bucket, Key=key)["Body"].read()


# --- round trip -----------------------------------------------------------------------------------


def test_round_trip_types_values_and_partitions(results_uri):
    run = str(uuid.uuid4())
    rows = make_rows(run, "trn2") + make_rows(run, "trn1")
    written = write_results(rows, results_uri, flow_run_id=run, run_date=RUN_DATE, lineage=LINEAGE)
    assert [w.removeprefix(results_uri).lstrip("/") for w in written] == [
        object_key("trn1", RUN_DATE, run),
        object_key("trn2", RUN_DATE, run),
    ]

    table = reader.read(results_uri)
    assert table.num_rows == 8
    assert table.schema.field("run_date").type == pa.date32()
    assert table.schema.field("param_m").type == pa.int64()
    assert set(table.column("run_date").to_pylist()) == {RUN_DATE}
    by_id = {r["row_id"]: r for r in table.to_pylist()}
    for row in (r.record() for r in rows):
        got = by_id[row["row_id"]]
        assert got["platform"] == row["platform"]
        assert got["total_time_us"] == row.get("total_time_us")
        assert got["param_m"] == row.get("param_m")
        assert dict(got["params"]) == row["params"]
        assert got["inputs"] == row.get("inputs")
        assert got["started_at"] == row.get("started_at")
        assert got["error_message"] == row.get("error_message")

    trn2 = reader.read(results_uri, filters=[("platform", "=", "trn2"), ("run_date", "=", RUN_DATE)])
    assert set(trn2.column("platform").to_pylist()) == {"trn2"} and trn2.num_rows == 4
    failed = reader.read(results_uri, filters=[("status", "=", "failed")], columns=["row_id", "error_stage"])
    assert (
        failed.column_names == ["row_id", "error_stage"] and failed.column("error_stage").to_pylist() == ["compile"] * 2
    )


def test_parquet_metadata_and_s3_object_metadata(bucket, moto_endpoint):
    run = str(uuid.uuid4())
    [uri] = write_results(make_rows(run), f"s3://{bucket}/res", flow_run_id=run, run_date=RUN_DATE, lineage=LINEAGE)
    key = uri.removeprefix(f"s3://{bucket}/")
    body = _body(moto_endpoint, bucket, key)
    head = boto3.client("s3", endpoint_url=moto_endpoint).head_object(Bucket=bucket, Key=key)
    assert head["Metadata"]["sha256"] == hashlib.sha256(body).hexdigest()
    metadata = pq.read_metadata(io.BytesIO(body)).metadata
    assert metadata[b"kernelsweep.schema_version"] == str(SCHEMA_VERSION).encode()
    assert b'"sweep": "nightly"' in metadata[b"kernelsweep.lineage"]


def test_bytes_do_not_depend_on_row_completion_order():
    rows = make_rows("run-1") + make_rows("run-1", total_us=99.0)[:1]  # same kernel/shape/dtype, other row
    rows[-1] = dataclasses.replace(rows[-1], row_id="00000000-tie")
    expected = parquet_bytes(rows_to_table(rows, LINEAGE))
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert parquet_bytes(rows_to_table(shuffled, LINEAGE)) == expected


# --- S3: idempotence under concurrency and injected failures --------------------------------------


def _race(writers: list[list[Row]], uri: str, run: str) -> list[list[str]]:
    """Start every writer at once, each with its own client, as retries on separate hosts would."""
    barrier = threading.Barrier(len(writers))
    results: list[list[str] | BaseException] = [[] for _ in writers]

    def write(i: int) -> None:
        client = s3.make_client()
        barrier.wait()
        try:
            results[i] = write_results(
                writers[i], uri, flow_run_id=run, run_date=RUN_DATE, lineage=LINEAGE, client=client
            )
        except BaseException as exc:  # surfaced below, in the test thread
            results[i] = exc

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome
    return results  # type: ignore[return-value]


def test_eight_concurrent_writers_of_one_run_leave_one_object(bucket, moto_endpoint, caplog):
    run = str(uuid.uuid4())
    uri = f"s3://{bucket}/res"
    with caplog.at_level(logging.INFO, logger="kernelsweep.results.writer"):
        locations = _race([make_rows(run) for _ in range(8)], uri, run)
    assert {tuple(loc) for loc in locations} == {(f"{uri}/{object_key('trn2', RUN_DATE, run)}",)}
    assert list_keys(moto_endpoint, bucket) == [f"res/{object_key('trn2', RUN_DATE, run)}"]
    assert sum("already holds these rows" in r.message for r in caplog.records) == 7
    table = reader.read(uri)
    assert table.num_rows == 4 and len(set(table.column("row_id").to_pylist())) == 4


def test_different_rows_for_one_run_go_to_attempt_keys(bucket, moto_endpoint, caplog):
    run = str(uuid.uuid4())
    uri = f"s3://{bucket}/res"
    first, rerun = make_rows(run, total_us=10.0), make_rows(run, total_us=20.0)
    with caplog.at_level(logging.WARNING, logger="kernelsweep.results.writer"):
        _race([first, rerun] * 4, uri, run)
    base, attempt2 = f"res/{object_key('trn2', RUN_DATE, run)}", f"res/{object_key('trn2', RUN_DATE, run, 2)}"
    assert list_keys(moto_endpoint, bucket) == sorted([base, attempt2])
    assert attempt2.endswith(f"{run}.attempt-2.parquet")
    assert [r.levelname for r in caplog.records if "kept as" in r.message] == ["WARNING"]
    bodies = {k: _body(moto_endpoint, bucket, k) for k in (base, attempt2)}
    expected = {parquet_bytes(rows_to_table(r, LINEAGE)) for r in (first, rerun)}
    assert set(bodies.values()) == expected

    # Either run retried again finds its own object: no attempt-3.
    write_results(first, uri, flow_run_id=run, run_date=RUN_DATE, lineage=LINEAGE)
    write_results(rerun, uri, flow_run_id=run, run_date=RUN_DATE, lineage=LINEAGE)
    assert len(list_keys(moto_endpoint, bucket)) == 2

    # Both attempts are readable; `read` and find_row prefer the later attempt.
    assert reader.read(uri, every_copy=True).num_rows == 8
    assert reader.read(uri).num_rows == 4
    later = pq.read_table(io.BytesIO(bodies[attempt2])).to_pylist()[0]
    assert reader.find_row(uri, later["row_id"])["total_time_us"] == later["total_time_us"]
    assert reader.find_row(uri, "no-such-row") is None


@pytest.mark.parametrize(
    ("status", "code", "after_forward", "proxied"),
    [
        (503, "SlowDown", False, [("PUT", 503), ("PUT", 200)]),
        (500, "InternalError", True, [("PUT", 500), ("PUT", 412), ("HEAD", 200)]),  # lost response
        (409, "ConditionalRequestConflict", False, [("PUT", 409), ("PUT", 200)]),
    ],
    ids=["503-before-store", "500-after-store", "409-conflict"],
)
def test_injected_put_failure_is_retried_and_succeeds(bucket, moto_endpoint, status, code, after_forward, proxied):
    run = str(uuid.uuid4())
    with FaultProxy(moto_endpoint) as proxy:
        proxy.fail_next("PUT", status=status, code=code, after_forward=after_forward)
        client = s3.make_client(proxy.url)
        written = write_results(
            make_rows(run), f"s3://{bucket}/res", flow_run_id=run, run_date=RUN_DATE, lineage=LINEAGE, client=client
        )
    key = f"res/{object_key('trn2', RUN_DATE, run)}"
    assert written == [f"s3://{bucket}/{key}"]
    assert [(method, status) for method, _, status in proxy.log] == proxied
    assert list_keys(moto_endpoint, bucket) == [key]
    assert reader.read(f"s3://{bucket}/res").num_rows == 4


def test_denied_put_fails_at_once_and_is_not_retryable(bucket, moto_endpoint):
    with FaultProxy(moto_endpoint) as proxy:
        proxy.fail_next("PUT", status=403, code="AccessDenied")
        with pytest.raises(StoreError, match="AccessDenied") as caught:
            write_results(
                make_rows("r"),
                f"s3://{bucket}/res",
                flow_run_id="r",
                run_date=RUN_DATE,
                lineage=LINEAGE,
                client=s3.make_client(proxy.url),
            )
    assert caught.value.retryable is False and len(proxy.log) == 1


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "PutObject")


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (_client_error("AccessDenied"), False),
        (_client_error("NoSuchBucket"), False),
        (_client_error("404"), False),
        (_client_error("SlowDown"), True),
        (_client_error("InternalError"), True),
        (EndpointConnectionError(endpoint_url="http://x"), True),
        (NoCredentialsError(), False),
    ],
)
def test_boto_failures_map_to_store_errors(exc, retryable):
    error = s3.translate(exc, "writing x")
    assert isinstance(error, StoreError) and error.stage == "store" and error.retryable is retryable
    assert "testing" not in str(error)


# --- S3 plumbing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "s3://",
        "s3://A_Bucket/x",
        "s3:/bucket",
        "bucket/prefix",
        "s3://bk/a//b",
        "s3://bucket/a/../b",
        "s3://bucket/./a",
    ],
)
def test_malformed_s3_uri_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="s3://bucket-name/optional/prefix"):
        s3.parse_s3_uri(bad)


def test_s3_location_keys():
    assert s3.parse_s3_uri("s3://my-bucket/a/b/") == s3.S3Location("my-bucket", "a/b")
    assert s3.parse_s3_uri("s3://my-bucket").key("v1/x") == "v1/x"


def test_configured_endpoints_use_path_style_and_aws_uses_virtual_hosts(monkeypatch):
    apply_env(monkeypatch, aws_test_env("http://localhost:9"))
    urls = []

    class EmptyBody:
        def stream(self):
            return iter([b""])

    def capture(request, **_):  # answer locally: this test needs no server
        urls.append(request.url)
        return AWSResponse(request.url, 200, {}, EmptyBody())

    for client in (s3.make_client(), s3.make_client("http://localhost:9")):
        client.meta.events.register("before-send.s3", capture)
        client.head_bucket(Bucket="my-bucket")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    aws = s3.make_client()
    aws.meta.events.register("before-send.s3", capture)
    aws.head_bucket(Bucket="my-bucket")
    assert urls == [
        "http://localhost:9/my-bucket",
        "http://localhost:9/my-bucket",
        "https://my-bucket.s3.amazonaws.com/",
    ]


# --- local writer ------------------------------------------------------------------------------------


def test_local_identical_rewrite_is_a_no_op_and_different_goes_to_attempt_2(tmp_path, caplog):
    root = tmp_path / "results"
    [path] = write_results(make_rows("run-1"), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE)
    before = os.stat(path)
    assert write_results(make_rows("run-1"), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE) == [
        path
    ]
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    with caplog.at_level(logging.WARNING, logger="kernelsweep.results.writer"):
        [other] = write_results(
            make_rows("run-1", total_us=5.0), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE
        )
    assert other.endswith("run-1.attempt-2.parquet") and "kept as" in caplog.text
    assert sorted(p.name for p in Path(path).parent.iterdir()) == ["run-1.attempt-2.parquet", "run-1.parquet"]


def test_local_crash_mid_write_leaves_no_target_and_no_temp_file(tmp_path, monkeypatch):
    root = tmp_path / "results"

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(StoreError, match="disk full"):  # a store failure, named, not a bare OSError
        write_results(make_rows("run-1"), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE)
    assert [p for p in root.rglob("*") if p.is_file()] == []


def test_reader_skips_a_killed_writers_hidden_temp_file(tmp_path):
    root = tmp_path / "results"
    [path] = write_results(make_rows("run-1"), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE)
    (Path(path).parent / ".incoming-abc.parquet").write_bytes(b"PAR1 truncated")
    assert reader.read(str(root)).num_rows == 4


def test_a_foreign_file_in_the_dataset_is_named_in_the_error(tmp_path):
    root = tmp_path / "results"
    [path] = write_results(make_rows("run-1"), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE)
    (Path(path).parent / "notes.parquet").write_text("not parquet")
    with pytest.raises(StoreError, match="notes.parquet is not a readable Parquet file"):
        reader.read(str(root))


def test_unsafe_key_parts_are_refused():
    for platform, run in [("../etc", "r"), ("trn2", "a/b"), ("trn2", "..")]:
        with pytest.raises(StoreError):
            object_key(platform, RUN_DATE, run)


# --- reader: schema evolution and edges -------------------------------------------------------------


def test_old_files_read_back_with_new_columns_null(results_uri):
    run_old, run_new = "run-old", "run-new"
    # a schema v1 file has no latencies_us: it reads back null, and the report falls back to the summary;
    # one before v6 has no hostname
    dropped = ["roofline_bound", "extra_metrics", "mfu_percent", "inputs", "capture_seconds", "latencies_us"]
    dropped.append("hostname")
    old_schema = pa.schema([f for f in BASE_SCHEMA if f.name not in dropped])
    assert all(BASE_SCHEMA.field(name).nullable for name in dropped)
    old_rows = [{k: v for k, v in r.record().items() if k in old_schema.names} for r in make_rows(run_old)]
    old_bytes = parquet_bytes(pa.Table.from_pylist(old_rows, schema=old_schema))
    old_key = object_key("trn2", date(2026, 2, 1), run_old)
    if results_uri.startswith("s3://"):
        where = s3.parse_s3_uri(results_uri)
        s3.make_client().put_object(Bucket=where.bucket, Key=where.key(old_key), Body=old_bytes)
    else:
        (Path(results_uri) / old_key).parent.mkdir(parents=True)
        (Path(results_uri) / old_key).write_bytes(old_bytes)
    new_rows = [dataclasses.replace(row, params={**row.params, "tile": 64}) for row in make_rows(run_new)]
    write_results(new_rows, results_uri, flow_run_id=run_new, run_date=RUN_DATE, lineage=LINEAGE)

    table = reader.read(results_uri)
    assert table.num_rows == 8
    assert set(BASE_SCHEMA.names) <= set(table.column_names) and "param_tile" in table.column_names
    rows = {(r["flow_run_id"], r["shape"], r["lnc"]): r for r in table.to_pylist()}
    old, new = rows[(run_old, "m=128,k=512", 1)], rows[(run_new, "m=128,k=512", 1)]
    assert [old[c] for c in dropped + ["param_tile"]] == [None] * 8
    assert old["run_date"] == date(2026, 2, 1) and old["total_time_us"] == 10.0
    assert new["roofline_bound"] == "compute" and new["param_tile"] == 64 and new["inputs"]
    assert new["latencies_us"] == [10.0, 10.2, 9.9]
    only_old = reader.read(results_uri, filters=[("run_date", "<", RUN_DATE)])
    assert only_old.num_rows == 4 and "param_tile" not in only_old.column_names


def test_empty_and_missing_locations(tmp_path, bucket):
    (tmp_path / "empty").mkdir()
    assert reader.read(str(tmp_path / "empty")).num_rows == 0
    assert reader.read(f"s3://{bucket}/nothing-here").num_rows == 0
    with pytest.raises(UsageError, match="does not exist"):
        reader.read(str(tmp_path / "typo"))
    with pytest.raises(UsageError, match="filters"):
        reader.read(str(tmp_path / "empty"), filters=[("platform", "~", "x")])


def test_filter_on_a_param_column_still_applies(results_uri):
    write_results(make_rows("run-1"), results_uri, flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE)
    table = reader.read(results_uri, filters=[("param_m", "=", 256)])
    assert table.column("shape").to_pylist() == ["m=256,k=512"]


# --- Athena DDL stays in step with the schema ---------------------------------------------------------


def _hive_type(t: pa.DataType) -> str:
    if pa.types.is_map(t):
        return f"map<{_hive_type(t.key_type)},{_hive_type(t.item_type)}>"
    if pa.types.is_list(t):
        return f"array<{_hive_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{_hive_type(f.type)}" for f in t) + ">"
    names = {
        pa.int32(): "int",
        pa.int64(): "bigint",
        pa.float64(): "double",
        pa.string(): "string",
        pa.bool_(): "boolean",
    }
    return "timestamp" if pa.types.is_timestamp(t) else names[t]


def test_athena_ddl_matches_base_schema():
    sql = (REPO / "deployments" / "athena.sql").read_text()
    body = sql[sql.index("CREATE EXTERNAL TABLE") : sql.index("PARTITIONED BY")]
    columns = re.findall(r"^\s+`(\w+)`\s+(.+?),?$", body, flags=re.MULTILINE)
    expected = [(f.name, _hive_type(f.type)) for f in BASE_SCHEMA if f.name != "platform"]
    assert columns == expected
    [values] = re.findall(r"'projection.platform.values' = '([^']*)'", sql)
    assert set(values.split(",")) == set(PLATFORMS)


def test_extract_of_a_results_file_names_what_it_is(tmp_path):
    """A results Parquet given to `extract` (whose Parquet is a profile's Summary table) is named for
    what it is, not reported as colliding profile fields."""
    from kernelsweep.errors import ExtractError
    from kernelsweep.profiles.metrics import read_profile

    run = str(uuid.uuid4())
    [written] = write_results(make_rows(run, "trn2"), str(tmp_path / "r"), flow_run_id=run, run_date=RUN_DATE,
                              lineage=LINEAGE)  # fmt: skip
    with pytest.raises(ExtractError, match="is a kernelsweep results file, not a profile; use `kernelsweep report`"):
        read_profile(written)


def test_a_parquet_file_kernelsweep_did_not_write_is_skipped_with_one_warning(tmp_path, caplog):
    """A readable Parquet object without kernelsweep's footer mark (someone's export dropped into the
    results) is neither a failed point nor a crash: skipped, named once, the real rows read."""
    root = tmp_path / "results"
    [path] = write_results(make_rows("run-1"), str(root), flow_run_id="run-1", run_date=RUN_DATE, lineage=LINEAGE)
    pq.write_table(
        pa.table({"row_id": ["x"], "status": ["failed"], "colour": ["red"]}), Path(path).parent / "x.parquet"
    )
    with caplog.at_level(logging.WARNING):
        table = reader.read(str(root))
    assert table.num_rows == 4 and "x" not in table.column("row_id").to_pylist()
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "skipped" in warning and "x.parquet" in warning and "move it out of the results" in warning
