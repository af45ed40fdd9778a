"""Build the results site into a folder or under an S3 prefix, rebuilding only the kernels whose rows
(or whose steps' statuses) changed since the last build.

The last build's fingerprints are in `site.json` at the site's root, written last: a build that
stops half-way leaves the old fingerprints, so the next build redoes what it had not finished. The
overview, the compare and lineage shells and the shipped scripts are small and written every time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import UsageError
from kernelsweep.report import compare_page
from kernelsweep.report.acknowledge import Acknowledgement
from kernelsweep.report.compare import compare_runs
from kernelsweep.report.index import Indexed
from kernelsweep.report.load import Selection
from kernelsweep.report.publish import browser_link, write_bundle
from kernelsweep.report.regress import regressions, track
from kernelsweep.report.stats import Rule
from kernelsweep.report.summary import Report
from kernelsweep.report.triage import load as load_statuses
from kernelsweep.site import model, pages
from kernelsweep.site.detail import Details
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

SITE_FOLDER = "site"
MANIFEST = "site.json"
FORMAT = 2  # raise when the data files change shape: every kernel is rebuilt
NIGHTLY_COMPARE = "compare-latest/index.html"
CHUNK = 24  # series per points file: the charts a kernel page draws at a time (static/site.js PAGE)


@dataclass(frozen=True)
class Built:
    location: str  # the overview page
    rebuilt: list[str]  # kernels whose pages and data were written
    kept: list[str]  # kernels left as the last build wrote them


def site_location(results: str) -> Location:
    """Where the site of `results` goes by default: `<results>/site/`, beside the dataset's `v1/`."""
    return parse_location(results, "results location").child(SITE_FOLDER)


def build_site(
    results_uri: str,
    out: str | None = None,
    *,
    rule: Rule | None = None,
    acknowledged: list[Acknowledgement] | None = None,
    prefect_ui: str | None = None,
    client: s3.S3Client | None = None,
) -> Built:
    """Writes the site of `results_uri` to `out` (default `<results>/site/`); returns what it did."""
    where = parse_location(out, "site location") if out else site_location(results_uri)
    if isinstance(where, s3.S3Location):
        client = client or s3.make_client()
    rule = rule or Rule()
    results = Indexed(results_uri)
    histories = track(results, rule)
    report = Report(
        results_uri, Selection(), datetime.now(UTC), results.latest(), histories, regressions(histories), [], [],
        rule, load_statuses(results_uri, acknowledged or []),
    )  # fmt: skip
    shipped = pages.assets()
    salt = f"{FORMAT}|{prefect_ui}|{_digest(shipped)}|{rule}"
    kernels = model.kernels(results, report, salt)
    before = _manifest(where, client)
    names = {k.kernel: f"kernel-{model.slug(k.kernel)}.html" for k in kernels}
    details, times = Details(results), model.times_ms(results)
    rebuilt = []
    for data in kernels:
        if before.get("kernels", {}).get(data.kernel) == data.fingerprint:
            continue
        name = model.slug(data.kernel)
        for number, columns in details.scan(data):  # each series' lineage written as it is read
            lineage = _wrapped("kernelsweepLineage", {"columns": columns})
            write_bundle({f"lineage/{name}-{number}.js": lineage}, where, client)
        payload = model.kernel_payload(data, results, report, (details.low, details.high), times)
        payload.update(slug=name, prefect_ui=prefect_ui, simulated=report.is_simulation)
        chunks: dict[str, bytes] = {}
        for first in range(0, len(payload["series"]), CHUNK):  # a page of charts' points in one file
            mine = [
                {"id": x["id"], **{c: x.pop(c) for c in model.POINTS}} for x in payload["series"][first : first + CHUNK]
            ]
            chunks[f"series/{name}-{first // CHUNK}.js"] = _wrapped("kernelsweepSeries", mine)
        payload["chunk"] = CHUNK
        write_bundle(chunks, where, client)
        html = pages.kernel(data.kernel, f"kernel-{name}.js").encode()
        write_bundle(
            {f"kernel-{name}.js": _wrapped("kernelsweepData", payload), names[data.kernel]: html}, where, client
        )
        rebuilt.append(data.kernel)
    numbers = {s.key: i for k in kernels for i, s in enumerate(k.series)}
    latest_run = results.runs_newest_first()[:1]
    nightly = _nightly_compare(results, rule, where, client, before.get("latest_run") != latest_run)
    listing = [{"kernel": k.kernel, "slug": model.slug(k.kernel)} for k in kernels]
    files = {
        **shipped,
        pages.OVERVIEW: pages.overview(model.overview(results, report, names, numbers), nightly).encode(),
        pages.COMPARE: pages.compare(listing, nightly).encode(),
        pages.LINEAGE: pages.lineage().encode(),
    }
    page = write_bundle(files, where, client)
    manifest = {"format": FORMAT, "kernels": {k.kernel: k.fingerprint for k in kernels}, "latest_run": latest_run}
    write_bundle({MANIFEST: json.dumps(manifest, indent=1).encode()}, where, client)
    kept = [k.kernel for k in kernels if k.kernel not in rebuilt]
    return Built(page, rebuilt, kept)


def site_link(overview: str, served_at: str | None = None) -> str:
    """A link a browser opens to the site's overview: under `served_at` (KERNELSWEEP_SITE_URL, a web
    server or CloudFront in front of `<results>/site/`), else the local file's URL, else (S3) a presigned
    URL of the overview alone: its links to the other pages need the prefix served, so set the variable."""
    return f"{served_at.rstrip('/')}/{pages.OVERVIEW}" if served_at else browser_link(overview)


def _nightly_compare(
    results: Indexed, rule: Rule, where: Location, client: s3.S3Client | None, changed: bool
) -> str | None:
    """The compare page of the latest run against the one before (kernelsweep.report.compare_page),
    written when the latest run changed; None while there is only one run."""
    if len(results.runs_newest_first()) < 2:
        return None
    if changed:
        try:
            comparison = compare_runs(results, "previous", "latest", rule)
        except UsageError:  # no point in both runs
            return None
        page = compare_page.bundle(comparison)
        write_bundle({f"{NIGHTLY_COMPARE.split('/')[0]}/{n}": b for n, b in page.items()}, where, client)
    return NIGHTLY_COMPARE


def _wrapped(call: str, payload: object) -> bytes:
    """JSON handed to one function: a page opened from file:// may load a script beside it, not fetch JSON."""
    return f"{call}({json.dumps(payload, separators=(',', ':'), allow_nan=False)});\n".encode()


def _digest(files: dict[str, bytes]) -> str:
    return hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:16]


def _manifest(where: Location, client: s3.S3Client | None) -> dict:
    """The last build's fingerprints; none when there was no build (or it never finished)."""
    if isinstance(where, s3.S3Location):
        assert client is not None
        try:
            body = client.get_object(Bucket=where.bucket, Key=where.key(MANIFEST))["Body"].read()
        except ClientError as exc:
            if s3.error_code(exc) in ("NoSuchKey", "404"):
                return {}
            raise s3.translate(exc, f"reading {where.uri(where.key(MANIFEST))}") from exc
        except BotoCoreError as exc:
            raise s3.translate(exc, f"reading {where.uri(where.key(MANIFEST))}") from exc
    else:
        path = where.path / MANIFEST
        if not path.exists():
            return {}
        body = path.read_bytes()
    try:
        found = json.loads(body)
    except ValueError:
        return {}
    return found if isinstance(found, dict) and found.get("format") == FORMAT else {}
