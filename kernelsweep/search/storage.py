"""Where a run's searches keep their Optuna studies: next to the results, so a search resumes.

Optuna's journal storage replays a study from an append-only log; this backend keeps that log as
numbered objects under `<results>/_journal/search/<run key>/<run id>/` (a folder or an S3 prefix,
through the run journal's own files: each object whole or absent), one object per append. Several
processes may append to one log (a fleet run's search shards on their hosts, kernelsweep.flows.fleet):
an append takes the next free number with a put that never replaces (`put_new`), and one that finds
its number taken reads what another process appended there and tries the next, so no append is lost
and every process replays one order. Optuna's journal operations are written for such a shared log
(a trial's id is its place in the replay). The log outlives the run, for anyone who wants to load a
study into Optuna afterwards.

Nothing in the log is trusted: an object that is not JSON, not a list of Optuna's operations, or
whose operations do not replay on what came before (a truncated copy, another study's trials) is
skipped with one warning naming it. The study is a guide, not the record: what a run measured is in
its journal, which a resumed search reads (kernelsweep.search.study.ShapeSearch.resume).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from optuna.storages import JournalStorage
from optuna.storages.journal import BaseJournalBackend
from optuna.storages.journal._storage import JournalOperation, JournalStorageReplayResult

from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.stores.locations import Location

SEARCH_FOLDER = "search"
_OPERATIONS = {int(op) for op in JournalOperation}
log = logging.getLogger(__name__)


class FilesBackend(BaseJournalBackend):
    """Optuna's journal on the run journal's files: `log-<n>.json` objects, read in order."""

    def __init__(self, files: JournalFiles, prefix: str) -> None:
        self.files, self.prefix = files, prefix.rstrip("/") + "/"
        self._read: list[dict[str, Any]] = []
        self._seen: set[str] = set()  # the objects read (accepted or skipped)
        self._next = 0  # the number the next append tries first
        self._replay = JournalStorageReplayResult("kernelsweep-check-")  # what the accepted logs replay to

    def read_logs(self, log_number_from: int) -> list[dict[str, Any]]:
        names = sorted(n for n in self.files.list(self.prefix) if n.rsplit("/", 1)[-1].startswith("log-"))
        for name in [n for n in names if n not in self._seen]:
            self._seen.add(name)
            try:
                self._accept(self.files.get(name) or b"[]")
            except ValueError as exc:
                log.warning(
                    "search study log object %s is not usable (%s); skipped: delete it (the run journal keeps "
                    "every measured trial)", self.files.uri(name), exc,
                )  # fmt: skip
        self._next = max(self._next, len(names))
        return self._read[log_number_from:]

    def _accept(self, data: bytes) -> None:
        """Adds an object's operations once they replay cleanly on those accepted before; ValueError
        saying why not. Optuna's own replay is the check, so nothing it would stumble on gets in."""
        try:
            logs = json.loads(data)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ValueError(f"not JSON: {' '.join(str(exc).split())[:120]}") from None
        if not isinstance(logs, list) or not all(
            isinstance(e, dict) and e.get("op_code") in _OPERATIONS and isinstance(e.get("worker_id"), str)
            for e in logs
        ):
            raise ValueError("not a list of Optuna journal operations")
        try:
            self._replay.apply_logs(logs)
        except Exception as exc:  # whatever the replay raises on foreign data (KeyError, TypeError, ...)
            self._replay = JournalStorageReplayResult("kernelsweep-check-")
            self._replay.apply_logs(self._read)
            raise ValueError(f"its operations do not replay on the ones before ({type(exc).__name__})") from None
        self._read += logs

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        data = json.dumps(logs).encode()
        self.read_logs(len(self._read))
        while not self.files.put_new(name := f"{self.prefix}log-{self._next:09d}.json", data):
            self._next += 1  # taken, whether or not it reads as a log object (a folder of that name)
            self.read_logs(len(self._read))  # another process took the number: its operations come first
        self._seen.add(name)
        self._next += 1
        self._replay.apply_logs(logs)
        self._read += logs

    def uri(self) -> str:
        return self.files.uri(self.prefix)


def study_storage(results: Location | str, run_key: str, run_id: str) -> tuple[JournalStorage, str]:
    """The storage for one run's studies, and where it is."""
    backend = FilesBackend(open_files(results), f"{SEARCH_FOLDER}/{run_key}/{run_id}")
    return JournalStorage(backend), backend.uri()
