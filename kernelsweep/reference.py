"""A point's inputs and its float64 reference output, computed once per content and kept in the artifact store.

The correctness check needs the inputs a kernel was fed and the reference output computed from them
in float64. Both are pure functions of the kernel definition's code, the parameters, the dtype and
the seed, and neither depends on the platform or the toolchain: three platforms measuring the same
shape, and every re-run of a sweep, would otherwise build the same inputs and redo the same float64
arithmetic (about 60 ms of CPU per MLP point, most of a point's own code). So they are cached like
traces and NEFFs (kernelsweep.stores.cache), under two content keys:

    inputs:    the definition's source sha256, kernel ref, params, dtype, seed
    reference: the same, plus the sha256 of every input's bytes

The reference key names the exact input bytes, so a reference is never reused for other inputs,
whatever built them. "The definition's source" is every file of the definition's class and its
bases (the reference and the input builder may live in either): an edit to either misses.

The contract is unchanged: the reference is the definition's own `reference` output as float64
(stored as raw C-order float64 bytes with its shape), and the check compares the device's bytes with
it exactly as before. A cache entry that cannot be used is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kernelsweep import names
from kernelsweep.dtypes import numpy_dtype
from kernelsweep.kernels import KernelDefinition
from kernelsweep.stores import cache
from kernelsweep.stores.artifacts import ArtifactRef, ArtifactStore
from kernelsweep.sweepspec.point import Point

INPUTS, REFERENCE = "inputs", "reference"
REFERENCE_DTYPE = "float64"  # the reference contract; also the entries' folder name


def definition_sha256(definition: KernelDefinition) -> str:
    """One hash over the source files of the definition's class and every base class with Python source."""
    digest = hashlib.sha256()
    for klass in type(definition).__mro__:
        try:
            source = inspect.getsourcefile(klass)
        except TypeError:  # a built-in (object)
            continue
        if source:
            digest.update(Path(source).read_bytes())
    return digest.hexdigest()


def _fields(point: Point, definition: KernelDefinition) -> dict[str, object]:
    return {
        "definition_sha256": definition_sha256(definition),
        "kernel_ref": point.kernel_ref,
        "params": point.params,
        "dtype": point.dtype,
        "seed": point.seed,
    }


def inputs_key(point: Point, definition: KernelDefinition) -> str:
    return cache.cache_key(_fields(point, definition))


def reference_key(point: Point, definition: KernelDefinition, inputs: Mapping[str, ArtifactRef]) -> str:
    fields = _fields(point, definition) | {"inputs": {name: ref.sha256 for name, ref in inputs.items()}}
    return cache.cache_key(fields | {"reference": REFERENCE_DTYPE})


def point_inputs(
    store: ArtifactStore, point: Point, definition: KernelDefinition, workdir: Path
) -> dict[str, ArtifactRef]:
    """The point's inputs in the store (raw C-order bytes, one `inp-<name>-000.bin` per NEFF input):
    the cached ones, or built now and cached."""
    key = inputs_key(point, definition)
    hit = cache.lookup(store, INPUTS, REFERENCE_DTYPE, key)
    wanted = {info.name for info in definition.input_infos(point.params, point.dtype)}
    if hit is not None and set(hit.refs) == wanted:
        return dict(hit.refs)
    refs = {}
    for name, array in definition.build_inputs(point.params, point.dtype, point.seed).items():
        path = _cleared(workdir / names.input_file(name))
        path.write_bytes(np.ascontiguousarray(array).tobytes())
        refs[name] = store.put_file(path, take=True)
    cache.record(store, INPUTS, REFERENCE_DTYPE, key, refs)
    return refs


def expected_outputs(
    store: ArtifactStore, point: Point, definition: KernelDefinition, inputs: Mapping[str, ArtifactRef], workdir: Path
) -> dict[str, np.ndarray]:
    """The float64 reference of these exact input bytes: from the cache, or computed now and cached."""
    key = reference_key(point, definition, inputs)
    hit = cache.lookup(store, REFERENCE, REFERENCE_DTYPE, key)
    if hit is not None:
        cached = _load(store, hit, workdir)
        if cached is not None:
            return cached
    arrays = {}
    for info in definition.input_infos(point.params, point.dtype):
        path = store.fetch(inputs[info.name], workdir / names.input_file(info.name), rebuildable=True, read_only=True)
        arrays[info.name] = np.fromfile(path, dtype=numpy_dtype(info.dtype)).reshape(info.shape)
    expected = {
        name: np.asarray(value, dtype=np.float64) for name, value in definition.reference(arrays, point.params).items()
    }
    refs, shapes = {}, {}
    for name, value in expected.items():
        path = _cleared(workdir / f"reference-{names.slug(name)}.bin")
        np.ascontiguousarray(value).tofile(path)
        refs[name], shapes[name] = store.put_file(path, take=True), json.dumps(list(value.shape))
    cache.record(store, REFERENCE, REFERENCE_DTYPE, key, refs, shapes)
    return expected


def _cleared(path: Path) -> Path:
    """A name to write: a read-only fetch may have left a link into the store there, and writing
    through it would change the store's bytes."""
    path.unlink(missing_ok=True)
    return path


def _load(store: ArtifactStore, entry: cache.Entry, workdir: Path) -> dict[str, np.ndarray] | None:
    """The entry's arrays, or None (a miss) when one does not fit the shape recorded beside it."""
    loaded = {}
    for name, ref in entry.refs.items():
        try:
            shape = tuple(json.loads(entry.meta[name]))
            path = store.fetch(ref, workdir / f"reference-{names.slug(name)}.bin", rebuildable=True, read_only=True)
            loaded[name] = np.fromfile(path, dtype=np.float64).reshape(shape)
        except (KeyError, ValueError, TypeError):
            return None
    return loaded
