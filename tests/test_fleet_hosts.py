"""The fleet's core rules without a server: version pins, a family whose hosts disagree, the nightly
schedule's settings, what the shard-retry automation matches, and report retention."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from kernelsweep.errors import UsageError
from kernelsweep.fleet.hosts import HostReport, describe, disagreements, unmet
from kernelsweep.fleet.plan import FleetSettings, fleet_settings
from kernelsweep.report.retention import prune_reports
from kernelsweep.sweepspec.models import Requirements


def _host(name: str, compiler: str | None, family: str = "trn2") -> HostReport:
    return HostReport(name, family, {"compiler": compiler, "runtime": "2.27", "nki": "0.7", "profiler": "2.1"}, "sim")


def test_a_pin_names_each_version_a_host_lacks():
    pins = Requirements(compiler="2.21.*", nki="0.7*")
    assert unmet(pins, _host("a", "2.21.3").versions) == []
    assert unmet(pins, _host("b", "2.22.0").versions) == ["compiler 2.22.0 (the run requires 2.21.*)"]
    assert unmet(pins, _host("c", None).versions) == ["compiler unknown (the run requires 2.21.*)"]
    assert unmet(Requirements(), _host("d", None).versions) == []  # nothing pinned: any host


def test_a_family_whose_hosts_run_different_compilers_is_flagged_once():
    hosts = [_host("trn2-a", "2.21.0"), _host("trn2-b", "2.22.0"), _host("trn1-a", "2.22.0", "trn1")]
    found = disagreements(hosts)
    assert found == {"trn2": {"compiler": {"2.21.0": ["trn2-a"], "2.22.0": ["trn2-b"]}}}
    assert describe(found) == ["trn2 hosts differ: compiler 2.21.0 (trn2-a), 2.22.0 (trn2-b)"]
    assert disagreements([_host("trn2-a", "2.21.0"), _host("trn2-b", "2.21.0")]) == {}


def test_a_hosts_report_survives_its_trip_through_flow_run_labels():
    report = _host("trn2-a", "2.21.0")
    assert HostReport.from_labels(report.labels()) == report
    assert HostReport.from_labels({}) is None  # a shard that never started


def test_the_nightly_schedule_comes_from_the_fleet_table_or_the_command_line(tmp_path):
    spec = tmp_path / "nightly.toml"
    spec.write_text('name = "n"\n[fleet]\ncron = "30 3 * * *"\ntimezone = "Europe/Berlin"\n')
    assert fleet_settings(spec) == FleetSettings("30 3 * * *", "Europe/Berlin")
    assert fleet_settings(spec).override(None, "UTC") == FleetSettings("30 3 * * *", "UTC")
    with pytest.raises(UsageError, match="--timezone: unknown time zone 'Mars/Base'"):
        fleet_settings(spec).override(None, "Mars/Base")
    spec.write_text('name = "n"\n')
    assert fleet_settings(spec) == FleetSettings("0 2 * * *", "UTC")  # no [fleet] table: 02:00 UTC
    spec.write_text('name = "n"\n[fleet]\ncorn = "0 2 * * *"\n')
    with pytest.raises(UsageError, match=r"\[fleet\] takes cron and timezone, not corn"):
        fleet_settings(spec)


def test_the_retry_automation_matches_only_runs_with_retries_left():
    from kernelsweep.flows.fleet.automations import run_counts, shard_retries

    automation = shard_retries(2)
    assert automation.trigger.match["prefect.run-count"] == run_counts(2) == ["0", "1", "2"]
    assert automation.enabled and not shard_retries(0).enabled


def test_old_report_folders_go_and_the_new_one_stays(tmp_path):
    results = tmp_path / "results"
    now = datetime.now(UTC)
    for report_id, age_days in (("old", 40), ("recent", 3), ("current", 90)):
        page = results / "reports" / report_id / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text("<html></html>")
        stamp = (now - timedelta(days=age_days)).timestamp()
        os.utime(page, (stamp, stamp))
    assert prune_reports(str(results), 30, now, spare="current") == ["old"]
    assert sorted(p.name for p in (results / "reports").iterdir()) == ["current", "recent"]
    assert prune_reports(str(results), 30, now, spare="current") == []  # again: nothing more


def test_a_report_with_a_step_notices_its_regression_and_the_night():
    import numpy as np
    from report_rows import nights, report_of

    from kernelsweep.report.notify import REGRESSION_EVENT, SUMMARY_EVENT, notices

    rows = nights(np.random.default_rng(0), ["n=1", "n=2"], 16, step={"n=2": 1.3}, step_night=10)
    report = report_of(rows)
    regression, night = notices(report, "https://reports.example/r/index.html")
    assert regression.event == REGRESSION_EVENT and night.event == SUMMARY_EVENT
    assert regression.resource["prefect.resource.id"] == "kernelsweep.series.vector-add-n-2-float32-trn2"
    assert regression.payload["subject"].startswith("kernelsweep regression: vector_add n=2 float32 trn2 2")
    assert "https://reports.example/r/index.html" in regression.payload["body"]
    assert night.payload["subject"] == "kernelsweep report: 2 points, 0 failed, 1 open regressions"
    assert "site" not in night.payload["body"]
    site = "https://results.example/site/index.html"
    assert night.payload["site"] is None and notices(report, "r", site)[-1].payload["site"] == site
    assert f"Results site: {site}" in notices(report, "r", site)[-1].payload["body"]
