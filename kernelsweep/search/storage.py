"""Where a run's searches keep their Optuna studies: next to the results, so a search resumes.

Optuna's journal storage replays a study from an append-only log; this backend keeps that log as
numbered objects under `<results>/_journal/search/<run key>/<run id>/` (a folder or an S3 prefix,
through the run journal's own files: each object whole or absent), one object per append. One
process writes a run's studies (the sweep flow's search loop), so numbering needs no lock. The log
outlives the run, for anyone who wants to load a study into Optuna afterwards.
"""

from __future__ import annotations

import json
from typing import Any

from optuna.storages import JournalStorage
from optuna.storages.journal import BaseJournalBackend

from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.stores.locations import Location

SEARCH_FOLDER = "search"


class FilesBackend(BaseJournalBackend):
    """Optuna's journal on the run journal's files: `log-<n>.json` objects, read in order."""

    def __init__(self, files: JournalFiles, prefix: str) -> None:
        self.files, self.prefix = files, prefix.rstrip("/") + "/"
        self._read: list[dict[str, Any]] = []
        self._objects = 0

    def read_logs(self, log_number_from: int) -> list[dict[str, Any]]:
        names = sorted(n for n in self.files.list(self.prefix) if n.rsplit("/", 1)[-1].startswith("log-"))
        for name in names[self._objects :]:
            self._read += json.loads(self.files.get(name) or b"[]")
        self._objects = len(names)
        return self._read[log_number_from:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self.read_logs(len(self._read))  # never overwrite an object another session wrote
        self.files.put(f"{self.prefix}log-{self._objects:09d}.json", json.dumps(logs).encode())
        self._objects += 1
        self._read += logs

    def uri(self) -> str:
        return self.files.uri(self.prefix)


def study_storage(results: Location | str, run_key: str, run_id: str) -> tuple[JournalStorage, str]:
    """The storage for one run's studies, and where it is."""
    backend = FilesBackend(open_files(results), f"{SEARCH_FOLDER}/{run_key}/{run_id}")
    return JournalStorage(backend), backend.uri()
