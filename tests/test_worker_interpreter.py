"""The trace worker under the Neuron SDK's own interpreter (kernelsweep.toolchain.tracing.interpreter).

kernelsweep runs on Python 3.11+ with its dependencies; the SDK lives in an environment of its own,
Python 3.10 for SDK <= 2.29. The worker may import only WORKER_MODULES (checked here against what it
imports; `.ci/worker-py310` checks those files with vermin for 3.10), and a sweep point goes through
another venv, whose interpreter differs from this one where the machine has another, with a stand-in
SDK installed only there.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from standin_host import STAND_INS

from kernelsweep.errors import UsageError
from kernelsweep.results import reader
from kernelsweep.toolchain.neff import read_neff
from kernelsweep.toolchain.tracing import interpreter
from kernelsweep.toolchain.tracing.interpreter import NeuronPython, choose_neuron_python

REPO = Path(__file__).resolve().parent.parent
ENTRY_POINTS = (  # what the worker imports, under any real tracer and kernel (deferred imports included)
    "kernelsweep.toolchain.tracing.worker",
    "kernelsweep.toolchain.tracing.tracers",
    "kernelsweep.toolchain.tracing.simulate",
    "kernelsweep.toolchain.failures",
    "kernelsweep.toolchain.packages",
    "kernelsweep.dtypes",
    "kernelsweep.kernels.mlp",
    "kernelsweep.kernels.matmul",
    "kernelsweep.kernels.vector_add",
    "kernelsweep.kernels.nki.mlp",
    "kernelsweep.kernels.nki.matmul",
    "kernelsweep.kernels.nki.vector_add",
    "kernelsweep.baselines",  # a baseline's definition (issue 25)
    "kernelsweep.kernels.nki.nkilib_matmul",
    "kernelsweep.toolchain.iteration_worker",  # the iterations' worker, under the runtime's interpreter
)


def test_the_worker_imports_exactly_the_modules_checked_for_python_3_10(tmp_path):
    """A module the worker starts importing must join WORKER_MODULES, and so the 3.10 check."""
    fake = tmp_path / "nki"  # just enough `nki` for the built-in NKI kernels to import
    fake.mkdir()
    (fake / "__init__.py").write_text("def jit(f=None, **kw):\n    return f\n")
    (fake / "language.py").write_text("")
    (fake / "isa.py").write_text("")
    script = (
        f"import importlib, sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        f"for m in {ENTRY_POINTS!r}: importlib.import_module(m)\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'kernelsweep')))"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert found.split() == sorted(interpreter.WORKER_MODULES)


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_sdks_python_is_the_spec_s_then_the_environment_s_then_ours_then_a_dlami_venv(tmp_path):
    spec, env = _executable(tmp_path / "a" / "python"), _executable(tmp_path / "b" / "python")
    dlami = _executable(tmp_path / "opt" / "aws_neuronx_venv_pytorch_2_9" / "bin" / "python")
    (dlami.parent.parent / "lib" / "python3.10" / "site-packages" / "nki-0.3.0.dist-info").mkdir(parents=True)
    _executable(tmp_path / "opt" / "aws_neuronx_venv_empty" / "bin" / "python")  # no SDK in it: skipped
    globs = (str(tmp_path / "opt" / "aws_neuronx_venv_*" / "bin" / "python"),)
    choose = lambda s, e, own: choose_neuron_python(s, e, own_has_sdk=own, globs=globs)  # noqa: E731
    assert choose(str(spec), str(env), False) == NeuronPython(str(spec), "spec neuron_python")
    assert choose(None, str(env), False) == NeuronPython(str(env), "KERNELSWEEP_NEURON_PYTHON")
    assert choose(None, None, True) == NeuronPython(sys.executable, "kernelsweep's own")
    found = choose(None, None, False)
    assert found == NeuronPython(str(dlami), "found") and found.foreign
    shutil.rmtree(dlami.parent.parent)
    assert choose(None, None, False).path == sys.executable
    with pytest.raises(UsageError, match=r"spec neuron_python='/no/python' is not an executable file"):
        choose("/no/python", None, False)


def test_another_interpreter_sees_kernelsweeps_package_and_user_folders_not_its_site_packages(tmp_path):
    user = tmp_path / "my_kernels"
    user.mkdir()
    sys.path.append(str(user))
    try:
        last = interpreter.worker_path(NeuronPython("/sdk/bin/python", "found"))
        own_last = interpreter.worker_path(NeuronPython(sys.executable, "kernelsweep's own"))
    finally:
        sys.path.remove(str(user))
    site = next(p for p in sys.path if p.endswith("site-packages"))
    assert str(user) in last and site not in last
    assert str(user) in own_last and site in own_last
    folder = interpreter.package_folder(tmp_path / "work")
    assert [p.name for p in folder.iterdir()] == ["kernelsweep"]
    assert (folder / "kernelsweep").resolve() == Path(interpreter.__file__).resolve().parents[2]


# --- a sweep point through another venv -----------------------------------------------------------


def _other_python() -> Path | None:
    """An interpreter other than this one: 3.10 first (the oldest an SDK venv has), then newer ones."""
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    for version in ("3.10", "3.12", "3.13", "3.14"):
        if version == this:
            continue
        found = [shutil.which(f"python{version}")]
        found += sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
        for candidate in filter(None, found):
            if subprocess.run([str(candidate), "-c", "pass"], capture_output=True).returncode == 0:
                return Path(candidate)
    return None


def _sdk_venv(root: Path) -> Path:
    """A venv with numpy, ml_dtypes and a stand-in SDK (nki 0.3.0 + neuronxcc.nki_standalone, as SDK 2.29
    shipped on Python 3.10), and nothing of kernelsweep's. Another Python where pip can fetch numpy
    for it; else this Python, with this venv's numpy and ml_dtypes linked in."""
    other = _other_python()
    venv = root / "sdk-venv"
    if other is not None:
        subprocess.run([str(other), "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "numpy", "ml_dtypes"]
        if subprocess.run(pip, capture_output=True, timeout=600).returncode != 0:
            shutil.rmtree(venv)
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        linked = root / "numpy-only"
        linked.mkdir()
        for package in ("numpy", "ml_dtypes"):
            (linked / package).symlink_to(Path(importlib.util.find_spec(package).origin).parent)
        _site(venv).joinpath("numpy-only.pth").write_text(str(linked) + "\n")
    site = _site(venv)
    for entry in (STAND_INS / "standalone").iterdir():
        (shutil.copytree if entry.is_dir() else shutil.copy)(entry, site / entry.name)
    shutil.copy(STAND_INS / "kernels" / "standin_support.py", site)
    return venv / "bin" / "python"


def _site(venv: Path) -> Path:
    return next(venv.glob("lib/python3*/site-packages"))


@pytest.mark.slow
def test_a_sweep_point_traces_and_compiles_under_the_sdks_own_python_and_its_neff_comes_back(
    tmp_path, server_client_env
):
    python = _sdk_venv(tmp_path)
    version = subprocess.run([str(python), "-c", "import sys; print(sys.version)"], capture_output=True, text=True)
    assert importlib.util.find_spec("nki") is None and importlib.util.find_spec("neuronxcc") is None  # only there
    (tmp_path / "spec.toml").write_text(
        'name = "sdk-python"\nplatforms = ["trn2"]\ntoolchain = "cpu"\nresults = "results"\nartifacts = "artifacts"\n'
        '[capture]\nnum_exec = 2\n[[kernels]]\nkernel = "vector_add"\ndtypes = ["bfloat16"]\n'
        "grid = { n = [4096], partition_size = [128], free_size = [8] }\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_"))}
    env |= {**server_client_env, "KERNELSWEEP_NEURON_PYTHON": str(python)}
    env |= {"STANDIN_CALLS": str(tmp_path / "calls.jsonl"), "KERNELSWEEP_STATE_DIR": str(tmp_path / "state")}
    env.pop("KERNELSWEEP_SIM_STATE", None), env.pop("KERNELSWEEP_LOCK_DIR", None)
    ran = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "run", "spec.toml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    row = reader.read(str(tmp_path / "results")).to_pylist()[0]
    assert (row["status"], row["toolchain"], row["is_simulation"]) == ("ok", "cpu", True)
    assert (row["tracer"], row["nki_version"]) == ("neuronxcc.nki_standalone", "0.3.0+standin")
    assert row["compiler_version"] == "2.24.5133.0+58f8de22"  # the SDK's, asked of its interpreter
    assert (row["timing_source"], row["correctness_source"], row["correct"]) == ("simulator", "nki.simulate", True)
    neff = tmp_path / "artifacts" / "sha256" / row["neff_sha256"][:2] / row["neff_sha256"]
    assert read_neff(neff).outputs == ["out"] and read_neff(neff).info["target"] == "trn2"
    calls = (tmp_path / "calls.jsonl").read_text()
    assert f'"python": "{version.stdout.split()[0]}"' in calls  # the stand-in ran under the venv's Python
