"""The nights dataset's stand-ins run in the test process (tests/inprocess_tools.py): its rows must be the
rows their processes would have written, or every report test reading it tests something else."""

from __future__ import annotations

import pytest
from report_data import Nights

from kernelsweep.results.reader import read

pytestmark = pytest.mark.slow

# What differs between two builds of the same night however they run: ids, clocks, the store's paths, and
# which core a point leased (two points at once through processes, one after the other in-process).
PER_BUILD = {"row_id", "flow_run_id", "started_at", "finished_at", "visible_cores", "inputs", "outputs"}
PER_BUILD |= {f"{name}_uri" for name in ("ir", "kernel_source", "neff", "nki_source", "ntff", "profile")}
PER_BUILD |= {"capture_seconds", "compile_cpu_seconds", "compile_peak_rss_bytes", "compile_seconds", "trace_seconds"}


def _night(root, *, in_process: bool) -> list[dict]:
    nights = Nights(root, repeats=3, in_process=in_process)
    nights.run(env={"KERNELSWEEP_SIM_FAULTS": "zeros=vector_add"})  # an incorrect point's message too
    rows = sorted(read(nights.results).to_pylist(), key=lambda r: (r["kernel"], r["shape"]))
    return [{k: v for k, v in r.items() if k not in PER_BUILD} for r in rows]


def test_a_night_with_the_stand_ins_in_process_writes_the_rows_their_processes_write(tmp_path):
    through_processes = _night(tmp_path / "processes", in_process=False)
    in_process = _night(tmp_path / "in-process", in_process=True)
    assert {r["status"] for r in in_process} == {"ok", "incorrect"}
    assert all(r["latencies_us"] and r["ntff_sha256"] for r in in_process)  # measured, with a profile
    assert in_process == through_processes
