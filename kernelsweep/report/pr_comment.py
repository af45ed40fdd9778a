"""A comparison posted on its pull request as one comment, updated on every push (`compare --post`).

GitHub's REST API (docs.github.com, "REST API endpoints for issue comments"; a pull request is an
issue there): the PR's comments are listed page by page (`GET /repos/{owner}/{repo}/issues/{number}/
comments`, following the `Link: rel="next"` header), the one kernelsweep wrote before is found by a
hidden marker in its body, and is then updated (`PATCH /repos/{owner}/{repo}/issues/comments/{id}`)
or, the first time, created (`POST .../issues/{number}/comments`). So a PR holds one comment that
always says what the latest push measured, instead of one per push.

Where to post comes from the CI's environment as GitHub Actions sets it (GITHUB_TOKEN, GITHUB_REPOSITORY,
the event file's pull_request.number or GITHUB_REF `refs/pull/N/merge`, GITHUB_API_URL); the token is
sent only in the Authorization header and never appears in a message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from kernelsweep.errors import KernelsweepError, UsageError
from kernelsweep.report.compare import Comparison, PointComparison
from kernelsweep.report.formats import comparison_markdown

MARKER = "<!-- kernelsweep compare --post -->"  # hidden in the rendered comment; finds it again
MAX_BODY_CHARS = 65_536  # GitHub refuses a longer comment body
PER_PAGE = 100  # GitHub's largest page of comments
TIMEOUT_SECONDS = 30.0
API_VERSION = "2022-11-28"
_LEGEND = {
    0: "nothing regressed and nothing is suspected",
    1: "a regression: some point is slower, or newly fails or computes a wrong result",
    3: "nothing proven, but a suspect: an inconclusive point leans slower (`compare --confirm` decides it)",
}
_QUIET = ("same", "faster", "fixed")  # verdicts a long table leaves out first


class PostFailed(KernelsweepError):
    """GitHub refused the comment or could not be reached; the comparison itself stands."""


@dataclass(frozen=True)
class PullRequest:
    api_url: str
    repository: str  # owner/name
    number: int
    token: str = field(repr=False)
    run_url: str | None = None  # the CI run that posts (its artifacts hold the compare page)
    head_sha: str | None = None

    @property
    def comments_url(self) -> str:
        return f"{self.api_url}/repos/{self.repository}/issues/{self.number}/comments"


def pull_request(env: Mapping[str, str]) -> PullRequest:
    """Where to post, from GitHub Actions' variables; what is missing is a usage error saying what to set."""
    token = env.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise UsageError(
            "compare --post: GITHUB_TOKEN is not set; pass it to the step (env: GITHUB_TOKEN: "
            "${{ secrets.GITHUB_TOKEN }}) with pull-requests: write permission"
        )
    repository = env.get("GITHUB_REPOSITORY", "")
    if repository.count("/") != 1:
        raise UsageError("compare --post: GITHUB_REPOSITORY (owner/name) is not set; run it in a GitHub Actions job")
    event = _event(env.get("GITHUB_EVENT_PATH"))
    found = event.get("pull_request")
    pr: dict = found if isinstance(found, dict) else {}
    number = pr.get("number") or _number_from_ref(env.get("GITHUB_REF", ""))
    if not isinstance(number, int) or number <= 0:
        raise UsageError(
            "compare --post: no pull request number (neither the event's pull_request.number nor GITHUB_REF "
            "refs/pull/N/merge); run it on a pull_request event"
        )
    server, run_id = env.get("GITHUB_SERVER_URL", "https://github.com"), env.get("GITHUB_RUN_ID")
    return PullRequest(
        api_url=env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
        repository=repository,
        number=number,
        token=token,
        run_url=f"{server}/{repository}/actions/runs/{run_id}" if run_id else None,
        head_sha=(pr.get("head") or {}).get("sha") or env.get("GITHUB_SHA"),
    )


def _event(path: str | None) -> dict:
    if not path:
        return {}
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _number_from_ref(ref: str) -> int | None:
    parts = ref.split("/")  # refs/pull/123/merge
    return int(parts[2]) if len(parts) == 4 and parts[:2] == ["refs", "pull"] and parts[2].isdigit() else None


