"""Where results and artifacts live: a local folder or an S3 bucket and prefix.

A location arrives as text (a spec field, a command-line option, a flow parameter) and is read in
one place, `parse_location`; everything past the edge holds the value and branches on its type.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelsweep.errors import UsageError
from kernelsweep.stores.s3 import S3Location, is_s3_uri, parse_s3_uri


@dataclass(frozen=True)
class LocalFolder:
    path: Path

    def __str__(self) -> str:
        return str(self.path)

    def child(self, relative: str) -> LocalFolder:
        return LocalFolder(self.path / relative)


Location = LocalFolder | S3Location


def parse_location(value: Location | str, what: str = "location", flag: str | None = None) -> Location:
    """`s3://bucket/prefix` or a folder path; any other URL scheme is a user mistake, named with the fix.
    `what` names the location in that message ("results location", "artifact store"), `flag` the
    option that sets it."""
    if isinstance(value, LocalFolder | S3Location):
        return value
    if is_s3_uri(value):
        return parse_s3_uri(value)
    if "://" in value:
        where = f" ({flag})" if flag else ""
        raise UsageError(f"{what} {value!r}: use a folder path or s3://bucket/prefix{where}")
    return LocalFolder(Path(value))


def absolute_uri(value: Location | str) -> str:
    """`s3://...` as it is, a folder as `file://` and its absolute path: the same place named the same
    way from any working folder (asset keys, links)."""
    where = parse_location(value)
    return str(where) if isinstance(where, S3Location) else "file://" + str(where.path.resolve())
