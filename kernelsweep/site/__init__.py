"""The results site: a static, offline site over a results dataset (docs/site.md).

`build.build_site` writes it (incrementally: only kernels whose rows changed); `model` turns the
report's index and regressions into the pages' data, `detail` reads each point's interval and
lineage, `pages` renders the HTML, `serve` shows a folder over HTTP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.site.build import Built, build_site, site_link, site_location

__all__ = ["Built", "build_site", "site_link", "site_location"]
__getattr__ = public_face(__name__, __file__)