def body(c: Comparison, pr: PullRequest, page_link: str | None = None) -> str:
    """The comment: the verdict table (quiet points left out first if GitHub's limit needs it), what the
    exit code means, and where the compare page is."""
    points = sorted(c.points, key=lambda p: p.outcome in _QUIET)
    text = _body(c, pr, page_link, points)
    if len(text) <= MAX_BODY_CHARS:
        return text
    fits, too_many = 0, len(points)  # the most rows that fit: a body's length grows with its rows
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        fits, too_many = (
            (middle, too_many) if len(_body(c, pr, page_link, points[:middle])) <= MAX_BODY_CHARS else (fits, middle)
        )
    return _body(c, pr, page_link, points[:fits])


def _body(c: Comparison, pr: PullRequest, page_link: str | None, shown: list[PointComparison]) -> str:
    lines = [MARKER, comparison_markdown(c, shown)]
    if len(shown) < len(c.points):
        lines.append(f"{len(c.points) - len(shown)} point(s) judged same, faster or fixed are left out of this "
                     "table (GitHub's comment limit); the compare page lists every point.\n")  # fmt: skip
    lines.append("What the exit codes of `kernelsweep compare` mean (this one's in bold):\n")
    lines += [f"- {'**' if code == c.exit_code else ''}{code}: {meaning}{'**' if code == c.exit_code else ''}"
              for code, meaning in _LEGEND.items()]  # fmt: skip
    links = [f"[compare page]({page_link})"] if page_link else []
    if pr.run_url:
        links.append(f"[CI run]({pr.run_url})" + ("" if page_link else " (the compare page is among its artifacts)"))
    if links:
        lines += ["", " · ".join(links)]
    commit = f" for {pr.head_sha[:12]}" if pr.head_sha else ""
    lines += ["", f"<sub>kernelsweep compare --post{commit}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC</sub>"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Posted:
    action: str  # created or updated
    url: str  # the comment on the PR


def post(pr: PullRequest, text: str) -> Posted:
    """Update kernelsweep's comment on the PR, or create it: one comment per PR, whatever the pushes."""
    headers = {
        "Authorization": f"Bearer {pr.token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": "kernelsweep",
    }
    with httpx.Client(headers=headers, timeout=TIMEOUT_SECONDS) as client:
        earlier = _find(client, pr)
        if earlier is None:
            created = _call(client, "POST", pr.comments_url, {"body": text})
            return Posted("created", str(created.get("html_url", "")))
        updated = _call(
            client, "PATCH", f"{pr.api_url}/repos/{pr.repository}/issues/comments/{earlier}", {"body": text}
        )
        return Posted("updated", str(updated.get("html_url", "")))


def _find(client: httpx.Client, pr: PullRequest) -> int | None:
    """The id of the comment kernelsweep posted before on this PR (the first with the marker), if any."""
    url: str | None = f"{pr.comments_url}?per_page={PER_PAGE}"
    while url:
        response = _send(client, "GET", url)
        page = response.json()
        found = next((c["id"] for c in page if isinstance(c, dict) and MARKER in str(c.get("body", ""))), None)
        if found is not None:
            return int(found)
        url = response.links.get("next", {}).get("url")
    return None


def _call(client: httpx.Client, method: str, url: str, payload: dict) -> dict:
    answer = _send(client, method, url, payload).json()
    return answer if isinstance(answer, dict) else {}


def _send(client: httpx.Client, method: str, url: str, payload: dict | None = None) -> httpx.Response:
    what = f"compare --post: {method} {url}"
    try:
        response = client.request(method, url, json=payload)
    except httpx.HTTPError as exc:
        raise PostFailed(f"{what}: {type(exc).__name__} ({exc}); check GITHUB_API_URL and the network") from None
    if response.status_code >= 400:
        try:
            said = str(response.json().get("message", ""))
        except ValueError:
            said = response.text[:200]
        fix = (
            "; the token needs pull-requests: write (issues: write)" if response.status_code in (401, 403, 404) else ""
        )
        raise PostFailed(f"{what}: GitHub answered {response.status_code} {said}{fix}".rstrip())
    return response
