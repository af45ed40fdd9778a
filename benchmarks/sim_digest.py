"""What the simulated tools made for a seeded sweep, as one digest per part: the check that a change
to how the stand-ins start (imports, launcher) left what they make alone.

    python benchmarks/sim_digest.py ROOT [--dump FILE]    # ROOT is emptied first; use the same one to compare

The quickstart's points run through the production context and five stages (as
benchmarks/tools_per_point.py runs them) twice under KERNELSWEEP_SIM_NOISE_SEED: once clean and once
with injected faults (a busy core, a hung capture, a compile error, a DGE timeout). Digested: every
artifact's bytes (NEFFs, NTFFs, inputs, IR), each tool call's argv, exit, stdout and stderr, and each
row without what the host's clock or a fresh id decides. Paths are under ROOT, so two runs with the
same ROOT compare byte for byte; `--dump` writes the digested values themselves, for a diff.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from tools_per_point import QUICKSTART

from kernelsweep.chain import run_stages
from kernelsweep.results.rows import build_row
from kernelsweep.sim.config import sim_env
from kernelsweep.sweepspec.expansion import expand
from kernelsweep.sweepspec.load import load_spec
from kernelsweep.this_host.context import Locations, prepare
from kernelsweep.toolchain.process import recording

FAULTS = "capture-busy=1,capture-timeout=1,compile-error=vector_add,dge-timeout=1"
# Decided by the host's clock, a fresh id or the worker process's own size, not by the simulator.
VOLATILE = ("started_at", "finished_at", "seconds", "wall", "flow_run_id", "run_date", "task_run", "peak_rss")
# ... and in text: the stages' temporary folders, the runtime log's time and pid:tid.
UNSTABLE = (
    (re.compile(r"(/kernelsweep-[a-z]+-)[^/\s\"]+"), r"\1*"),
    (re.compile(r"\d{4}-[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d\.\d+ +\d+:\d+"), "<time> <pid>"),
)
RUNS = {  # name: (faults, capture settings over the quickstart's)
    "clean": (None, {}),
    "faults": (FAULTS, {"timeout_seconds": 10.0}),  # the hung capture's wait
    "more": (None, {"repeats": 2, "iterations": 4, "hotspots": "on", "check_output_determinism": True}),
}
ROW_ID = "00000000-0000-4000-8000-000000000000"


def _stable(name: str) -> bool:
    return not any(part in name for part in VOLATILE)


def _text(values: object) -> str:
    text = json.dumps(values, sort_keys=True, indent=1, default=str)
    for pattern, replacement in UNSTABLE:
        text = pattern.sub(replacement, text)
    return text


def sweep(root: Path, faults: str | None, capture: dict[str, object]) -> dict[str, list]:
    os.environ |= sim_env(faults=faults or "")
    spec = load_spec(QUICKSTART).model_copy(
        update={"toolchain": "sim", "results": str(root / "results"), "artifacts": str(root / "artifacts")}
    )
    spec = spec.model_copy(update={"capture": spec.capture.model_copy(update=capture)})
    with recording() as runs:
        ctx, _ = prepare(spec, Locations(sim_state_dir=root / "sim", lock_dir=root / "locks"))
        records = [run_stages(ctx, p) for p in expand(spec, str(QUICKSTART))]
    rows = []
    for record in records:
        assert record is not None  # nothing stops this run
        row = dataclasses.asdict(build_row(record, flow_run_id=ROW_ID, toolchain="sim", is_simulation=True,
                                           versions=ctx.versions))  # fmt: skip
        rows.append({k: v for k, v in sorted(row.items()) if _stable(k)})
    artifacts = sorted(
        f"{p.relative_to(root)} {hashlib.sha256(p.read_bytes()).hexdigest()}"
        for p in (root / "artifacts").rglob("*")
        if p.is_file()
    )
    tools = [[r.argv[1:], r.returncode, r.timed_out, r.stdout, r.stderr] for r in runs]  # argv[0]: this Python
    return {"artifacts": artifacts, "tools": tools, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--dump", type=Path)
    args = parser.parse_args()
    shutil.rmtree(args.root, ignore_errors=True)
    os.environ |= sim_env(time_scale=0.0, noise_seed=40)
    found = {name: sweep(args.root.resolve() / name, *how) for name, how in RUNS.items()}
    for name, parts in found.items():
        for part, values in parts.items():
            print(f"{name:<7} {part:<10} {len(values):>4}  {hashlib.sha256(_text(values).encode()).hexdigest()}")
    if args.dump:
        args.dump.write_text(_text(found))


if __name__ == "__main__":
    main()
