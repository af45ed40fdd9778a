"""`kernelsweep doctor` and the version lookups behind it, on this machine and on a stand-in Neuron host.

The Neuron host is tests/fixtures/tools: executables printing the documented `--version` and
`neuron-ls -j` output, a dpkg-query knowing the runtime package, and the stand-in `nki` frontend.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelsweep import doctor
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.toolchain import versions
from kernelsweep.toolchain.resolve import Toolchain

TOOLS = Path(__file__).parent / "fixtures" / "tools"


@pytest.fixture
def python_packages(monkeypatch):
    """Install stand-in Python packages (a tools/python root) for one test."""

    def forget():
        for name in [m for m in sys.modules if m.split(".")[0] in ("nki", "neuronxcc")]:
            del sys.modules[name]

    def install(root: str) -> None:
        forget()
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
    python_packages("frontend")
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
        "NKI tracer": "ok", "SDK packages": "ok", "kernelsweep deps": "ok", "instance type": "ok", "toolchain": "ok",
    }  # fmt: skip
    assert checks["neuronx-cc"].found.endswith("neuronx-cc (NeuronX Compiler version 2.21.33363.0+82129205)")
    assert checks["profiler"].found.startswith("neuron-explorer 2.29.18.0 at ")
    assert "(preferred over neuron-profile, also found)" in checks["profiler"].found
    assert checks["neuron-ls"].found.endswith(
        "1 device(s), 4 logical NeuronCores at LNC=2 (ids 0-3; physical 0-7); in use by pid 113985 "
        "(neuron-bench exec ...)"
    )
    assert checks["devices"].found == f"{neuron_host.dev_dir}/neuron0, {neuron_host.dev_dir}/neuron1"
    assert checks["runtime"].found == "aws-neuronx-runtime-lib 2.21.41.0"
    assert checks["NKI tracer"].found.startswith("nki.compiler.frontend")
    assert checks["SDK packages"].found == "neuronx-cc 2.21.33363.0+82129205, nki 0.2.0"
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
    assert versions.nki_version() == "neuronxcc.nki 2.14.227.0+2d4f85be"
    python_packages("frontend")
    assert versions.nki_version() == "0.2.0"


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
        Toolchain(kind="neuron", commands=tools), search_path=neuron_host.path,
        dmi_product_name=neuron_host.dmi_product_name,
    )  # fmt: skip
    assert found == versions.ToolVersions(
        compiler="2.21.33363.0+82129205", profiler="2.29.18.0", runtime="2.21.41.0", nki="0.2.0",
        profiler_tool="neuron-explorer", instance_type="trn2.48xlarge",
    )  # fmt: skip
    assert found.profiler_tool == "neuron-explorer"


def test_collect_on_the_simulator_says_simulated(tmp_path):
    found = versions.collect(sim_toolchain(tmp_path))
    assert found.compiler.endswith("+kernelsweep.sim") and found.profiler.endswith("+kernelsweep.sim")
    assert found.runtime.endswith("+kernelsweep.sim")
    assert (found.nki, found.profiler_tool, found.instance_type) == (None, "neuron-explorer", "simulated")
