"""How wide a table the Prefect UI's artifact page shows whole. It never wraps a table cell (a markdown
table's or a table artifact's) and scrolls a wider table sideways, its right part out of sight: the
fleet review found the summary's objects and the lineage table's addresses there. Measured in chromium
at a 1400 px window (Prefect 3.9's UI): the pane is 828 px wide, and a table takes about 7 px a
character of its cells' longest lines plus 24 px a column (763 px for 83 characters in 8 columns,
1197 px for 162 in 3), so UI_WIDTH characters, counting PAD a column, fit with a margin."""

from __future__ import annotations

import re

UI_WIDTH = 115
PAD = 4
_SEPARATOR = re.compile(r"\|(-+\|)+")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def markdown_tables(markdown: str) -> list[list[list[str]]]:
    """Each markdown table as its rows of cells (the separator row left out)."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|") and not _SEPARATOR.fullmatch(line):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if previous.startswith("|"):
                tables[-1].append(cells)
            else:
                tables.append([cells])
        previous = line
    return tables


def table_width(rows: list[list[str]]) -> int:
    """The characters a table takes in the UI: per column its cells' longest line (a `<br>` breaks a
    line; a link counts its text, backticks nothing), plus PAD."""
    widths = [0] * max(len(r) for r in rows)
    for row in rows:
        for i, cell in enumerate(row):
            shown = _LINK.sub(r"\1", cell).replace("`", "")
            widths[i] = max(widths[i], *(len(line.strip()) for line in shown.split("<br>")))
    return sum(w + PAD for w in widths)
