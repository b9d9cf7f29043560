"""Two runs of one benchmark side by side, with the paired difference on the cases both scored.

Each benchmark says what one case contributes to its headline metric (``Benchmark.paired``: pass or fail
for Pass@1, the joint-accuracy term for the security benchmarks). On the cases both runs scored, with
``d_i = x_i - y_i`` (this run minus the other), the report gives ``100 mean(d)`` and a 95% paired
bootstrap interval (``resamples`` draws of the cases with replacement, percentile interval, seeded), and
where every value is 0 or 1 McNemar's exact test: the two-sided binomial p-value of the discordant
pairs, ``min(1, 2 P(X <= min(b, c)))`` with ``X ~ Binomial(b + c, 1/2)``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._benchmarks import BENCHMARKS

__all__ = ["compare_runs", "mcnemar_exact", "paired_bootstrap"]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs.

    >>> mcnemar_exact(0, 0), round(mcnemar_exact(1, 9), 4)
    (1.0, 0.0215)
    """
    n = b + c
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_bootstrap(
    differences: Sequence[float], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the mean of ``differences`` under resampling of the cases.

    >>> paired_bootstrap([1.0] * 5)
    (1.0, 1.0)
    """
    n = len(differences)
    if n == 0:
        raise ValueError("no paired cases to resample")
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    low = means[math.floor((1 - level) / 2 * resamples)]
    high = means[min(resamples - 1, math.ceil((1 + level) / 2 * resamples) - 1)]
    return low, high


def _load(folder: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = Path(folder)
    metrics_file = folder / "metrics.json"
    if not metrics_file.is_file():
        raise FileNotFoundError(f"{folder}: no metrics.json (not a finished run folder)")
    payload = json.loads(metrics_file.read_text(encoding="utf-8"))
    by_id: dict[str, dict[str, Any]] = {}
    records_file = folder / "records.jsonl"
    if records_file.is_file():
        for line in records_file.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                by_id[record["id"]] = record
    records = [by_id[i] for i in payload.get("ids", []) if i in by_id]
    return payload, records


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "-" if value is None else str(value)


def compare_runs(this: str | Path, other: str | Path, *, resamples: int = 10_000) -> str:
    """Markdown: both runs' metrics side by side, then the paired difference on the common cases."""
    mine, my_records = _load(this)
    theirs, their_records = _load(other)
    if mine["benchmark"] != theirs["benchmark"]:
        raise ValueError(f"{other} is a {theirs['benchmark']} run, not {mine['benchmark']}: nothing to pair")
    bench = BENCHMARKS[mine["benchmark"]]
    a, b = Path(this).name or str(this), Path(other).name or str(other)
    keys = [k for k, _ in bench.metrics if k in mine["metrics"] or k in theirs["metrics"]]
    rows = []
    for key in keys:
        x, y = mine["metrics"].get(key), theirs["metrics"].get(key)
        delta = x - y if isinstance(x, (int, float)) and isinstance(y, (int, float)) else None
        rows.append(f"| {key} | {_cell(x)} | {_cell(y)} | {_cell(delta)} |")
    lines = [
        f"# {mine['benchmark']}: `{a}` beside `{b}`",
        "",
        f"`{a}`: model `{mine['config'].get('model')}`; `{b}`: model `{theirs['config'].get('model')}`",
        "",
        f"| metric | {a} | {b} | difference |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    x_by, y_by = bench.paired(my_records), bench.paired(their_records)
    common = [i for i in x_by if i in y_by]
    if not common:
        return "\n".join([*lines, "No case was scored in both runs: no paired difference.", ""])
    diffs = [x_by[i] - y_by[i] for i in common]
    low, high = paired_bootstrap(diffs, resamples=resamples)
    mean = sum(diffs) / len(diffs)
    lines.append(
        f"Paired on the {len(common)} {bench.unit} both runs scored ({bench.headline}, per case): "
        f"{100 * sum(x_by[i] for i in common) / len(common):.2f} vs "
        f"{100 * sum(y_by[i] for i in common) / len(common):.2f}, difference {100 * mean:+.2f} "
        f"(95% paired bootstrap interval {100 * low:+.2f} to {100 * high:+.2f}, {resamples} resamples)."
    )
    if all(v in (0.0, 1.0) for i in common for v in (x_by[i], y_by[i])):
        only_a = sum(1 for i in common if x_by[i] > y_by[i])
        only_b = sum(1 for i in common if y_by[i] > x_by[i])
        lines.append(
            f"McNemar's exact test: {only_a} pass only in `{a}`, {only_b} only in `{b}`, "
            f"p = {mcnemar_exact(only_a, only_b):.4g}."
        )
    return "\n".join([*lines, ""])
