"""Triage in the data: `kernelsweep triage ack|fix|reopen|list` set each regression's status in the
results (`<results>/_triage/changes.json`), every change kept with who and when, and `report` honours
it (an acknowledged or fixed regression no longer fails it) beside the --acknowledged TOML file.

Run through the console script's `main` on a results folder, and once on moto's S3 server."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_results_io import _row

from kernelsweep.flows.cli.app import main
from kernelsweep.report import triage_file
from kernelsweep.report.triage import load
from kernelsweep.results.writer import write_results

FIRST = date(2026, 3, 1)
NIGHTS, STEP_NIGHT = 14, 10  # the +20% step of m=128 is first seen on FIRST + 10 days
STEPPED, STEADY = "m=128", "m=256"
STEP_DAY = (FIRST + timedelta(days=STEP_NIGHT)).isoformat()


def _nights(results: str) -> None:
    """14 nightly runs of two matmul shapes, 7 repeats, 1% jitter; from night 10 a new compiler makes m=128
    20% slower."""
    rng = np.random.default_rng(7)
    for night in range(NIGHTS):
        run = str(uuid.uuid4())
        upgraded = night >= STEP_NIGHT
        rows = []
        for i, shape in enumerate((STEPPED, STEADY)):
            level = 10.0 * (1 + i) * (1.2 if upgraded and shape == STEPPED else 1.0)
            values = level * (1 + 0.01 * rng.standard_normal(7))
            rows.append(
                _row(
                    {
                        "schema_version": 1,
                        "kernel_ref": "kernelsweep.kernels.matmul:MATMUL",
                        "params": {"m": 128 * (1 + i)},
                        "seed": 0,
                        "row_id": f"{run}/{shape}",
                        "sweep": "nightly",
                        "kernel": "matmul",
                        "shape": shape,
                        "dtype": "bfloat16",
                        "platform": "trn2",
                        "lnc": 2,
                        "toolchain": "sim",
                        "is_simulation": True,
                        "status": "ok",
                        "total_time_us": float(np.median(values)),
                        "latencies_us": [float(v) for v in values],
                        "compiler_version": "2.22" if upgraded else "2.21",
                        "flow_run_id": run,
                        "started_at": datetime(2026, 3, 1, 2, tzinfo=UTC) + timedelta(days=night),
                    }
                )
            )
        write_results(rows, results, flow_run_id=run, run_date=FIRST + timedelta(days=night), lineage={})


def _cli(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    """The console script's `main` in this process (`env`: variables set, or unset where None); its exit
    code and its two streams."""
    runner = CliRunner()
    with runner.isolation(env=env) as (stdout, stderr, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, stdout.getvalue().decode(), stderr.getvalue().decode()


def _report_json(results: str, *extra: str) -> tuple[int, dict]:
    code, out, err = _cli("report", "--results", results, "--format", "json", *extra)
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("triage") / "results"
    _nights(str(results))
    return results


@pytest.fixture
def results(dataset, tmp_path) -> str:
    """A copy of the dataset of this test's own, with no triage file yet."""
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(dataset, copy)
    return str(copy)


def _step(document: dict) -> dict:
    [step] = [r for r in document["regressions"] if r["shape"] == STEPPED]
    return step


