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
    return doctor.Host(path=str(TOOLS / "bin"), dev_dir=dev, dmi_product_name=dmi, temp_dir=tmp_path)


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
        "Neuron Python": "ok", "NKI tracer": "ok", "SDK packages": "ok", "support trn1": "info",
        "support trn2": "ok", "support inf2": "info", "support trn3": "ok", "kernelsweep deps": "ok",
        "instance type": "ok", "scratch folders": "ok", "toolchain": "ok",
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
    assert checks["support trn1"].found.startswith("nki 0.6.0+standin is outside it: NKI up to 0.2 (SDK <= 2.28)")
    assert "AWS NKI FAQ (SDK 2.29.0-2.33.1)" in checks["support trn3"].found
    assert all(c.fix is None for c in checks.values())


def test_a_family_outside_the_installed_nkis_support_is_warned_on_its_own_host(neuron_host):
    """AWS's NKI FAQ lists Trn2 and Trn3 only for NKI >= 0.3: nki 0.6 on a trn1 host gets the warning."""
    neuron_host.dmi_product_name.write_text("trn1.32xlarge\n")
    checks = by_name(doctor.diagnose(neuron_host))
    assert (
        checks["support trn1"].status == "warn" and "expect unsupported kernels to fail" in checks["support trn1"].fix
    )
    assert checks["support inf2"].status == "info" and checks["support trn2"].status == "ok"


def test_a_host_left_with_only_nki_0_7s_documented_route_is_warned(tmp_path, python_packages):
    """No compile API fits (the tutorial-shaped stand-in): sweeps compile by executing, the row says so."""
    python_packages("jit_artifacts")
    host = doctor.Host(path=str(TOOLS / "bin"), dev_dir=tmp_path, dmi_product_name=tmp_path / "none")
    tracer = by_name(doctor.diagnose(host))["NKI tracer"]
    assert tracer.status == "warn" and tracer.found.startswith("nki.jit/artifacts (nki 0.7.0+standin")
    assert "compiled by executing it on its leased core" in tracer.found and "step 4" in tracer.fix


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
        Toolchain(kind="neuron", commands=tools, tracers=TRACERS), neuron_host.temp_dir, search_path=neuron_host.path,
        dmi_product_name=neuron_host.dmi_product_name,
    )  # fmt: skip
    assert found == versions.ToolVersions(
        compiler="2.27.5334.0+f702b353", profiler="2.29.18.0", runtime="2.21.41.0", nki="0.6.0+standin",
        profiler_tool="neuron-explorer", instance_type="trn2.48xlarge", tracer="nki.compiler.driver",
    )  # fmt: skip
    assert found.profiler_tool == "neuron-explorer"


def test_collect_on_the_simulator_says_simulated(tmp_path):
    found = versions.collect(sim_toolchain(tmp_path), tmp_path)
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


