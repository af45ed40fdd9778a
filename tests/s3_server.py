"""A real S3 API for tests: moto's server on 127.0.0.1, an optional fault-injecting proxy, request counts.

Everything talks HTTP: boto3 and pyarrow reach the server through `AWS_ENDPOINT_URL_S3` exactly as
they would reach a real endpoint, so nothing inside boto3 is patched. The proxy sits in front of
moto to make one request fail the way S3 fails (a 503 before storing, or a 500 after storing, i.e.
a lost response), or to take the endpoint down altogether (`down`: every connection is dropped
unanswered, as a dead endpoint does).
"""

from __future__ import annotations

import http.client
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import boto3
from moto.server import ThreadedMotoServer

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade"}


@contextmanager
def moto_s3() -> Iterator[str]:
    """Start moto's S3 server on a free port; yields its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def aws_test_env(endpoint_url: str) -> dict[str, str | None]:
    """Dummy credentials and the endpoint, for monkeypatch; None means unset (no host config leaks in)."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": None,
        "AWS_PROFILE": None,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": None,
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL": None,
        "AWS_ENDPOINT_URL_S3": endpoint_url,
    }


def apply_env(monkeypatch, env: dict[str, str | None]) -> None:
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


def create_bucket(endpoint_url: str) -> str:
    """A fresh bucket per test, so tests never see each other's objects."""
    name = f"ks-{uuid.uuid4().hex[:20]}"
    boto3.client("s3", endpoint_url=endpoint_url).create_bucket(Bucket=name)
    return name


def list_keys(endpoint_url: str, bucket: str, prefix: str = "") -> list[str]:
    pages = (
        boto3.client("s3", endpoint_url=endpoint_url)
        .get_paginator("list_objects_v2")
        .paginate(Bucket=bucket, Prefix=prefix)
    )
    return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def record_operations(client) -> list[str]:
    """Operation names of every HTTP attempt `client` sends (retries included), in order."""
    sent: list[str] = []

    def on_send(event_name: str, **_) -> None:
        sent.append(event_name.rsplit(".", 1)[-1])

    client.meta.events.register("before-send.s3", on_send)
    return sent


@dataclass
class Fault:
    method: str
    status: int
    code: str
    after_forward: bool  # True: the server stores the request, the client still sees the error


class FaultProxy:
    """HTTP proxy in front of moto that fails chosen requests once each and logs every request."""

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname, parts.port)
        self.faults: list[Fault] = []
        self.down = False
        self.log: list[tuple[str, str, int]] = []  # (method, path, status sent to the client)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, method: str, *, status: int = 503, code: str = "SlowDown", after_forward: bool = False):
        with self._lock:
            self.faults.append(Fault(method, status, code, after_forward))

    def take_fault(self, method: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.method == method:
                    self.faults.remove(fault)
                    return fault
        return None

    def record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.log.append((method, path, status))

    def forward(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes):
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive like S3, and 100-continue for large bodies

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if proxy.down:
                self.close_connection = True  # no answer at all: the client sees the connection drop
                proxy.record(self.command, self.path, 0)
                return
            fault = proxy.take_fault(self.command)
            if fault is None or fault.after_forward:
                status, headers, payload = proxy.forward(self.command, self.path, self.headers.items(), body)
            if fault is not None:
                self._send_error(fault)
                return
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            length = dict((k.lower(), v) for k, v in headers).get("content-length", "0")
            self.send_header("Content-Length", length if self.command == "HEAD" else str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            proxy.record(self.command, self.path, status)

        def _send_error(self, fault: Fault) -> None:
            xml = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{fault.code}</Code><Message>injected</Message>"
            payload = (xml + "</Error>").encode()
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            proxy.record(self.command, self.path, fault.status)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay

        def log_message(self, format: str, *args) -> None:
            return None

    return Handler
