"""The Python the trace worker runs under: the Neuron SDK's own, which need not be kernelsweep's.

kernelsweep needs Python 3.11 or newer (Prefect does), while the SDK lives in an environment of its
own: SDK <= 2.29 venvs are Python 3.10, SDK 2.33's DLC images Python 3.14, and `nrtpy` and the `nki`
wheel cannot share one environment (real-host audit 2; NKI 0.7 addendum F15, F18). So tracing and
compiling run under the SDK's interpreter, with kernelsweep's own package on the worker's path
through a folder holding nothing but a link to it: none of kernelsweep's dependencies (built for
another Python) are seen there. The worker and everything it imports (WORKER_MODULES) need only the
standard library of Python 3.10+, numpy (ml_dtypes for bfloat16 inputs, as the NKI wheel itself
has) and the SDK: tests/test_worker_interpreter.py checks the list against what the worker really
imports, and `.ci/run` checks those files with vermin for Python 3.10.

Which interpreter: `neuron_python` in the spec, else KERNELSWEEP_NEURON_PYTHON, else this one when it
has the SDK, else the first usual SDK venv whose site-packages hold `nki` or `neuronx-cc`
(SDK_VENV_GLOBS, the Deep Learning AMI's venvs), else this one.
"""

from __future__ import annotations

import glob
import os
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import UsageError
from kernelsweep.toolchain.parent_death import bootstrap
from kernelsweep.toolchain.prefork_client import forked_argv

NEURON_PYTHON_ENV = "KERNELSWEEP_NEURON_PYTHON"
# The Deep Learning AMI's SDK venvs, e.g. /opt/aws_neuronx_venv_pytorch_2_9_nxd_inference (aws-neuron-sdk#1306),
# and the older /opt/aws_neuron_venv_pytorch.
SDK_VENV_GLOBS = ("/opt/aws_neuronx_venv_*/bin/python", "/opt/aws_neuron_venv_*/bin/python")
SDK_DIST_GLOBS = ("nki-*.dist-info", "neuronx_cc-*.dist-info")
PATH_FOLDER = ".kernelsweep-path"  # in the worker's folder: holds only the link to kernelsweep's package
WORKER_MODULE = "kernelsweep.toolchain.tracing.worker"
BOOTSTRAP = bootstrap(WORKER_MODULE)
# Every kernelsweep module the trace worker imports, under any tracer: the modules that must run on
# Python 3.10 with numpy and the SDK alone. The simulator's tracers run under kernelsweep's own Python.
WORKER_MODULES = (
    "kernelsweep",
    "kernelsweep.baselines",
    "kernelsweep.toolchain.compile_cost",
    "kernelsweep.dtypes",
    "kernelsweep.errors",
    "kernelsweep.importpath",
    "kernelsweep.kernels",
    "kernelsweep.kernels.base",
    "kernelsweep.kernels.matmul",
    "kernelsweep.kernels.mlp",
    "kernelsweep.kernels.nki",
    "kernelsweep.kernels.nki.matmul",
    "kernelsweep.kernels.nki.mlp",
    "kernelsweep.kernels.nki.nkilib_matmul",
    "kernelsweep.kernels.nki.vector_add",
    "kernelsweep.kernels.vector_add",
    "kernelsweep.names",
    "kernelsweep.toolchain",
    "kernelsweep.toolchain.iteration_worker",
    "kernelsweep.toolchain.failures",
    "kernelsweep.toolchain.packages",
    "kernelsweep.toolchain.parent_death",
    "kernelsweep.toolchain.prefork_client",
    "kernelsweep.toolchain.process",
    "kernelsweep.toolchain.tracing",
    "kernelsweep.toolchain.tracing.artifacts",
    "kernelsweep.toolchain.tracing.binding",
    "kernelsweep.toolchain.tracing.calls",
    "kernelsweep.toolchain.tracing.request",
    "kernelsweep.toolchain.tracing.simulate",
    "kernelsweep.toolchain.tracing.tracers",
    "kernelsweep.toolchain.tracing.worker",
)