def test_ack_fix_and_reopen_set_the_status_report_honours_and_keep_every_change(results):
    code, before = _report_json(results)
    assert code == 1 and _step(before)["state"] == "open" and before["open_regressions"] == 1

    link = "https://tickets.example.com/PERF-7"
    code, out, err = _cli("triage", "ack", "--results", results, "--kernel", "matmul", "--shape", STEPPED,
                          "--night", STEP_DAY, "--reason", "compiler 2.22 trades m=128 for the large shapes",
                          "--link", link, "--by", "alice")  # fmt: skip
    assert code == 0, err
    assert f"acknowledged: matmul {STEPPED}" in out and "1 regression(s) acknowledged" in err
    code, acked = _report_json(results)
    step = _step(acked)
    assert code == 0 and acked["open_regressions"] == 0
    assert step["state"] == "acknowledged" and step["link"] == link and step["triaged_by"] == "alice"
    assert step["reason"] == step["acknowledged"] == "compiler 2.22 trades m=128 for the large shapes"

    code, _, err = _cli("triage", "reopen", "--results", results, "--shape", STEPPED, "--by", "bob")
    assert code == 0, err
    code, reopened = _report_json(results)
    assert code == 1 and _step(reopened)["state"] == "open" and _step(reopened)["reason"] is None

    notes = "https://example.com/release-notes/2.23.1"
    code, out, err = _cli("triage", "fix", "--results", results, "--shape", STEPPED, "--change", "compiler 2.23.1",
                          "--link", notes, "--by", "carol", "--format", "json")  # fmt: skip
    assert code == 0 and json.loads(out)["regressions"][0]["night"] == STEP_DAY, err  # the change as recorded
    code, fixed = _report_json(results)
    assert code == 0 and _step(fixed)["state"] == "fixed" and _step(fixed)["fixed_by"] == "compiler 2.23.1"

    statuses = load(results)  # what a site reads: every change in order, with who and when
    assert [(c.status, c.by) for c in statuses.changes] == [("acknowledged", "alice"), ("open", "bob"),
                                                            ("fixed", "carol")]  # fmt: skip
    assert all(datetime.fromisoformat(c.at).tzinfo is not None for c in statuses.changes)
    [(regression, status)] = statuses.current.items()
    assert (regression.shape, regression.night, status.status) == (STEPPED, FIRST + timedelta(days=STEP_NIGHT), "fixed")
    assert len(statuses.history(regression)) == 3

    code, out, _ = _cli("triage", "list", "--results", results, "--history", "--format", "json")
    listed = json.loads(out)
    assert code == 0 and [r["state"] for r in listed["regressions"]] == ["fixed"]
    assert [c["status"] for c in listed["changes"]] == ["acknowledged", "open", "fixed"]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(results):
    file = Path(str(triage_file.location(results)))
    cases = [
        (("ack", "--shape", STEPPED, "--reason", "ok", "--link", "tickets/PERF-7"), "is not an http(s) URL"),
        (("ack", "--shape", STEPPED, "--reason", "  "), "give one non-empty line"),
        (("ack", "--reason", "everything"), "name the regression(s)"),
        (("ack", "--shape", STEADY, "--reason", "not slower"), "no regression in"),
        (("ack", "--shape", STEPPED, "--night", "2026-03-02", "--reason", "wrong night"), "no regression in"),
        (("fix", "--shape", STEPPED), "Missing option '--change'"),
        (("reopen", "--shape", STEPPED), "no acknowledged or fixed regression"),
    ]
    for args, message in cases:
        code, out, err = _cli("triage", args[0], "--results", results, *args[1:])
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not file.exists()

    file.parent.mkdir()
    file.write_text('{"changes": [{"status": "won\'t fix"}]}')  # edited by hand into something else
    code, _, err = _cli("report", "--results", results)
    assert code == 2 and "_triage/changes.json" in err and len(err.strip().splitlines()) == 1


def test_the_acknowledged_file_and_the_triage_file_are_one_status(results, tmp_path):
    toml = tmp_path / "acknowledged.toml"
    toml.write_text(f'[[step]]\nshape = "{STEPPED}"\nreason = "known"\nlink = "https://example.com/PERF-1"\n')
    code, document = _report_json(results, "--acknowledged", str(toml))
    assert code == 0 and _step(document)["state"] == "acknowledged"
    assert (
        _step(document)["triaged_by"] == "--acknowledged file"
        and _step(document)["link"] == "https://example.com/PERF-1"
    )

    code, _, err = _cli("triage", "reopen", "--results", results, "--shape", STEPPED, "--acknowledged", str(toml))
    assert code == 0, err  # a recorded decision is newer than the file's: it wins
    code, document = _report_json(results, "--acknowledged", str(toml))
    assert code == 1 and _step(document)["state"] == "open"


def test_on_s3_each_change_is_appended_to_the_object_and_a_lost_race_retries(bucket):
    from kernelsweep.stores import s3

    results = f"s3://{bucket}/kernelsweep/results"
    _nights(results)
    code, _, err = _cli("triage", "ack", "--results", results, "--shape", STEPPED, "--reason", "known", "--by", "a")
    assert code == 0, err
    assert _report_json(results)[0] == 0

    class Racing:
        """The real client, but another writer appends between this writer's read and its write, once."""

        def __init__(self) -> None:
            self.client, self.raced = s3.make_client(), False

        def get_object(self, **kwargs):
            return self.client.get_object(**kwargs)

        def put_object(self, **kwargs):
            if not self.raced:
                self.raced = True
                triage_file.append(results, {**load(results).changes[0].to_json(), "by": "someone else"})
            return self.client.put_object(**kwargs)

    where = triage_file.location(results)
    triage_file._s3_append(Racing(), where, {**load(results).changes[0].to_json(), "by": "b"})
    assert [c.by for c in load(results).changes] == ["a", "someone else", "b"]  # nobody's change lost
    code, _, err = _cli("triage", "fix", "--results", results, "--shape", STEPPED, "--change", "abc1234", "--by", "c")
    assert code == 0, err
    code, document = _report_json(results)
    assert code == 0 and _step(document)["state"] == "fixed" and _step(document)["triaged_by"] == "c"
