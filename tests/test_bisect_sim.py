"""The simulator's bisectable histories (kernelsweep.sim.culprit_build, kernelsweep.sim.kernel_history):
SDK builds and kernel commits whose speed differs in a known way, one culprit each."""

from __future__ import annotations

import subprocess

import pytest

from kernelsweep.sim.config import SimConfig, sim_env
from kernelsweep.sim.kernel_history import write_history


def _config(monkeypatch, **values) -> SimConfig:
    for name, text in sim_env(**values).items():
        monkeypatch.setenv(name, text)
    return SimConfig.from_env()


def test_the_culprit_build_and_every_later_one_are_slower_in_version_order(monkeypatch):
    factors = {
        version: _config(monkeypatch, compiler_version=version, culprit_build="2.10.0@vector_add/n=8192:1.25").slowdown(
            "vector_add", {"n": 8192}
        )
        for version in ("2.9.5", "2.10.0", "2.10.1", "2.11.0")
    }
    assert factors == {"2.9.5": 1.0, "2.10.0": 1.25, "2.10.1": 1.25, "2.11.0": 1.25}  # 2.9 < 2.10 by number
    late = _config(monkeypatch, compiler_version="2.11.0", culprit_build="2.10.0@vector_add/n=8192:1.25")
    assert late.slowdown("vector_add", {"n": 1024}) == 1.0 and late.slowdown("matmul", {"n": 8192}) == 1.0
    both = _config(
        monkeypatch, compiler_version="2.11.0", culprit_build="2.10.0@vector_add:1.25", slowdowns="vector_add:1.1"
    )
    assert both.slowdown("vector_add", {"n": 1}) == pytest.approx(1.1 * 1.25)


@pytest.mark.parametrize("text", ["vector_add:1.1", "2.x@vector_add:1.1", "2.10@vector_add", "2.10@a:1.1;b:1.2"])
def test_a_bad_culprit_build_names_its_variable_and_the_form(text, monkeypatch):
    monkeypatch.setenv("KERNELSWEEP_SIM_CULPRIT_BUILD", text)
    with pytest.raises(ValueError, match=r"KERNELSWEEP_SIM_CULPRIT_BUILD=.*VERSION@KERNEL"):
        SimConfig.from_env()


def test_a_kernel_history_changes_the_kernel_at_every_commit_and_stores_twice_from_the_culprit_on(tmp_path):
    hashes = write_history(tmp_path / "repo", commits=5, culprit=3)
    assert len(set(hashes)) == 5

    def source(sha: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path / "repo"), "show", f"{sha}:history_add_nki.py"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout

    stores = [source(sha).count("nisa.dma_copy(dst=out[t]") for sha in hashes]
    assert stores == [1, 1, 1, 2, 2]
    assert len({source(sha) for sha in hashes}) == 5  # every commit is a new source: a new trace and NEFF
    with pytest.raises(ValueError, match="culprit"):
        write_history(tmp_path / "other", commits=5, culprit=0)
