"""The records a ``corrgrpo train`` run produces and their CSV form, shared by the runner and the report
(a module of their own, so neither imports the other)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunRecords", "load_csv", "write_csv"]


@dataclass
class RunRecords:
    """What a training invocation produced: one row per held-out evaluation, one per training step."""

    evals: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    warm: dict[str, Any] = field(default_factory=dict)
    audits: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Rows as CSV, the union of their keys as columns (first-seen order)."""
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def load_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an evals.csv / steps.csv (or a gzip-compressed ``.csv.gz``) with numbers as floats (seed
    and step as ints)."""
    import gzip

    rows = []
    path = Path(path)
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        for row in csv.DictReader(handle):
            parsed: dict[str, Any] = {}
            for k, v in row.items():
                if k in ("seed", "step", "n_eval"):
                    parsed[k] = int(float(v))
                else:
                    try:
                        parsed[k] = float(v) if v != "" else math.nan
                    except ValueError:
                        parsed[k] = v
            rows.append(parsed)
    return rows
