"""`compare --post`: one comment on the pull request, created once and updated on every later call,
through GitHub's REST API as documented, here served by a local HTTP server the test starts.

The server answers the three calls GitHub documents for issue comments (list a PR's comments, page by
page with a `Link` header; create one; update one by id), refuses a wrong Authorization header with
GitHub's 401, and records every request, so the test checks what went over the wire."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from test_triage import _cli, _nights

from kernelsweep.report.pr_comment import MARKER

TOKEN = "ghs_test-token-0123456789"
REPO, PR = "acme/kernels", 42
PAGE = 2  # the server's page size: the PR's earlier comments span pages, so the client must follow `Link`


class GitHub(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.calls: list[tuple[str, str, dict | None, str | None]] = []  # method, path, JSON body, Authorization
        self.comments = [{"id": 100 + i, "body": f"LGTM {i}", "html_url": f"https://x/c/{100 + i}"} for i in range(5)]
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: GitHub

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self, status: int, doc: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length)) if length else None
        parts = urlsplit(self.path)
        with self.server.lock:
            self.server.calls.append((self.command, parts.path, payload, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._answer(401, {"message": "Bad credentials"})
        if self.headers.get("Accept") != "application/vnd.github+json":
            return self._answer(415, {"message": "Unsupported Accept"})
        listing = f"/repos/{REPO}/issues/{PR}/comments"
        if self.command == "GET" and parts.path == listing:
            page = int(parse_qs(parts.query).get("page", ["1"])[0])
            chunk = self.server.comments[(page - 1) * PAGE : page * PAGE]
            more = page * PAGE < len(self.server.comments)
            link = {"Link": f'<{self.server.url}{listing}?page={page + 1}>; rel="next"'} if more else {}
            return self._answer(200, chunk, link)
        if self.command == "POST" and parts.path == listing and isinstance(payload, dict) and "body" in payload:
            comment = {"id": 900 + len(self.server.comments), "body": payload["body"]}
            comment["html_url"] = f"https://github.com/{REPO}/pull/{PR}#issuecomment-{comment['id']}"
            self.server.comments.append(comment)
            return self._answer(201, comment)
        edit = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", parts.path)
        if self.command == "PATCH" and edit and isinstance(payload, dict) and "body" in payload:
            [comment] = [c for c in self.server.comments if c["id"] == int(edit[1])]
            comment["body"] = payload["body"]
            return self._answer(200, comment)
        return self._answer(404, {"message": "Not Found"})

    do_GET = do_POST = do_PATCH = _handle


@pytest.fixture
def github() -> Iterator[GitHub]:
    server = GitHub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> str:
    results = str(tmp_path_factory.mktemp("post") / "results")
    _nights(results)  # matmul m=128 20% slower under compiler 2.22
    return results


def _env(github: GitHub, tmp_path, **changes: str | None) -> dict[str, str | None]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": "0123456789abcdef"}}}))
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REF": f"refs/pull/{PR}/merge",
        "GITHUB_API_URL": github.url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "777",
        "KERNELSWEEP_REPORTS_URL": "https://reports.example.com/kernelsweep",
    }
    return {**env, **changes}


def _compare(results: str, env: dict[str, str | None], *extra: str) -> tuple[int, str, str]:
    return _cli("compare", "--results", results, "--versions", "compiler", "2.21", "2.22", "--post", *extra, env=env)


def test_the_first_post_creates_the_comment_and_the_second_updates_it(results, github, tmp_path):
    page_dir = tmp_path / "reports" / "pr-42"
    code, out, err = _compare(results, _env(github, tmp_path), "--html", str(page_dir))
    assert code == 1, err  # the comparison's own exit code: a point is slower
    assert "slower" in out and "pull request comment created" in err
    methods = [(m, p) for m, p, _, _ in github.calls]
    listing = f"/repos/{REPO}/issues/{PR}/comments"
    assert methods == [("GET", listing)] * 3 + [("POST", listing)]  # 5 earlier comments, 2 a page, then create
    assert all(auth == f"Bearer {TOKEN}" for *_, auth in github.calls)
    [mine] = [c for c in github.comments if MARKER in c["body"]]
    text = mine["body"]
    assert "| matmul | m=128 |" in text and "**slower**" in text and "- **1: a regression" in text
    assert "https://reports.example.com/kernelsweep/pr-42/index.html" in text  # the compare page
    assert "https://github.com/acme/kernels/actions/runs/777" in text and "0123456789ab" in text

    github.calls.clear()
    code, _, err = _compare(results, _env(github, tmp_path, GITHUB_EVENT_PATH=None))  # the number from GITHUB_REF
    assert code == 1 and "pull request comment updated" in err
    assert [m for m, *_ in github.calls][-1] == "PATCH" and "POST" not in [m for m, *_ in github.calls]
    assert github.calls[-1][1] == f"/repos/{REPO}/issues/comments/{mine['id']}"
    assert [c["id"] for c in github.comments if MARKER in c["body"]] == [mine["id"]]  # still one comment
    assert "[compare page](" not in github.comments[-1]["body"]  # this time no page was written


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"GITHUB_TOKEN": None}, "GITHUB_TOKEN is not set"),
        ({"GITHUB_EVENT_PATH": None, "GITHUB_REF": "refs/heads/main"}, "no pull request number"),
    ],
    ids=["no-token", "no-pull-request"],
)
def test_without_a_token_or_a_pull_request_it_is_one_line_exit_2_after_the_comparison(
    results, github, tmp_path, changes, message
):
    code, out, err = _compare(results, _env(github, tmp_path, **changes))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert "slower" in out and "exit 1: regression" in out  # the comparison is still printed
    assert github.calls == []


def test_a_token_github_refuses_is_one_line_exit_4_that_never_shows_the_token(results, github, tmp_path):
    code, out, err = _compare(results, _env(github, tmp_path, GITHUB_TOKEN="ghs_wrong"))
    assert code == 4 and "GitHub answered 401 Bad credentials" in err and len(err.strip().splitlines()) == 1
    assert "ghs_wrong" not in err + out and "slower" in out
