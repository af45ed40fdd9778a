"""The row's lineage columns: every artifact the point made before it ended (a failed point keeps what
it got to), and how each stage went: which tracer, how long, whether a cache served it. A part of
`kernelsweep.results.rows.Row`, like those of kernelsweep.results.row_parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kernelsweep.results.columns import Artifacts
from kernelsweep.stage_results import CaptureResult, CompileResult, ExtractResult, InputsResult, TraceResult
from kernelsweep.stores.artifacts import ArtifactRef
from kernelsweep.toolchain.tracing import tracer_label


@dataclass(frozen=True, kw_only=True)
class Lineage:
    kernel_source_uri: str | None = None
    """The kernel definition's source file in the artifact store."""
    kernel_source_sha256: str | None = None
    """sha256 of the kernel definition's source file."""
    ir_uri: str | None = None
    """What the tracer wrote, as one tar, in the artifact store."""
    ir_sha256: str | None = None
    """sha256 of the tracer's tar."""
    neff_uri: str | None = None
    """The compiled NEFF in the artifact store."""
    neff_sha256: str | None = None
    """sha256 of the compiled NEFF."""
    inputs: Artifacts | None = None
    """Each generated input file."""
    ntff_uri: str | None = None
    """The NTFF of the repeat the metrics come from."""
    ntff_sha256: str | None = None
    """sha256 of that NTFF."""
    profile_uri: str | None = None
    """The profile the metrics came from."""
    profile_sha256: str | None = None
    """sha256 of that profile."""
    outputs: Artifacts | None = None
    """The outputs the capture saved."""
    tracer: str | None = None
    """Which tracer traced the point (and its API variant, or the fall-through that led to it)."""
    nki_version: str | None = None
    """The NKI that traced the point."""
    visible_cores: str | None = None
    """`NEURON_RT_VISIBLE_CORES` of the capture: the leased logical core."""
    trace_seconds: float | None = None
    """The trace stage's wall time, its compile excluded."""
    compile_seconds: float | None = None
    """The compile stage's wall time; null on a cache hit."""
    capture_seconds: float | None = None
    """The capture stage's wall time, waiting for a core's lease excluded."""
    trace_cache_hit: bool | None = None
    """The IR came from the content-keyed cache: nothing was traced in this run."""
    compile_cache_hit: bool | None = None
    """The NEFF came from the content-keyed cache: nothing was compiled in this run."""
    compile_options: str | None = None
    """JSON of what was asked of the compiler (sorted keys, no paths)."""
    nki_compiler_frontend: str | None = None
    """`NKI_COMPILER_FRONTEND` as the trace worker ran; null when unset."""
    neff_compile_host: str | None = None
    """The host whose compiler built the NEFF, as the fleet names it (schema 4)."""
    neff_debug_info: bool | None = None
    """The NEFF was compiled with `NKI_DEBUG_INFO=True` (schema 5)."""
    alloc_fallback: bool | None = None
    """NKI's allocator failed and neuronx-cc's laid the kernel out (schema 5)."""


def lineage_of(
    trace: TraceResult | None,
    compiled: CompileResult | None,
    inputs: InputsResult | None,
    captured: CaptureResult | None,
    extracted: ExtractResult | None,
) -> Lineage:
    ntff = extracted.ntff if extracted else captured.ntffs[0] if captured else None
    return Lineage(
        **_refs("kernel_source", trace.kernel_source if trace else None),
        **_refs("ir", trace.ir if trace else None),
        **_refs("neff", compiled.neff if compiled else None),
        **_refs("ntff", ntff),
        **_refs("profile", extracted.profile if extracted else None),
        inputs=_ref_list(inputs.inputs) if inputs else None,
        outputs=_ref_list(captured.outputs) if captured else None,
        tracer=tracer_label(trace.tracer, trace.fell_through) if trace else None,
        nki_version=trace.nki_version if trace else None,  # what traced it: a cache hit may have, earlier
        visible_cores=captured.visible_cores if captured else None,
        trace_seconds=trace.seconds if trace else None,
        compile_seconds=compiled.seconds if compiled else None,
        capture_seconds=captured.seconds if captured else None,
        trace_cache_hit=trace.cache_hit if trace else None,
        compile_cache_hit=compiled.cache_hit if compiled else None,
        compile_options=compiled.compile_options if compiled else trace.compile_options if trace else None,
        nki_compiler_frontend=trace.nki_compiler_frontend if trace else None,
        neff_compile_host=compiled.compile_host if compiled else None,  # kernelsweep.stages.HOST_META
        neff_debug_info=compiled.debug_info if compiled else None,
        alloc_fallback=compiled.alloc_fallback if compiled else None,
    )


def _refs(name: str, ref: ArtifactRef | None) -> dict[str, str | None]:
    return {f"{name}_uri": ref.uri if ref else None, f"{name}_sha256": ref.sha256 if ref else None}


def _ref_list(refs: Mapping[str, ArtifactRef]) -> list[dict[str, Any]]:
    return [{"name": n, **asdict(r)} for n, r in refs.items()]
