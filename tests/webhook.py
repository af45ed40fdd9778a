"""A local webhook server behind a Prefect custom-webhook notification block, for the fleet tests
that check a notice arrives (`fleet up --notify custom-webhook/<block>`)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prefect_server import PrefectServer


@contextmanager
def webhook_block(server: PrefectServer, block: str) -> Iterator[list[dict]]:
    """Serve a webhook on a free port and save block `block` on `server` posting to it; the list fills
    with the JSON bodies that arrive (its own list, so two modules in one process never mix them)."""
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append(json.loads(body or b"{}"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    create = (
        "from prefect.blocks.notifications import CustomWebhookNotificationBlock as B; "
        f"B(name='kernelsweep', url='{url}', json_data={{'subject': '{{{{subject}}}}', 'body': '{{{{body}}}}'}})"
        f".save('{block}', overwrite=True)"
    )
    try:
        done = server.run(sys.executable, "-c", create)
        assert done.returncode == 0, done.stderr
        yield received
    finally:
        httpd.shutdown()


def install_notifications(server: PrefectServer, block: str, *automations: Callable) -> None:
    """What `fleet up --notify custom-webhook/BLOCK` installs, put on `server` from this process: each of
    `automations` (kernelsweep.flows.fleet.automations' builders) given the block's id. A `fleet up`
    costs an interpreter, a deploy and about 15 s; tests/test_fleet.py's nightly test runs the command."""
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from kernelsweep.flows.fleet.automations import install

    with temporary_settings({PREFECT_API_URL: server.api_url}), get_client(sync_client=True) as client:
        block_id = client.read_block_document_by_name(block, "custom-webhook").id
        for automation in automations:
            install(client, automation(block_id))
