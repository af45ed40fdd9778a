"""The row's first and most-read columns: which point it is (`Identity`), and where, when and with
which tools it ran (`Provenance`). Parts of `kernelsweep.results.rows.Row`, like those of
kernelsweep.results.row_parts: each field declares one column, its docstring says what it holds.

`host` is the host as the fleet knows it (its worker's name on a fleet host, schema 6), `hostname` the
machine's own name: a fleet of simulated hosts, or of containers, may all share one machine name.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import datetime

from kernelsweep.results.columns import SCHEMA_VERSION, Int32
from kernelsweep.sweepspec.point import Point
from kernelsweep.toolchain.versions import ToolVersions


@dataclass(frozen=True, kw_only=True)
class Identity:
    schema_version: Int32 = SCHEMA_VERSION
    """The schema version the row was written with."""
    row_id: str
    """UUID of (flow run id, point id): the same for a retried store."""
    sweep: str
    """The spec's name."""
    kernel: str
    """The kernel definition's name."""
    kernel_ref: str
    """The kernel definition's `module:attribute`."""
    shape: str
    """The point's parameters in the kernel's axis order, `b=1,s=128,...`."""
    params: dict[str, int]
    """Every parameter, the kernel's defaults included (also one `param_<axis>` column each)."""
    dtype: str
    """The point's dtype."""
    platform: str
    """The Neuron platform the point is for (the partition key)."""
    lnc: Int32
    """The logical NeuronCore config the point ran at."""
    seed: int
    """Seed of the generated inputs."""
    toolchain: str
    """`neuron`, `cpu` or `sim`: what traced, compiled and measured."""
    is_simulation: bool
    """True where the simulator made the numbers: never a hardware number."""
    tunables: str | None = None
    """The kernel's tunables at this point, `name=value,...`; null for its defaults."""
    toolchain_name: str | None = None
    """Which of the spec's named toolchains traced and compiled the point."""
    search_trial: Int32 | None = None
    """The trial number in its shape's study, for a point a search proposed."""


def identity_of(point: Point, row_id: str, *, toolchain: str, is_simulation: bool) -> Identity:
    return Identity(
        row_id=row_id,
        sweep=point.sweep,
        kernel=point.kernel,
        kernel_ref=point.kernel_ref,
        shape=point.shape,
        params=dict(point.params),
        dtype=point.dtype,
        platform=point.platform,
        lnc=point.lnc,
        seed=point.seed,
        toolchain=toolchain,
        is_simulation=is_simulation,
        tunables=point.tunables_text or None,
        toolchain_name=point.toolchain_name or None,
        search_trial=point.search_trial,
    )


@dataclass(frozen=True, kw_only=True)
class Provenance:
    compiler_version: str | None = None
    """`neuronx-cc --version` of the compiler the host runs."""
    runtime_version: str | None = None
    """The Neuron runtime's version: the profile's, else the host's."""
    profiler_version: str | None = None
    """The profiler's version: the profile's, else the host's."""
    profiler_tool: str | None = None
    """`neuron-explorer` or `neuron-profile`."""
    instance_type: str | None = None
    """The EC2 instance type: the profile's, else the host's."""
    host: str | None = None
    """The host that ran the point as the fleet names it: its worker's name, else the machine's."""
    flow_run_id: str
    """The Prefect flow run that wrote the row (also its object's file name)."""
    task_run_ids: dict[str, str] = field(default_factory=dict)
    """Stage -> Prefect task run id."""
    started_at: datetime | None = None
    """When the point's chain started."""
    finished_at: datetime | None = None
    """When the point's chain ended."""
    hostname: str | None = None
    """The machine's own host name (schema 6; null in older rows)."""


def provenance_of(
    versions: ToolVersions,
    *,
    host: str | None,
    flow_run_id: str,
    task_run_ids: dict[str, str],
    started_at: datetime | None,
    finished_at: datetime | None,
) -> Provenance:
    """`host` is the fleet's name for this host where it has one; the machine's name is always kept."""
    machine = socket.gethostname()
    return Provenance(
        compiler_version=versions.compiler,
        runtime_version=versions.runtime,
        profiler_version=versions.profiler,
        profiler_tool=versions.profiler_tool,
        instance_type=versions.instance_type,
        host=host or machine,
        hostname=machine,
        flow_run_id=flow_run_id,
        task_run_ids=dict(task_run_ids),
        started_at=started_at,
        finished_at=finished_at,
    )
