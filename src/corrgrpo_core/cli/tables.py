"""Text tables the commands print: aligned in a terminal and valid (GitHub-flavoured) Markdown."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["markdown_table"]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table with aligned columns; every row has as many cells as ``headers``.

    >>> print(markdown_table(["a", "bb"], [["1", "2"]]))
    | a | bb |
    |---|----|
    | 1 | 2  |
    """
    bad = [i for i, row in enumerate(rows) if len(row) != len(headers)]
    if bad:
        raise ValueError(
            f"markdown_table: row {bad[0]} has {len(rows[bad[0]])} cells for {len(headers)} headers"
        )
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
