"""A full disk, for real: a 256 KiB tmpfs mounted in a private mount namespace (`unshare`, no root
needed where user namespaces are allowed; CI runs as root, where it always works).

Journal entries written before the disk filled stay whole and readable, the entry that did not fit
leaves nothing behind, the failure is one line naming the folder, the Parquet writer reports a
StoreError (not a bare OSError, which the CLI would call an internal error), and once space is
free the same rows are written.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent(
    """
    import json, os, subprocess, sys, uuid
    from datetime import UTC, date, datetime
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from specs import sim_spec
    from kernelsweep.errors import StoreError
    from kernelsweep.results import journal, reader
    from kernelsweep.results.rows import Row, row_id
    from kernelsweep.results.writer import write_results
    from kernelsweep.sweepspec.expansion import expand

    disk = Path(sys.argv[1])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], check=True)
    results = disk / "results"
    kernel = {"kernel": "kernelsweep.kernels.vector_add:vector_add", "dtypes": ["float32"],
              "grid": {"n": [128 * k for k in range(1, 41)], "free_size": [1]}}
    points = expand(sim_spec(disk, [kernel]))
    now = datetime.now(UTC)
    fresh = journal.plan_resume(str(results), "disk-0", [])
    run = journal.begin(str(results), fresh, str(uuid.uuid4()), date(2026, 11, 26), "disk", now)
    filler = disk / "filler"
    filler.write_bytes(b"x" * (200 << 10))
    rows, error = [], None
    for p in points:
        row = Row(row_id=row_id(run.run_id, p), sweep=p.sweep, kernel=p.kernel, kernel_ref=p.kernel_ref, shape=p.shape,
                  params=dict(p.params), dtype=p.dtype, platform=p.platform, lnc=p.lnc, seed=p.seed, toolchain="sim",
                  is_simulation=True, status="ok", metrics={"total_time_us": 1.5}, flow_run_id=run.run_id,
                  started_at=now, finished_at=now, error_message="x" * 3000)
        try:
            run.record(p, row)
        except StoreError as exc:
            error = exc
            break
        rows.append(row)
    leftovers = [str(f) for f in results.rglob(".incoming-*")]
    kept = run.completed(points)
    try:
        write_results(rows, str(results), flow_run_id=run.run_id, run_date=run.run_date, lineage={})
        write_error = None
    except StoreError as exc:
        write_error = exc.message
    filler.unlink()
    written = write_results(rows, str(results), flow_run_id=run.run_id, run_date=run.run_date, lineage={})
    print(json.dumps({"recorded": len(rows), "error": error and error.message, "leftovers": leftovers,
                      "kept": sorted(r.row_id for r in kept.values()), "rows": sorted(r.row_id for r in rows),
                      "write_error": write_error, "written": written,
                      "read_back": len(reader.read(str(results)).to_pylist())}))
    """
)


def test_a_full_disk_keeps_every_saved_row_and_fails_in_one_line(tmp_path):
    unshare = shutil.which("unshare")
    assert unshare, "util-linux's unshare is needed to mount a small private filesystem"
    disk = tmp_path / "disk"
    disk.mkdir()
    argv = [unshare, "--user", "--map-root-user", "--mount", sys.executable, "-c", CHILD, str(disk)]
    proc = subprocess.run([*argv, str(Path(__file__).parent)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome = json.loads(proc.stdout.splitlines()[-1])
    assert 1 <= outcome["recorded"] < 40  # some rows fitted, then the disk was full
    assert outcome["error"] and "No space left on device" in outcome["error"] and "\n" not in outcome["error"]
    assert "_journal" in outcome["error"]  # names where it was writing
    assert outcome["leftovers"] == []  # the entry that did not fit left no partial file
    assert outcome["kept"] == outcome["rows"]  # every row saved before the disk filled reads back
    assert outcome["write_error"] and "No space left on device" in outcome["write_error"]
    assert len(outcome["written"]) == 1 and outcome["read_back"] == outcome["recorded"]