@dataclass(frozen=True)
class NeuronPython:
    """The interpreter the trace worker runs under, and how it was chosen (doctor shows both)."""

    path: str
    source: str  # "spec", the environment variable's name, "kernelsweep's own", "found"

    @property
    def foreign(self) -> bool:
        """Another interpreter than kernelsweep's: the worker must not see kernelsweep's packages.
        Paths, not resolved files: a venv's python links to a base interpreter several venvs share."""
        return os.path.abspath(self.path) != os.path.abspath(sys.executable)


def own_python() -> NeuronPython:
    return NeuronPython(sys.executable, "kernelsweep's own")


def choose_neuron_python(
    spec_value: str | None, env_value: str | None, *, own_has_sdk: bool, globs: tuple[str, ...] = SDK_VENV_GLOBS
) -> NeuronPython:
    """The precedence above; a configured path that is not an executable file is a usage error."""
    for value, source in ((spec_value, "spec neuron_python"), (env_value, NEURON_PYTHON_ENV)):
        if value:
            if not (os.path.isfile(value) and os.access(value, os.X_OK)):
                raise UsageError(
                    f"{source}={value!r} is not an executable file; give the python of the Neuron SDK's "
                    "environment (e.g. /opt/aws_neuronx_venv_pytorch_2_9/bin/python)"
                )
            return NeuronPython(value, source)
    if own_has_sdk:
        return own_python()
    for pattern in globs:
        for python in sorted(glob.glob(pattern), reverse=True):  # the newest-named venv first
            if _has_sdk(Path(python)):
                return NeuronPython(python, "found")
    return own_python()


def _has_sdk(python: Path) -> bool:
    """An `nki` or `neuronx-cc` distribution in the venv's site-packages: no process started."""
    venv = python.parent.parent
    return any(any(venv.glob(f"lib/python3*/site-packages/{dist}")) for dist in SDK_DIST_GLOBS)


def worker_argv(python: NeuronPython, workdir: Path, job_file: Path, env: Mapping[str, str]) -> list[str]:
    """Forked from the run's template when its toolchain's `env` names one and the worker runs under
    kernelsweep's own Python (the simulator's tracers), else a fresh interpreter."""
    forked = forked_argv(env, python.path, WORKER_MODULE, str(job_file))
    return forked or [python.path, "-c", BOOTSTRAP, str(package_folder(workdir)), str(job_file)]


def package_folder(workdir: Path) -> Path:
    """A folder whose only entry links to kernelsweep's package (not the folder it is installed in)."""
    folder = workdir / PATH_FOLDER
    link = folder / "kernelsweep"
    if not link.is_symlink():
        folder.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(__file__).resolve().parents[2], target_is_directory=True)
    return folder


def worker_path(python: NeuronPython) -> list[str]:
    """The sweep's folders the worker adds after its own path, as a last resort (kernelsweep.importpath:
    user kernel modules resolve as in the sweep, never in place of an installed module). Under another
    interpreter, not an interpreter's own folders: kernelsweep's site-packages hold builds for another
    Python."""
    entries = [p for p in sys.path if p and os.path.isdir(p)]
    return [p for p in entries if not _interpreter_folder(p)] if python.foreign else entries


def _interpreter_folder(entry: str) -> bool:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()}
    resolved = os.path.realpath(entry)
    return any(resolved == os.path.realpath(p) or resolved.startswith(os.path.realpath(p) + os.sep) for p in prefixes)


def worker_env(python: NeuronPython) -> dict[str, str]:
    """Another interpreter runs as if its venv were active: its bin folder first on PATH (the SDK's
    own tools, neuronx-cc among them)."""
    if not python.foreign:
        return {}
    bin_dir = os.path.dirname(os.path.abspath(python.path))
    return {"PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]), "VIRTUAL_ENV": os.path.dirname(bin_dir)}
