"""A bisection's journal: one JSON object per bisect id under `<results>/_bisect/`, in a folder or under
the results' S3 prefix, rewritten whole after every run (each object whole or absent, as the run
journal's files are).

It holds the question (point, axis, ends, rule) and every run measured so far, in order (and, when
steps are decided on interleaved rounds, every round: its positions and their captures): what a
bisection run again with the same question replays instead of measuring (kernelsweep.bisect.search).
The id is a hash of the question, so running the same command again resumes it. The runs' rows, when
stored, are a sweep named `bisect-<id>` in the results: the id reaches rows through the sweep name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kernelsweep.errors import StoreError
from kernelsweep.report.stats import Sample
from kernelsweep.results.journal_files import JournalFiles, open_files
from kernelsweep.stores.locations import Location

STORE_FOLDER = "_bisect"
SWEEP_PREFIX = "bisect-"  # a bisection's rows are the sweep bisect-<id>: no night of the point's series
FORMAT_VERSION = 1


def bisect_id(question: dict[str, Any]) -> str:
    """The same question, the same id: the hash of its canonical JSON."""
    canonical = json.dumps(question, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class BisectJournal:
    """One bisection's question and runs, kept in its object."""

    def __init__(self, results: Location | str, question: dict[str, Any], files: JournalFiles | None = None) -> None:
        self.files = files or open_files(results, folder=STORE_FOLDER)
        self.id = bisect_id(question)
        self.name = f"{self.id}.json"
        self.doc: dict[str, Any] = {"format": FORMAT_VERSION, "id": self.id, "question": question, "runs": []}
        found = self.files.get(self.name)
        if found is not None:
            self.doc = self._checked(found)

    @property
    def uri(self) -> str:
        return self.files.uri(self.name)

    def runs(self) -> dict[Any, list[Sample]]:
        """The runs journaled so far, by position (an index, or a pair of them on two axes), in the
        order they were measured."""
        by_position: dict[Any, list[Sample]] = {}
        for run in self.doc["runs"]:
            by_position.setdefault(_position(run["at"]), []).append(Sample.of(run["latencies_us"]))
        return by_position

    def rounds(self) -> dict[tuple[Any, ...], list[tuple[float, ...]]]:
        """The interleaved rounds journaled so far, by the positions they captured, in order."""
        by_key: dict[tuple[Any, ...], list[tuple[float, ...]]] = {}
        for done in self.doc.get("rounds", []):
            key = tuple(_position(at) for at in done["at"])
            by_key.setdefault(key, []).append(tuple(done["latencies_us"]))
        return by_key

    def row_of(self, at: Any) -> str:
        """The row of the position's first run: the NEFF and inputs its rounds capture."""
        return next(run["row_id"] for run in self.doc["runs"] if _position(run["at"]) == at)

    def add_round(self, key: tuple[Any, ...], latencies: tuple[float, ...]) -> None:
        self.doc.setdefault("rounds", []).append({"at": list(key), "latencies_us": list(latencies)})
        self._save()

    def add(self, at: Any, label: str, sample: Sample, row_id: str) -> None:
        self.doc["runs"].append({"at": at, "label": label, "latencies_us": list(sample.values), "row_id": row_id})
        self._save()

    def asked_for(self, step: str) -> None:
        """The nightly step this bisection answers (a StepRequest's `key`): once it has an outcome, the
        report asks for that step no more (finished_steps)."""
        if self.doc.get("step") != step:
            self.doc["step"] = step
            self._save()

    def finish(self, outcome: dict[str, Any]) -> None:
        self.doc["outcome"] = outcome
        self._save()

    def _save(self) -> None:
        self.files.put(self.name, json.dumps(self.doc, indent=1).encode())

    def _checked(self, data: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("id") != self.id or not isinstance(doc.get("runs"), list):
            raise StoreError(
                f"{self.uri}: not a bisect journal as kernelsweep wrote it (edited by hand?); delete it to start over",
                error_class="BisectJournalBroken",
                retryable=False,
            )
        return doc


def finished_steps(results: Location | str) -> set[str]:
    """The nightly steps whose bisection has an outcome, among the journals beside these results; a
    journal that cannot be read counts as no finished step (its bisection is asked for again)."""
    files = open_files(results, folder=STORE_FOLDER)
    done = set()
    for name in files.list(""):
        try:
            doc = json.loads(files.get(name) or b"")
        except ValueError:
            continue
        if isinstance(doc, dict) and "outcome" in doc and isinstance(doc.get("step"), str):
            done.add(doc["step"])
    return done


def _position(at: Any) -> Any:
    """A journaled position: an index, or (JSON's list for) a pair of them."""
    return tuple(at) if isinstance(at, list) else at
