"""The results site: a static, offline site over a results dataset (docs/site.md).

`build.build_site` writes it (incrementally: only kernels whose rows changed); `model` turns the
report's index and regressions into the pages' data, `detail` reads each point's interval and
lineage, `pages` renders the HTML, `serve` shows a folder over HTTP.
"""
