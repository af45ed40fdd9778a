"""The simulator's knobs: each `KERNELSWEEP_SIM_*` variable declared once (`sim.config.KNOBS`), read only
there, listed in docs/simulator.md as declared, harsh by default, and a bad value names its variable."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from kernelsweep.sim import config as sim_config
from kernelsweep.sim.config import KNOBS, SimConfig, sim_env
from kernelsweep.sim.faults import Faults

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "simulator.md"
PRODUCT = ("kernelsweep", "flows", "tasks")
NAMED_IN = (*PRODUCT, "tests", "benchmarks", "docs", "deployments")


@pytest.fixture
def unset(monkeypatch):
    for knob in KNOBS:
        monkeypatch.delenv(knob.env, raising=False)
    return monkeypatch


def test_each_field_of_the_settings_is_one_knob():
    assert sorted(knob.field for knob in KNOBS) == sorted(f.name for f in dataclasses.fields(SimConfig))
    assert len({knob.env for knob in KNOBS}) == len({knob.field for knob in KNOBS}) == len(KNOBS)
    assert all(knob.env.startswith(sim_config.PREFIX) for knob in KNOBS)


def test_docs_simulator_md_lists_every_knob_as_declared():
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith(f"| `{sim_config.PREFIX}")]
    declared = [f"| `{k.env}` | {k.kind} | `{k.default}` | {k.meaning} |" for k in KNOBS]
    assert rows == declared, "docs/simulator.md's table differs from sim.config.KNOBS: copy the declared lines"


def _files(folders: tuple[str, ...], suffixes: tuple[str, ...]) -> list[Path]:
    return [p for folder in folders for p in (ROOT / folder).rglob("*") if p.suffix in suffixes and p.is_file()]


def test_every_simulator_variable_named_anywhere_is_a_knob():
    """A `KERNELSWEEP_SIM_*` variable set by a test, a benchmark or the docs but declared nowhere would be
    read by nothing (or read behind the settings' back)."""
    knobs = {knob.env for knob in KNOBS}
    pattern = re.compile(sim_config.PREFIX + r"[A-Z][A-Z_]*[A-Z]")
    named = {
        (name, str(path.relative_to(ROOT)))
        for path in [*_files(NAMED_IN, (".py", ".md", ".yaml", ".toml")), ROOT / "README.md"]
        for name in pattern.findall(path.read_text(errors="replace"))
    }
    assert {(name, where) for name, where in named if name not in knobs} == set()


def _knob_constants() -> set[str]:
    """Module constants of the simulator that hold a knob's variable (`TOOLS_ENV`, `FAULTS_ENV`, ...)."""
    knobs, found = {knob.env for knob in KNOBS}, set()
    for path in (ROOT / "kernelsweep" / "sim").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in knobs:
                found |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return found | {"STATE_ENV", "IMPORT_PATH_ENV", "NKI_ENV"}  # built from PREFIX in sim.config


def _environment_reads(tree: ast.AST) -> list[ast.expr]:
    """The variable arguments of `os.environ.get(X)`, `os.getenv(X)` and `os.environ[X]` loads."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            target = ast.unparse(node.func)
            if target in ("os.environ.get", "os.getenv", "environ.get", "env.get"):
                found.append(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) in ("os.environ", "environ"):
                found.append(node.slice)
    return found


def test_no_product_module_but_the_settings_reads_a_knob_from_the_environment():
    constants, own = _knob_constants(), ROOT / "kernelsweep" / "sim" / "config.py"
    offenders = []
    for path in _files(PRODUCT, (".py",)):
        if path == own:
            continue
        for arg in _environment_reads(ast.parse(path.read_text())):
            text = arg.value if isinstance(arg, ast.Constant) else None
            if (isinstance(text, str) and text.startswith(sim_config.PREFIX)) or (
                isinstance(arg, ast.Name) and arg.id in constants
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{arg.lineno}")
    assert offenders == []


def test_unset_the_simulator_is_harsh_and_as_documented(unset, tmp_path):
    """Noise on, nothing slept, no faults, the current generations: the defaults the docs state."""
    unset.setenv("KERNELSWEEP_SIM_STATE", str(tmp_path))
    config = SimConfig.from_env()
    assert (config.run_noise, config.host_noise, config.shared_noise) == (0.01, 0.005, 0.005)
    assert (config.cores, config.lnc, config.time_scale, config.nki, config.tools.name) == (2, 2, 0.0, "0.7", "2.31")
    assert (config.platform, config.noise_seed, config.faults, config.slowdowns) == (None, None, Faults(), ())
    assert config.compiler_version.endswith("+kernelsweep.sim") and config.compile_memory_bytes == 0
    assert (config.host, config.session, config.unnamed, config.import_path) == ("sim-host", "", False, ())


def test_sim_env_sets_the_fields_it_is_given(unset, tmp_path):
    env = sim_env(state_dir=tmp_path, platform="trn1", cores=0, time_scale=2.5, unnamed=True, compile_memory_bytes="2G")
    assert env["KERNELSWEEP_SIM_TIME_SCALE"] == "2.5" and env["KERNELSWEEP_SIM_UNNAMED"] == "1"
    for name, value in env.items():
        unset.setenv(name, value)
    config = SimConfig.from_env()
    assert (config.state_dir, config.platform, config.cores, config.time_scale) == (tmp_path, "trn1", 0, 2.5)
    assert config.unnamed and config.compile_memory_bytes == 2 * 2**30


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"time_scales": 1}, "time_scales: no simulator setting; use one of state_dir, "),
        ({"cores": -1}, "KERNELSWEEP_SIM_CORES='-1': give an int of at least 0"),
    ],
)
def test_sim_env_refuses_a_field_that_is_no_knob_and_a_bad_value(values, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        sim_env(**values)


@pytest.mark.parametrize(
    ("variable", "text", "message"),
    [
        ("KERNELSWEEP_SIM_CORES", "two", "KERNELSWEEP_SIM_CORES='two': give an int of at least 0"),
        ("KERNELSWEEP_SIM_LNC", "0", "KERNELSWEEP_SIM_LNC='0': give an int of at least 1"),
        ("KERNELSWEEP_SIM_TIME_SCALE", "inf", "KERNELSWEEP_SIM_TIME_SCALE='inf': give a float of at least 0"),
        ("KERNELSWEEP_SIM_RUN_NOISE", "-0.1", "KERNELSWEEP_SIM_RUN_NOISE='-0.1': give a float of at least 0"),
        ("KERNELSWEEP_SIM_COMPILE_MEMORY", "lots", "KERNELSWEEP_SIM_COMPILE_MEMORY='LOTS': give a number of bytes"),
        ("KERNELSWEEP_SIM_TOOLS", "9.9", "KERNELSWEEP_SIM_TOOLS='9.9': use one of 2.31, 2.33, 2.34, renamed"),
        ("KERNELSWEEP_SIM_FAULTS", "bogus", "KERNELSWEEP_SIM_FAULTS: bad entry 'bogus'"),
        ("KERNELSWEEP_SIM_COMPILER_SLOWDOWN", "mlp:x", "KERNELSWEEP_SIM_COMPILER_SLOWDOWN: bad entry 'mlp:x'"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_variable(unset, variable, text, message):
    unset.setenv(variable, text)
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        SimConfig.from_env()
    assert "\n" not in str(raised.value)
