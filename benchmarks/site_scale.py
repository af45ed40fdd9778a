"""`kernelsweep site` on report_scale.py's datasets (N nights x S series, 10^6 rows at 1,000 x 1,000):
the build's wall and CPU seconds and peak memory, a rebuild with nothing changed, what the site
weighs, and how long its pages take to open in Debian's chromium (Playwright) from the folder.

Each build runs as a user runs it, in its own process (report_scale.measure: its ru_maxrss and CPU
time). A page's open time is from navigation to its charts drawn (the kernel page's first 24) or
its last table (the overview), as the browser's own clock (performance.now()) says. Every request
that is not file:// is refused and counted: the figure must be 0.

    python benchmarks/site_scale.py [--data /tmp/kernelsweep-report-scale] [--nights 10 100 1000] [--series 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from report_scale import dataset, measure

CHROMIUM = "/usr/bin/chromium"


def weigh(site: Path) -> str:
    """Files and MiB in all, and the largest file of each kind (a kernel's, a series' points, a lineage)."""
    files = [p for p in site.rglob("*") if p.is_file()]
    largest = {
        kind: max((p.stat().st_size for p in site.glob(pattern)), default=0) / 2**10
        for kind, pattern in (("kernel", "kernel-*.js"), ("series", "series/*.js"), ("lineage", "lineage/*.js"))
    }
    return f"{len(files)} files, {sum(p.stat().st_size for p in files) / 2**20:.1f} MiB; largest " + ", ".join(
        f"{kind} {kib:.0f} KiB" for kind, kib in largest.items()
    )


def open_times(site: Path) -> dict[str, float]:
    """Seconds from navigation to drawn, per page (overview, the largest kernel page, a lineage page)."""
    from playwright.sync_api import sync_playwright

    largest = max(site.glob("kernel-*.js"), key=lambda p: p.stat().st_size)
    pages = {
        "overview": ((site / "index.html").as_uri(), "table.kernels"),
        f"kernel page ({largest.stem})": ((site / f"{largest.stem}.html").as_uri(), ".series .u-over"),
        "lineage page": ((site / "lineage.html").as_uri() + f"?k={largest.stem[7:]}&s=0&i=0", "tr.artifact"),
    }
    outside: list[str] = []
    times = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else
                          (outside.append(r.request.url), r.abort()))  # fmt: skip
            for name, (url, drawn) in pages.items():
                page = context.new_page()
                page.goto(url)
                page.wait_for_selector(drawn, timeout=120_000)
                times[name] = page.evaluate("() => performance.now()") / 1000
                page.close()
        finally:
            browser.close()
    times["requests leaving the machine"] = len(outside)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "kernelsweep-report-scale")
    parser.add_argument("--nights", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--series", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for nights in args.nights:
        results = str(dataset(args.data, nights, args.series))
        site = args.data / f"site-{nights}-{args.series}"
        shutil.rmtree(site, ignore_errors=True)
        rows = nights * args.series
        for label in ("first build", "rebuild, nothing changed"):
            seconds, peak, code, cpu = measure(["site", results, "--out", str(site)])
            print(f"{rows:>9,} rows  {label:<26} {seconds:7.1f} s  {cpu:7.1f} CPU-s  {peak:6.0f} MiB peak  exit {code}"
                  f"  load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        print(f"{rows:>9,} rows  site: {weigh(site)}")
        for name, value in open_times(site).items():
            print(f"{rows:>9,} rows  open {name}: {value:.2f}" + (" s" if "requests" not in name else ""), flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
