"""`kernelsweep doctor` (and `--smoke`) and the version lookups behind it, on this machine, on the
simulated toolchain and on a stand-in Neuron host.

The Neuron host is tests/fixtures/tools: executables printing the documented `--version` and
`neuron-ls -j` output (and otherwise running the simulated tool, recording every call), a dpkg-query
knowing the runtime package, and stand-in `nki` packages (driver_0606 is nki 0.6.0's API).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelsweep.doctor import host_checks as doctor
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.toolchain import packages, versions
from kernelsweep.toolchain.resolve import Toolchain
from kernelsweep.toolchain.tracing.tracers import TRACERS

TOOLS = Path(__file__).parent / "fixtures" / "tools"


@pytest.fixture
def python_packages(monkeypatch):
    """Install stand-in Python packages (a tools/python root) for one test."""

    def forget():
        for name in [m for m in sys.modules if m.split(".")[0] in ("nki", "neuronxcc")]:
            del sys.modules[name]

    def install(*roots: str) -> None:
        forget()
        for root in ("kernels", *roots):
            monkeypatch.syspath_prepend(str(TOOLS / "python" / root))

    yield install
    forget()


@pytest.fixture
def neuron_host(tmp_path, python_packages) -> doctor.Host:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("neuron0", "neuron1", "neuron-extra"):
        (dev / name).touch()
    dmi = tmp_path / "product_name"
    dmi.write_text("trn2.48xlarge\n")
    python_packages("standalone", "driver_0606")
    return doctor.Host(path=str(TOOLS / "bin"), dev_dir=dev, dmi_product_name=dmi)


@pytest.fixture
def bare_host(tmp_path) -> doctor.Host:
    (tmp_path / "bin").mkdir()
    return doctor.Host(path=str(tmp_path / "bin"), dev_dir=tmp_path, dmi_product_name=tmp_path / "none")


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.name: check for check in checks}


def test_a_neuron_host_reports_every_tool_with_its_version(neuron_host):
    checks = by_name(doctor.diagnose(neuron_host))
    assert {name: c.status for name, c in checks.items()} == {
        "neuronx-cc": "ok", "profiler": "ok", "neuron-ls": "ok", "devices": "ok", "runtime": "ok",
        "Neuron Python": "ok", "NKI tracer": "ok", "SDK packages": "ok", "kernelsweep deps": "ok",
        "instance type": "ok", "toolchain": "ok",
    }  # fmt: skip
    assert checks["neuronx-cc"].found.endswith("neuronx-cc (NeuronX Compiler version 2.27.5334.0+f702b353)")
    assert checks["profiler"].found.startswith("neuron-explorer 2.29.18.0 at ")
    assert "(preferred over neuron-profile, also found)" in checks["profiler"].found
    assert checks["neuron-ls"].found.endswith(
        "1 device(s), 4 logical NeuronCores at LNC=2 (ids 0-3; physical 0-7); in use by pid 113985 "
        "(neuron-bench exec ...)"
    )
    assert checks["devices"].found == f"{neuron_host.dev_dir}/neuron0, {neuron_host.dev_dir}/neuron1"
    assert checks["runtime"].found == "aws-neuronx-runtime-lib 2.21.41.0"
    assert checks["NKI tracer"].found == "nki.compiler.driver (nki 0.6.0+standin; newest usable API)"
    assert checks["SDK packages"].found == "neuronx-cc 2.27.5334.0+f702b353, nki 0.6.0+standin"
    assert checks["instance type"].found == "trn2.48xlarge"
    assert all(c.fix is None for c in checks.values())


def test_the_neuron_host_rendering(neuron_host):
    text, code = doctor.report(neuron_host)
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "kernelsweep doctor"
    assert any(line.startswith("ok       toolchain") and "runs the real tools" in line for line in lines)
    assert "fix:" not in text


def test_this_machine_says_what_is_missing_and_that_the_sim_will_be_used(bare_host):
    checks = by_name(doctor.diagnose(bare_host))
    for name in ("neuronx-cc", "profiler", "neuron-ls", "devices", "runtime"):
        assert checks[name].status == "missing" and checks[name].fix, name
    assert "pip.repos.neuron.amazonaws.com neuronx-cc" in checks["neuronx-cc"].fix
    assert "aws-neuronx-tools" in checks["profiler"].fix
    assert "aws-neuronx-dkms" in checks["devices"].fix
    assert checks["instance type"].status == "info"
    text, code = doctor.report(bare_host)
    assert code == 1
    assert "`--toolchain auto` uses the simulated toolchain (every row is marked simulated)" in text
    assert text.count("fix: ") >= 5


def test_neuron_profile_alone_works_but_is_flagged_end_of_support(neuron_host, tmp_path):
    only = tmp_path / "old-bin"
    only.mkdir()
    for tool in ("neuronx-cc", "neuron-profile", "neuron-ls"):
        (only / tool).symlink_to(TOOLS / "bin" / tool)
    checks = by_name(doctor.diagnose(doctor.Host(path=str(only), dev_dir=neuron_host.dev_dir)))
    assert checks["profiler"].status == "warn" and checks["profiler"].found.startswith("neuron-profile 2.19.0.0 at ")
    assert "neuron-explorer" in checks["profiler"].fix
    assert checks["toolchain"].status == "ok"  # usable, just old


def test_pypi_placeholders_get_the_uninstall_fix(bare_host, python_packages):
    python_packages("placeholder")
    check = by_name(doctor.diagnose(bare_host))["SDK packages"]
    assert check.status == "warn"
    assert check.found == (
        "neuronx-cc 1.0.post1 (PyPI placeholder, not the Neuron SDK), nki 0.0.1 (PyPI placeholder, not the Neuron SDK)"
    )
    assert check.fix.startswith("python -m pip uninstall -y neuronx-cc nki; then ")


def test_the_sdks_own_python_is_shown_and_a_device_less_host_is_told_what_cpu_runs_for_real(bare_host, tmp_path):
    """KERNELSWEEP_NEURON_PYTHON names another interpreter (here a wrapper whose SDK, a stand-in, exists
    only through it): doctor asks that interpreter, and with no device says which parts are real."""
    sdk = tmp_path / "sdk-env" / "bin" / "python"
    sdk.parent.mkdir(parents=True)
    roots = ":".join(str(TOOLS / "python" / root) for root in ("kernels", "driver_0606"))
    sdk.write_text(f'#!/bin/sh\nPYTHONPATH={roots} exec {sys.executable} "$@"\n')
    sdk.chmod(0o755)
    host = doctor.Host(path=bare_host.path, dev_dir=bare_host.dev_dir, neuron_python=str(sdk))
    checks = by_name(doctor.diagnose(host))
    assert checks["Neuron Python"].status == "ok"
    assert checks["Neuron Python"].found.endswith(f"(Python {sys.version.split()[0]}), KERNELSWEEP_NEURON_PYTHON")
    assert checks["NKI tracer"].found.startswith("nki.compiler.driver (nki 0.6.0+standin")
    assert checks["SDK packages"].found == f"neuronx-cc 2.27.5334.0+f702b353, nki 0.6.0+standin (in {sdk})"
    verdict = checks["toolchain"].found
    assert verdict.startswith("cpu: the Neuron SDK traces and compiles here but there is no device")
    assert "timing_source=simulator" in verdict


def test_configured_paths_are_searched_first(bare_host):
    checks = by_name(doctor.diagnose(doctor.Host(path=bare_host.path, extra_paths=[str(TOOLS / "bin")])))
    assert checks["neuronx-cc"].status == "ok" and str(TOOLS / "bin") in checks["neuronx-cc"].found


# --- versions -----------------------------------------------------------------------------------


def test_version_strings_parse_from_their_documented_shapes():
    assert versions.parse_runtime_version("aws-neuronx-runtime-lib 2.21.41.0-fb1705f5f") == "2.21.41.0"
    assert versions.parse_runtime_version("INFO   NRT:nrt_init   Neuron Runtime 2.22.14.0 built on Sep  4 2024") == (
        "2.22.14.0"
    )
    assert versions.parse_runtime_version("NRT version: 2.21.41.0 (fb1705f5f26a)") == "2.21.41.0"
    assert versions.parse_runtime_version("no runtime here") is None


def test_the_nki_version_falls_back_to_the_nki_inside_neuronx_cc(python_packages):
    python_packages("legacy")
    assert packages.nki_version() == "neuronxcc.nki 2.14.227.0+2d4f85be"
    python_packages("driver_0606")
    assert packages.nki_version() == "0.6.0+standin"


def test_instance_type_comes_from_dmi_and_only_looks_like_one(tmp_path):
    dmi = tmp_path / "product_name"
    dmi.write_text("trn1.32xlarge\n")
    assert versions.instance_type(dmi) == "trn1.32xlarge"
    dmi.write_text("Standard PC (Q35 + ICH9, 2009)\n")
    assert versions.instance_type(dmi) is None
    assert versions.instance_type(tmp_path / "missing") is None


def test_collect_on_the_stand_in_host(neuron_host):
    tools = {t: (str(TOOLS / "bin" / t),) for t in ("neuronx-cc", "neuron-explorer", "neuron-profile", "neuron-ls")}
    found = versions.collect(
        Toolchain(kind="neuron", commands=tools, tracers=TRACERS), search_path=neuron_host.path,
        dmi_product_name=neuron_host.dmi_product_name,
    )  # fmt: skip
    assert found == versions.ToolVersions(
        compiler="2.27.5334.0+f702b353", profiler="2.29.18.0", runtime="2.21.41.0", nki="0.6.0+standin",
        profiler_tool="neuron-explorer", instance_type="trn2.48xlarge", tracer="nki.compiler.driver",
    )  # fmt: skip
    assert found.profiler_tool == "neuron-explorer"


def test_collect_on_the_simulator_says_simulated(tmp_path):
    found = versions.collect(sim_toolchain(tmp_path))
    assert found.compiler.endswith("+kernelsweep.sim") and found.profiler.endswith("+kernelsweep.sim")
    assert found.runtime.endswith("+kernelsweep.sim") and found.nki == "0.7.0+kernelsweep.sim"
    assert (found.tracer, found.profiler_tool, found.instance_type) == (
        "sim-nki-frontend",
        "neuron-explorer",
        "simulated",
    )


# --- doctor --smoke -------------------------------------------------------------------------------


@pytest.fixture
def quick_ui_probe(monkeypatch):
    """The Parquet view without --ingest-only never returns on the simulator: wait 5 s, not 30."""
    from kernelsweep.doctor import smoke

    monkeypatch.setattr(smoke, "PARQUET_PROBE_SECONDS", 5.0)


@pytest.mark.slow
def test_smoke_runs_end_to_end_on_the_simulated_toolchain(tmp_path, monkeypatch, quick_ui_probe):
    from click.testing import CliRunner

    from kernelsweep.flows.cli.app import cli

    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    report = tmp_path / "smoke.txt"
    result = CliRunner().invoke(cli, ["doctor", "--smoke", "--toolchain", "sim", "--report", str(report)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert (
        lines[0]
        == "kernelsweep doctor --smoke: simulated toolchain (every result below is SIMULATED), platform trn2 at LNC=2"
    )
    titles = [line for line in lines if line.startswith("== ")]
    assert titles[0] == "== 1/12 devices: neuron-ls under the sweep's LNC" and len(titles) == 12
    verdicts = [
        line.split()[0] for line in lines if line.split() and line.split()[0] in ("ok", "warn", "fail", "info", "skip")
    ]
    assert len(verdicts) == 12 and "fail" not in verdicts
    assert lines[-1] == f"smoke check: 9 ok, 2 info, 1 skip; report: {report}"
    assert "$ NEURON_LOGICAL_NC_CONFIG=2 NEURON_RT_VISIBLE_CORES=0 " in result.output  # the capture, as run
    text = report.read_text()
    assert "more lines in the report" in result.output and "more lines in the report" not in text  # all of it
    assert '"n_' in text and text.splitlines()[-1] == "smoke check: 9 ok, 2 info, 1 skip"


def test_a_failing_step_skips_what_needs_it_and_fails_the_check(tmp_path, monkeypatch):
    from kernelsweep.doctor.smoke import run_smoke, smoke_point
    from kernelsweep.doctor.smoke_render import exit_code
    from kernelsweep.sim.toolchain import sim_toolchain

    sim = sim_toolchain(tmp_path / "sim", env={"KERNELSWEEP_SIM_FAULTS": "compile-error=vector_add"})
    steps = {s.title: s for s in run_smoke(sim, smoke_point("trn2"), tmp_path / "work")}
    assert steps["trace and compile one point"].status == "fail"
    assert "[NCC_EVRF009]" in steps["trace and compile one point"].verdict
    assert steps["capture: every 2nd of 4 executions"].status == "skip"
    assert steps["view: summary-json"].verdict.startswith("needs a NEFF")
    assert exit_code(list(steps.values())) == 1


@pytest.mark.slow
def test_smoke_on_the_stand_in_host_runs_every_tool_as_documented(
    tmp_path, monkeypatch, python_packages, quick_ui_probe
):
    """The real adapters against the stand-in executables and the stand-in nki 0.6.0: every tool call
    is recorded, and each is the reference's documented command line (tests/documented_forms.py)."""
    import json

    from documented_forms import documented_as

    from kernelsweep.doctor.smoke import run_smoke, smoke_point

    calls = tmp_path / "calls.jsonl"
    for name, value in {
        "STANDIN_CALLS": str(calls), "KERNELSWEEP_STANDIN_PYTHON": sys.executable,
        "KERNELSWEEP_SIM_STATE": str(tmp_path / "sim"), "KERNELSWEEP_SIM_PLATFORM": "trn2",
        "NEURON_RT_VIRTUAL_CORE_SIZE": "1", "NEURON_LOGICAL_NC_CONFIG": "1",  # a DLAMI shell's exports
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    python_packages("standalone", "driver_0606")
    tools = {t: (str(TOOLS / "bin" / t),) for t in ("neuronx-cc", "neuron-explorer", "neuron-profile", "neuron-ls")}
    host = Toolchain(kind="neuron", commands=tools, tracers=TRACERS)
    steps = {s.title: s for s in run_smoke(host, smoke_point("trn2"), tmp_path / "work")}
    status = {title: step.status for title, step in steps.items()}
    assert status == {
        "devices: neuron-ls under the sweep's LNC": "warn",  # the sample device is held by pid 113985
        "versions: compiler and profiler": "ok",
        "tracers: which NKI API this host has": "ok",
        "trace and compile one point": "ok",
        "what _write_tensorizer_ir writes": "info",
        "does `acc += nl.matmul(...)` trace": "info",
        "capture: every 2nd of 4 executions": "ok",
        "outputs: saved by name, checked against numpy": "ok",
        "view: summary-json": "ok",
        "view: full JSON": "info",
        "view: Parquet, with and without --ingest-only": "ok",
        "busy core: a second capture on a held core": "ok",
    }, {t: s.verdict for t, s in steps.items()}
    assert steps["trace and compile one point"].verdict.startswith("nki.compiler.driver (nki 0.6.0+standin) wrote")
    assert steps["what _write_tensorizer_ir writes"].verdict == "_write_tensorizer_ir wrote: tensorizer_ir.txt"
    assert "pid 113985" in steps["devices: neuron-ls under the sweep's LNC"].details[0]
    recorded = [c for c in map(json.loads, calls.read_text().splitlines()) if "tool" in c]  # not the nki stand-in's
    undocumented = [
        " ".join([c["tool"], *c["argv"]]) for c in recorded if documented_as([c["tool"], *c["argv"]]) is None
    ]
    # the one deliberate exception: the Parquet view without --ingest-only, asked whether it returns
    assert (
        len(undocumented) == 1
        and "--output-format=parquet" in undocumented[0]
        and "--ingest-only" not in undocumented[0]
    )
    for call in recorded:
        assert "NEURON_RT_VIRTUAL_CORE_SIZE" not in call["env"] or call["argv"][:1] != ["capture"]
        if call["tool"] == "neuron-ls" or call["argv"][:1] == ["capture"]:
            assert call["env"]["NEURON_LOGICAL_NC_CONFIG"] == "2", call  # the point's LNC, not the shell's 1
    assert {documented_as([c["tool"], *c["argv"]]) for c in recorded} >= {
        "compiler version", "profiler version", "devices", "capture", "view summary-json", "view json", "view parquet",
    }  # fmt: skip


def test_the_neuron_extra_cannot_install_a_pypi_placeholder():
    import tomllib

    from packaging.requirements import Requirement

    extra = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    wanted = {Requirement(r).name: Requirement(r).specifier for r in extra["neuron"]}
    assert set(wanted) == set(packages.SDK_PACKAGES)  # nki is a wheel of its own, not part of neuronx-cc
    for name, placeholders in packages.PLACEHOLDER_VERSIONS.items():
        assert not any(wanted[name].contains(v) for v in placeholders), (name, wanted[name])
