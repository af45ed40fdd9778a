"""The inputs and the float64 reference are computed once per content (kernelsweep.reference): another
platform and a re-run reuse them, a changed kernel source or seed does not, and what is reused is
bit for bit what the definition computes."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
from stage_context import point, sim_context

from kernelsweep import reference
from kernelsweep.kernels import load_kernel
from kernelsweep.stages import inputs_stage
from kernelsweep.stores.artifacts import LocalArtifactStore

COUNTING_KERNEL = '''
from kernelsweep.kernels.vector_add import VectorAdd

CALLS = {"inputs": 0, "reference": 0}


class Counting(VectorAdd):
    """vector_add, counting how often its inputs and its reference are computed."""

    def build_inputs(self, params, dtype, seed):
        CALLS["inputs"] += 1
        return super().build_inputs(params, dtype, seed)

    def reference(self, inputs, params):
        CALLS["reference"] += 1
        return super().reference(inputs, params)


counting = Counting()
'''


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """A kernel definition of the test's own, in a module file the test may edit."""
    folder = tmp_path / "kernels-src"
    folder.mkdir()
    (folder / "counting_kernel.py").write_text(COUNTING_KERNEL)
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("counting_kernel")
    yield module
    sys.modules.pop("counting_kernel", None)


def _point(platform: str = "trn2", seed: int = 3):
    return point(platform=platform).model_copy(update={"kernel_ref": "counting_kernel:counting", "seed": seed})


def _reference(store: LocalArtifactStore, p, tmp_path) -> dict[str, np.ndarray]:
    definition = load_kernel(p.kernel_ref)
    work = tmp_path / "work" / p.platform
    work.mkdir(parents=True, exist_ok=True)
    inputs = reference.point_inputs(store, p, definition, work)
    return reference.expected_outputs(store, p, definition, inputs, work)


def test_a_second_platform_and_a_rerun_reuse_the_inputs_and_the_reference(counting, tmp_path):
    store = LocalArtifactStore(tmp_path / "artifacts")
    first = _reference(store, _point("trn2"), tmp_path)
    assert counting.CALLS == {"inputs": 1, "reference": 1}

    other_platform = _reference(store, _point("trn1"), tmp_path)
    rerun = _reference(LocalArtifactStore(tmp_path / "artifacts"), _point("trn2"), tmp_path)  # a later process
    assert counting.CALLS == {"inputs": 1, "reference": 1}  # nothing computed again

    definition = load_kernel("counting_kernel:counting")
    fresh = definition.reference(definition.build_inputs(_point().params, "float32", 3), _point().params)
    for cached in (first, other_platform, rerun):
        assert cached["out"].dtype == np.float64 and cached["out"].shape == fresh["out"].shape
        assert np.array_equal(cached["out"], fresh["out"])  # the float64 contract, bit for bit


def test_a_changed_seed_or_kernel_source_misses(counting, tmp_path):
    store = LocalArtifactStore(tmp_path / "artifacts")
    _reference(store, _point(seed=3), tmp_path)
    _reference(store, _point(seed=4), tmp_path)
    assert counting.CALLS == {"inputs": 2, "reference": 2}

    source = tmp_path / "kernels-src" / "counting_kernel.py"
    source.write_text(source.read_text() + "\n# an edit to the definition's file\n")
    _reference(store, _point(seed=3), tmp_path)
    assert counting.CALLS == {"inputs": 3, "reference": 3}


def test_a_reference_is_never_reused_for_other_input_bytes(counting, tmp_path):
    """The reference key names the inputs' hashes, whatever produced them."""
    store = LocalArtifactStore(tmp_path / "artifacts")
    p, definition = _point(), load_kernel("counting_kernel:counting")
    work = tmp_path / "work"
    work.mkdir()
    inputs = reference.point_inputs(store, p, definition, work)
    reference.expected_outputs(store, p, definition, inputs, work)
    (work / "other.bin").write_bytes(np.ones(2048, dtype=np.float32).tobytes())
    other = {**inputs, "a": store.put_file(work / "other.bin")}
    expected = reference.expected_outputs(store, p, definition, other, work)
    assert counting.CALLS["reference"] == 2
    b = np.fromfile(store.fetch(inputs["b"], work / "b"), dtype=np.float32)
    assert np.array_equal(expected["out"].ravel(), 1.0 + b.astype(np.float64))


def test_the_inputs_stage_reuses_another_platforms_inputs(counting, tmp_path):
    ctx = sim_context(tmp_path)
    trn2 = inputs_stage(ctx, _point("trn2"))
    assert inputs_stage(ctx, _point("trn1")).inputs == trn2.inputs
    assert counting.CALLS["inputs"] == 1
