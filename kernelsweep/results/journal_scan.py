"""Which run of a spec `kernelsweep run` finishes, and which journals are left for nobody.

The newest unfinished run of a spec is the one to resume. Every other journal of the spec belongs
to a run nobody will finish, and is removed (with one warning naming it) once its lease shows that
no process runs it any more:

* a run folder without a header: a run that finished (its close was cut short after the header
  went, kernelsweep.results.journal.Journal.close) or one whose header was never written;
* a header that cannot be used (not JSON, a field of the wrong type, naming another run): nothing
  can resume it, and every later run would stumble on it again;
* an unfinished run older than the newest: superseded, since only the newest is ever resumed;
* a header of another journal format, only when the user starts over (`--remeasure`); otherwise
  it is refused, with what to do (journal_check.JournalFormatError).
"""

from __future__ import annotations

import logging

from kernelsweep.results import journal_lease as lease
from kernelsweep.results.journal_check import BadJournalObject, JournalFormatError, RunHeader
from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.stores.locations import Location

HEADER = "run.json"
log = logging.getLogger(__name__)


def find_unfinished(results: Location | str, key: str, *, start_over: bool = False) -> RunHeader | None:
    """The newest run of this spec that started but never wrote its objects, if any; the journals of
    runs nobody will finish are removed on the way (see the module's docstring)."""
    files = open_files(results)
    runs: dict[str, list[str]] = {}
    for name in files.list(f"{key}/"):
        parts = name.split("/")
        if len(parts) >= 3:
            runs.setdefault(parts[1], []).append(name)
    headers: list[RunHeader] = []
    abandoned: list[tuple[str, str]] = []
    for run, names in runs.items():
        header, why = _header(files, key, run, names, start_over)
        if header is None:
            abandoned.append((run, why))
        else:
            headers.append(header)
    headers.sort(key=lambda h: h.started_at)
    newest = headers[-1] if headers else None
    if newest is not None:
        abandoned += [(h.run_id, f"superseded by run {newest.run_id}, which started later") for h in headers[:-1]]
    for run, why in abandoned:
        _remove(results, files, key, run, runs[run], why)
    return newest


def _header(
    files: JournalFiles, key: str, run: str, names: list[str], start_over: bool
) -> tuple[RunHeader | None, str]:
    """(the run's header, "") or (None, why nobody will finish it)."""
    name = f"{key}/{run}/{HEADER}"
    if name not in names:
        return None, "it has no header: a run that finished, or one that never started"
    try:
        header = RunHeader.from_json(files.get(name) or b"", files.uri(name))
    except JournalFormatError:
        if not start_over:
            raise
        return None, "another journal format, and starting over was asked for (--remeasure)"
    except BadJournalObject as exc:
        return None, f"its header is not usable ({exc})"
    if (header.run_key, header.run_id) != (key, run):
        return None, "its header names another run"
    return header, ""


def _remove(results: Location | str, files: JournalFiles, key: str, run: str, names: list[str], why: str) -> None:
    """Removed under the run's own lease: never while a process runs it (a run about to write its
    header holds the lease already)."""
    uri, run_lease = lease.open_lease(results, key, run)
    if lease.holds(uri):  # this process runs it
        return
    try:
        lease.acquire(uri, run_lease, f"removing the journal of run {run}")
    except lease.RunIsLive:
        return
    try:
        files.delete([f"{key}/{run}/{HEADER}"])  # first, as a close does: never half a resumable run
        files.delete(names)
    finally:
        lease.release(uri)
    log.warning("removed the journal of run %s (%s): %s", run, why, files.uri(f"{key}/{run}"))