SMOKE_TITLES = (
    "devices: neuron-ls under the sweep's LNC",
    "versions: compiler and profiler",
    "tracers: which NKI API this host has",
    "signatures: the SDK's compile API, as installed",
    "trace and compile the bf16 matmul",
    "trace and compile the matmul at non-default tunables",
    "what _write_tensorizer_ir writes",
    "does `acc += nl.matmul(...)` trace",
    "capture: every 2nd of 4 executions",
    "outputs: saved by name, checked against numpy",
    "view: summary-json, its entries at this LNC",
    "plausibility: time, MFU, hardware FLOPs",
    "summary entries: which reading of them held",
    "DGE notifications: a capture with and one without",
    "the bf16 MLP: trace, capture, outputs, plausibility",
    "profile schema: what this Explorer names",
    "view: full JSON",
    "view: Parquet, with and without --ingest-only",
    "busy core: a second capture on a held core",
)


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
    assert lines[1].startswith("points: matmul M=256,K=256,N=1024 bfloat16, then mlp; host ")
    titles = [line.removeprefix("== ").split(" ", 1) for line in lines if line.startswith("== ")]
    assert titles == [[f"{i}/19", title] for i, title in enumerate(SMOKE_TITLES, 1)]
    verdicts = [
        line.split()[0] for line in lines if line.split() and line.split()[0] in ("ok", "warn", "fail", "info", "skip")
    ]
    assert len(verdicts) == 19 and "fail" not in verdicts
    assert lines[-1] == f"smoke check: 15 ok, 2 info, 2 skip; report: {report}"
    assert "$ NEURON_LOGICAL_NC_CONFIG=2 NEURON_RT_VISIBLE_CORES=0 " in result.output  # the capture, as run
    # the new checks: entries combined, plausibility, DGE compared, the MLP, each naming the risk it settles
    assert "ok    2 summary entries at LNC=2: rows combine them" in result.output
    assert "      ruled out: N4 (at LNC=2 a row reports one core's summary entry" in result.output
    assert "ok    plausible: " in result.output and "hardware_flops / model FLOPs = 1.062" in result.output
    assert "  dma_transfer_total_bytes: without 589824, with 1179648" in result.output
    assert "view warning without: WARN[0000] DMA results may not be accurate" in result.output
    assert "ok    mlp b=1,s=128,h=256,i=256 bfloat16: outputs correct; plausible: " in result.output
    assert "  N3  ruled out (step 14): DMA and MBU figures understated" in result.output
    assert "sim-nki-frontend traced and compiled the matmul at tile_n=256, loop_order=nm" in result.output
    assert "ok    2 entries, one per physical core: summing their counters (as rows do) held" in result.output
    assert "  N8  not checked by the smoke" in result.output and "  O1  open (step 4)" in result.output
    text = report.read_text()
    assert "more lines in the report" in result.output and "more lines in the report" not in text  # all of it
    assert '"n_' in text and text.splitlines()[-1] == "smoke check: 15 ok, 2 info, 2 skip"
    assert "fields (name: unit), for the 12.x map: total_time: seconds, neuroncore_cycle_count: cycles" in text


@pytest.mark.slow
@pytest.mark.parametrize("tools", ["2.33", "2.34"])
def test_smoke_on_later_stand_in_tools_reads_their_formats(tmp_path, quick_ui_probe, tools):
    """Schema 12.0.1's printout (under `view`, nanosecond times by the stand-in's hypothesis) and, on
    2.34, no full JSON and no `neuron-ls -j`: the smoke says so and every check still passes."""
    from kernelsweep.doctor.smoke import run_smoke, smoke_point

    sim = sim_toolchain(tmp_path / "sim", env={"KERNELSWEEP_SIM_TOOLS": tools})
    steps = {s.title: s for s in run_smoke(sim, smoke_point("trn2"), tmp_path / "work")}
    assert not [t for t, s in steps.items() if s.status == "fail"], {t: s.verdict for t, s in steps.items()}
    schema = steps["profile schema: what this Explorer names"]
    assert schema.verdict == "schema 12.0.1 names every field rows name (read as 7.4.0's names)"
    assert schema.details[0] == "Summary fields 54; time unit(s): nanoseconds"
    assert schema.runs[0].argv[-2:] == ["view", "--show-profile-schema"] and len(schema.runs) == 1
    assert steps["plausibility: time, MFU, hardware FLOPs"].status == "ok"
    listing = steps["devices: neuron-ls under the sweep's LNC"].runs
    full_json = steps["view: full JSON"]
    if tools == "2.34":
        assert [r.argv[-2:] for r in listing][-1] == ["--output-format", "json"]
        assert (full_json.status, full_json.verdict) == (
            "skip",
            "neuron-explorer 2.34.0.0+kernelsweep.sim writes no full JSON (ended after 2.33)",
        )
    else:
        assert listing[-1].argv[-1] == "-j" and full_json.status == "info"


