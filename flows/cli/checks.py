"""What the process's environment must give a run before Prefect is touched: a Prefect API address
that is one, and a temporary folder with room. Either found wrong later surfaces as Prefect's own
failure (a client that cannot reach "not%20a%20url", a server that never answers because it could
not write its files), as an internal error, minutes in."""

from __future__ import annotations

import os
import tempfile
import urllib.parse

from kernelsweep.errors import UsageError
from kernelsweep.flows.settings import check_room

MIN_TEMP_FREE_BYTES = 64 << 20  # the run's Prefect server, the tools' scratch files: far more than they need


def check_api_url(url: str | None = None) -> None:
    """`url` (PREFECT_API_URL when not given), when set, is an http(s) URL with a host: one no client can
    request (`http://[::1/api`) would read as a server that does not answer."""
    url = url if url is not None else os.environ.get("PREFECT_API_URL")
    if not url:
        return
    try:
        parts = urllib.parse.urlsplit(url)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        usable = False
    if not usable:
        raise UsageError(
            f"PREFECT_API_URL={url!r} is not an http(s) URL; give the server's API (e.g. http://127.0.0.1:4200/api) "
            "or unset it to run on a server of the run's own"
        )


def check_temp_dir() -> None:
    """The temporary folder (TMPDIR when set: Python would quietly use another) exists, takes a file,
    and has room."""
    named = os.environ.get("TMPDIR")
    folder = named or tempfile.gettempdir()
    where = f"temporary folder {folder}" + (" (TMPDIR)" if named else "")
    fix = "point TMPDIR at another folder" if named else "set TMPDIR to a folder with room"
    if not os.path.isdir(folder):
        raise UsageError(f"{where} is not a folder; create it or {fix}")
    check_room(folder, where, fix, MIN_TEMP_FREE_BYTES)
