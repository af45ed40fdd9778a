"""`kernelsweep site --serve DIR`: a built site over HTTP on localhost (the site also opens from the
folder itself; a server is for a person on another machine through a tunnel, or for habit)."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kernelsweep.errors import UsageError
from kernelsweep.site.pages import OVERVIEW

LOOPBACK = "127.0.0.1"


def server(folder: Path, port: int) -> ThreadingHTTPServer:
    """A server of `folder` bound to the loopback; a folder without a built site is a usage error."""
    if not (folder / OVERVIEW).is_file():
        raise UsageError(f"--serve {folder}: no built site there ({OVERVIEW} missing); run kernelsweep site first")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    try:
        return ThreadingHTTPServer((LOOPBACK, port), handler)
    except OSError as exc:
        raise UsageError(f"--port {port}: cannot listen on {LOOPBACK} ({exc.strerror}); give a free port") from None


def serve(folder: Path, port: int) -> None:
    with server(folder, port) as httpd:
        print(f"serving {folder} at http://{LOOPBACK}:{httpd.server_address[1]}/ (Ctrl-C stops)", flush=True)
        httpd.serve_forever()