def test_a_failing_step_skips_what_needs_it_and_fails_the_check(tmp_path, monkeypatch):
    from kernelsweep.doctor.smoke import run_smoke, smoke_point
    from kernelsweep.doctor.smoke_render import exit_code
    from kernelsweep.sim.toolchain import sim_toolchain

    sim = sim_toolchain(tmp_path / "sim", env={"KERNELSWEEP_SIM_FAULTS": "compile-error=matmul,compile-error=mlp"})
    steps = {s.title: s for s in run_smoke(sim, smoke_point("trn2"), tmp_path / "work")}
    assert steps["trace and compile the bf16 matmul"].status == "fail"
    assert "[NCC_EVRF009]" in steps["trace and compile the bf16 matmul"].verdict
    assert steps["capture: every 2nd of 4 executions"].status == "skip"
    assert steps["view: summary-json, its entries at this LNC"].verdict.startswith("needs a NEFF")
    assert steps["plausibility: time, MFU, hardware FLOPs"].status == "skip"
    assert steps["the bf16 MLP: trace, capture, outputs, plausibility"].status == "fail"
    assert exit_code(list(steps.values())) == 1


def test_an_unwritable_report_is_a_usage_error_before_any_step(tmp_path):
    from click.testing import CliRunner

    from kernelsweep.flows.cli.app import cli

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    result = CliRunner().invoke(cli, ["doctor", "--smoke", "--toolchain", "sim", "--report", str(blocker / "r.txt")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: --report {blocker / 'r.txt'}: cannot write it (Not a directory); give a writable path"
    ]


def test_a_smoke_for_another_platform_names_the_mismatch(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kernelsweep.flows.cli.app import cli

    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("KERNELSWEEP_SIM_PLATFORM", "trn2")
    result = CliRunner().invoke(cli, ["doctor", "--smoke", "--toolchain", "sim", "--platform", "trn1"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: doctor --smoke --platform trn1: this host is trn2 (instance type trn2.sim), and a trn1 NEFF cannot "
        "run on it; run the smoke on a trn1 host, or leave out --platform to check this trn2"
    ]
    assert not list(tmp_path.glob("kernelsweep-smoke-*"))


STAND_IN_STATUS = {
    "devices: neuron-ls under the sweep's LNC": "warn",  # the sample device is held by pid 113985
    "versions: compiler and profiler": "ok",
    "tracers: which NKI API this host has": "ok",
    "signatures: the SDK's compile API, as installed": "info",
    "trace and compile the bf16 matmul": "ok",
    "trace and compile the matmul at non-default tunables": "ok",
    "what _write_tensorizer_ir writes": "info",
    "does `acc += nl.matmul(...)` trace": "info",
    "capture: every 2nd of 4 executions": "ok",
    "outputs: saved by name, checked against numpy": "ok",
    "view: summary-json, its entries at this LNC": "ok",
    "plausibility: time, MFU, hardware FLOPs": "ok",
    "summary entries: which reading of them held": "ok",
    "DGE notifications: a capture with and one without": "ok",
    "the bf16 MLP: trace, capture, outputs, plausibility": "ok",
    "profile schema: what this Explorer names": "ok",
    "view: full JSON": "info",
    "view: Parquet, with and without --ingest-only": "ok",
    "busy core: a second capture on a held core": "ok",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("roots", "tracer", "signature", "mlp_fails"),
    [
        (("standalone", "driver_0606"), "nki.compiler.driver (nki 0.6.0+standin)",
         "nki.compiler.driver.compile_to_bir(", None),
        (("frontend_0413",), "nki.compiler.frontend (nki 0.4.0+standin)", "nki.compiler.frontend.ParserFrontend(",
         None),
        (("driver_tuple",), "nki.compiler.driver (nki 0.4.0+standin)", "nki.compiler.driver.compile_to_bir(", None),
        (("driver_0700",), "nki.compiler.driver/tracer-frontend (nki 0.7.0+standin)",
         "nki.compiler.driver.compile_to_bir(", None),
        (("sdk_2_27",), "neuronxcc.nki_standalone (nki 0.1.0+standin)",
         "nki.jit(", "reshape of a shared_hbm tensor"),
    ],
    ids=["driver_0606", "frontend_0413", "driver_tuple", "driver_0700", "sdk_2_27"],
)  # fmt: skip
def test_smoke_on_the_stand_in_host_runs_every_tool_as_documented(
    tmp_path, monkeypatch, python_packages, quick_ui_probe, roots, tracer, signature, mlp_fails
):
    """The real adapters against the stand-in executables and each stand-in NKI generation: every
    tool call is recorded, and each is the reference's documented command line
    (tests/documented_forms.py); the compile API's signatures are printed in full. On SDK 2.27's
    NKI 0.1 the MLP step fails on its shared_hbm reshape bug, as it would on such a host (N7)."""
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
    python_packages(*roots)
    tools = {t: (str(TOOLS / "bin" / t),) for t in ("neuronx-cc", "neuron-explorer", "neuron-profile", "neuron-ls")}
    host = Toolchain(kind="neuron", commands=tools, tracers=TRACERS)
    steps = {s.title: s for s in run_smoke(host, smoke_point("trn2"), tmp_path / "work")}
    expected = dict(STAND_IN_STATUS)
    if "standalone" not in roots:
        expected["what _write_tensorizer_ir writes"] = "skip"
    mlp = "the bf16 MLP: trace, capture, outputs, plausibility"
    if mlp_fails:
        expected[mlp] = "fail"
    assert {title: step.status for title, step in steps.items()} == expected, {t: s.verdict for t, s in steps.items()}
    assert mlp_fails is None or mlp_fails in steps[mlp].verdict, steps[mlp].verdict
    assert steps["trace and compile the bf16 matmul"].verdict.startswith(f"{tracer} wrote")
    signatures = steps["signatures: the SDK's compile API, as installed"]
    assert signatures.show_all and signature in signatures.runs[0].stdout
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
        "compiler version", "profiler version", "devices", "capture", "capture, DGE notifications",
        "view summary-json", "view json", "view parquet", "profile schema, 7.x",
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


def test_a_smoke_on_a_host_nothing_names_says_its_runtime_refused_the_platform(tmp_path, monkeypatch):
    """A trn1 whose neuron-ls names no instance type: the smoke assumes trn2, and the runtime's refusal
    of its NEFF is one line naming the mismatch and --platform, not a run of failed steps ending in
    "please report this wording"; no report file is written."""
    from click.testing import CliRunner

    from kernelsweep.flows.cli.app import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("KERNELSWEEP_SIM_PLATFORM", "trn1")
    monkeypatch.setenv("KERNELSWEEP_SIM_UNNAMED", "1")
    result = CliRunner().invoke(cli, ["doctor", "--smoke", "--toolchain", "sim"])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(
        "error: doctor --smoke: this host's runtime will not load a NEFF built for trn2 (no instance type names "
        "this host's family, so the smoke assumed trn2): neuron-explorer capture failed: Failed to load NN: the NEFF"
    )
    assert line.endswith("run the smoke with --platform set to this host's family (trn1, inf2, trn3)")
    assert "report this wording" not in result.output
    assert not list(tmp_path.glob("kernelsweep-smoke-*"))


@pytest.mark.parametrize(
    ("entries", "times_model", "status", "said"),
    [
        (1, 1.05, "ok", "one entry holds the whole logical core"),
        (1, 0.5, "fail", "one entry holds one core's share only"),
        (2, 1.05, "ok", "2 entries, one per physical core: summing their counters (as rows do) held"),
        (2, 2.1, "fail", "each entry holds the whole logical core, so rows double its counters"),
        (2, 1.5, "fail", "neither reading held"),
    ],
)
def test_the_smoke_says_which_reading_of_lnc2_summary_entries_held(tmp_path, entries, times_model, status, said):
    """Real-host audit 3, R6: one entry must hold hardware FLOPs >= the model's; two summed must come
    within 10 % of it, where two whole-core entries would double it."""
    from kernelsweep.doctor.smoke import smoke_point
    from kernelsweep.doctor.smoke_mix import lnc_reading
    from kernelsweep.doctor.smoke_steps import Smoke, Step
    from kernelsweep.kernels import load_kernel
    from kernelsweep.profiles.metrics import ProfileMetrics

    point = smoke_point("trn2")
    model = load_kernel(point.kernel_ref).model_flops(point.params)
    metrics = ProfileMetrics({"hardware_flops": int(model * times_model)}, {}, {}, "summary-json", "percent", entries)
    step = Step("entries")
    lnc_reading(Smoke(sim_toolchain(tmp_path), point, tmp_path, metrics=metrics), step)
    assert step.status == status and said in step.verdict, step.verdict
