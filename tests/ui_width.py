"""How wide a table the Prefect UI's artifact page can show: it cuts a wider one off on the right
instead of scrolling it (the fleet review's screenshots at a 1400 px window), so the fleet's tables
are held to UI_WIDTH characters at their narrowest."""

from __future__ import annotations

import re

# Characters of the artifact pane at a 1400 px window, padding included, as the fleet review's
# screenshots measure it (the old fleet summary table ran out after about 106).
UI_WIDTH = 100
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


def least_width(rows: list[list[str]]) -> int:
    """The characters a table needs at the least: per column its longest word that cannot wrap (a link
    counts its text), plus 3 for the cell's padding."""
    widths = [0] * max(len(r) for r in rows)
    for row in rows:
        for i, cell in enumerate(row):
            shown = _LINK.sub(r"\1", cell).replace("<br>", " ")
            widths[i] = max(widths[i], *(len(word) for word in shown.split()), 0)
    return sum(w + 3 for w in widths)
