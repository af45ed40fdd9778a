"""The results site's builders on a small dataset written through the real writer: what each page's
data holds, what a rebuild redoes, the S3 objects' content types (moto's server over HTTP), the CLI's
bad input and `--serve`. The browser tests are in tests/test_site_browser.py (slow stage)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
import pytest
from site_data import SLOWED, night, nights

from kernelsweep.report.acknowledge import Acknowledgement
from kernelsweep.report.ranks import median_interval
from kernelsweep.site.build import MANIFEST, build_site, site_link
from kernelsweep.site.detail import intervals
from kernelsweep.site.serve import server


def _payload(path: Path, call: str) -> dict:
    text = path.read_text()
    assert text.startswith(f"{call}(") and text.endswith(");\n")
    return json.loads(text[len(call) + 1 : -3])


@pytest.fixture
def results(tmp_path) -> str:
    return nights(tmp_path, count=12, step_night=8)


def test_a_kernel_page_holds_every_run_with_its_interval_and_the_step_with_its_cause(results):
    built = build_site(results)
    site = Path(results) / "site"
    assert built.location == str(site / "index.html") and sorted(built.rebuilt) == ["mlp", "vector_add"]
    data = _payload(site / "kernel-vector_add.js", "kernelsweepData")
    slowed = next(s for s in data["series"] if s["shape"] == SLOWED[1])
    [points] = [
        p for p in _payload(site / "series" / "vector_add-0.js", "kernelsweepSeries") if p["id"] == slowed["id"]
    ]
    assert len(points["t"]) == 12 and points["t"] == sorted(points["t"]) and len(data["runs"]) == 12
    assert all(lo < m < hi for lo, m, hi in zip(points["lo"], points["m"], points["hi"], strict=True))
    [step] = slowed["steps"]
    assert step["at"] == 8 and step["direction"] == "slower" and step["state"] == "open"
    assert step["cause"] == "compiler 2.21.33363.0 -> 2.22.41000.0" and 15 < step["change"] < 25
    other = next(s for s in data["series"] if s["shape"] != SLOWED[1])
    assert other["steps"] == []
    columns = _payload(site / "lineage" / f"vector_add-{slowed['id']}.js", "kernelsweepLineage")["columns"]
    lineage = [{k: c["values"][c["codes"][i]] for k, c in columns.items() if c["codes"][i] >= 0} for i in range(12)]
    assert len(columns["row_id"]["codes"]) == 12 and lineage[8]["compiler_version"] == "2.22.41000.0"
    assert columns["compiler_version"]["values"] == ["2.21.33363.0", "2.22.41000.0"]  # each distinct value once
    assert lineage[8]["neff_uri"] == f"s3://artifacts/neff/{lineage[8]['row_id']}.neff"
    assert lineage[8]["flow_run_id"] == data["runs"][points["run"][8]] and lineage[8]["run_date"] == "2026-03-09"
    assert "ir_uri" not in lineage[8]  # none stored: absent, not null
    overview = (site / "index.html").read_text()
    assert "<tr class='regression open'>" in overview and "kernel-vector_add.html#s0" in overview
    assert "compiler 2.21.33363.0 -&gt; 2.22.41000.0" in overview
    assert (site / "compare-latest" / "index.html").exists() and (site / "static" / "uPlot.iife.min.js").exists()
    assert "http" not in (site / "kernel-vector_add.html").read_text()  # nothing from elsewhere


def test_a_rebuild_redoes_only_the_kernels_whose_rows_or_statuses_changed(results):
    site = Path(results) / "site"
    build_site(results)
    page = site / "kernel-vector_add.js"
    written = page.stat().st_mtime_ns
    assert build_site(results).rebuilt == []
    night(results, 12, step_night=8, kernels=("mlp",))  # a night of mlp only
    again = build_site(results)
    assert again.rebuilt == ["mlp"] and again.kept == ["vector_add"] and page.stat().st_mtime_ns == written
    assert len(_payload(site / "series" / "mlp-0.js", "kernelsweepSeries")[0]["t"]) == 13
    assert "2026-03-13" in (site / "index.html").read_text()  # the overview is always current
    why = "the new compiler trades this shape for larger ones"
    acked = build_site(results, acknowledged=[Acknowledgement(reason=why, kernel="vector_add")])
    assert acked.rebuilt == ["vector_add"]  # its step's status changed
    [step] = [s for s in _payload(page, "kernelsweepData")["series"] if s["steps"]][0]["steps"]
    assert step["state"] == "acknowledged" and step["note"] == why
    assert "<tr class='regression acknowledged'>" in (site / "index.html").read_text()


def test_intervals_of_many_runs_at_once_match_each_runs_own():
    rng = np.random.default_rng(3)
    runs = [list(rng.normal(10, 1, n)) for n in (1, 2, 3, 7, 9, 9, 30)] + [[]]
    low, high = intervals(pa.array(runs, pa.list_(pa.float64())))
    for run, lo, hi in zip(runs, low, high, strict=True):
        assert (lo, hi) == median_interval(run) if run else np.isnan(lo) and np.isnan(hi)


def test_on_s3_every_object_has_its_content_type_and_a_rebuild_reads_the_manifest_there(results, bucket):
    out = f"s3://{bucket}/site"
    built = build_site(results, out)
    assert built.location == f"{out}/index.html" and built.rebuilt
    client = boto3.client("s3")
    types = {
        "index.html": "text/html",
        "kernel-vector_add.js": "text/javascript",
        "static/uPlot.min.css": "text/css",
        MANIFEST: "application/json",
        "lineage/mlp-0.js": "text/javascript",
    }
    for key, expected in types.items():
        assert client.head_object(Bucket=bucket, Key=f"site/{key}")["ContentType"] == expected, key
    assert build_site(results, out).rebuilt == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kernelsweep.flows.cli", "site", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_cli_builds_and_refuses_bad_input_in_one_line(results, tmp_path):
    done = _cli(results, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0 and "2 kernel(s) rebuilt" in done.stderr, done.stderr
    for args in ((), ("--serve", str(tmp_path)), (str(tmp_path / "nothing"),)):
        bad = _cli(*args, cwd=tmp_path)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, (args, bad.stderr)


def test_serve_shows_a_built_site_on_the_loopback(results):
    build_site(results)
    with server(Path(results) / "site", 0) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        with urllib.request.urlopen(f"{base}/kernel-mlp.js") as answer:
            assert answer.headers["Content-Type"] == "text/javascript" and answer.read().startswith(b"kernelsweepData(")
        httpd.shutdown()


def test_the_sites_link_is_its_web_servers_when_one_is_set_else_the_files():
    assert site_link("/r/site/index.html", "https://ks.example/site/") == "https://ks.example/site/index.html"
    assert site_link("/r/site/index.html") == "file:///r/site/index.html"
