"""The tuned store on disk: one sealed JSON object per key under `<results>/_tuned/`, in a folder or
under the results' S3 prefix, each object whole or absent (the run journal's files).

One object per key, so a search of one shape and a report over all of them never rewrite each
other's entries, and any data tool reads the folder as JSON lines' worth of documents.
"""

from __future__ import annotations

import json
from typing import Any

from kernelsweep.errors import StoreError
from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.stores.locations import Location
from kernelsweep.tuned.keys import key_id, seal, sealed
from kernelsweep.tuned.lookup import STORE_FOLDER

ENTRIES = "entries"


class TunedStore:
    """Read and write the stored bests of one results location."""

    def __init__(self, results: Location | str, files: JournalFiles | None = None) -> None:
        self.files = files or open_files(results, folder=STORE_FOLDER)

    @property
    def uri(self) -> str:
        return self.files.uri("")

    def entries(self) -> list[dict[str, Any]]:
        """Every entry whose seal holds; one that does not is an error naming it (never silently used)."""
        return [self._read(name) for name in self.files.list(ENTRIES) if name.endswith(".json")]

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        name = self._name(key)
        return self._read(name) if self.files.get(name) is not None else None

    def put(self, entry: dict[str, Any]) -> None:
        self.files.put(self._name(entry["key"]), json.dumps(seal(entry), indent=1).encode())

    def _name(self, key: dict[str, Any]) -> str:
        return f"{ENTRIES}/{key_id(key)}.json"

    def _read(self, name: str) -> dict[str, Any]:
        data = self.files.get(name)
        try:
            entry = json.loads(data or b"")
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or not sealed(entry):
            raise StoreError(
                f"{self.files.uri(name)}: not a tuned entry as kernelsweep wrote it (edited by hand?); "
                "delete it and run the search or `kernelsweep report --export-best` again",
                error_class="TunedEntryBroken",
                retryable=False,
            )
        return entry
