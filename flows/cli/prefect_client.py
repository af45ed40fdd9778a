"""A client of the Prefect server in PREFECT_API_URL, for the commands that manage a fleet."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.flows.cli.checks import check_api_url
from kernelsweep.flows.cli.run import QUIET_PREFECT

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient


@contextmanager
def server_client() -> Iterator[SyncPrefectClient]:
    """A client of the server in PREFECT_API_URL (never an ephemeral one), checked to answer."""
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    check_api_url()  # before Prefect's settings, which fail to load on a URL such as http://[::1/api
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise UsageError("PREFECT_API_URL is not set; point it at the fleet's server, e.g. http://prefect:4200/api")
    import httpx  # deferred with prefect, whose client raises its errors

    with get_client(sync_client=True) as client:
        error = client.api_healthcheck()
        if error is not None:
            said = f"the Prefect server at {url} does not answer ({error}); start it or fix the URL"
            # a URL no client can request is the user's mistake (exit 2), not a server that is down (3)
            mistake = isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL)
            raise UsageError(said) if mistake else KernelsweepError(said)
        yield client
