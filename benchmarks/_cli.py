"""``python -m benchmarks``: run a grid, print one table, optionally write JSON, markdown and a plot.

The table ends with a footer line and the JSON ``meta`` holds the same: the load average before and
after the run, its date (UTC) and the tree it measured (``git rev-parse --short HEAD``; ``n/a``
without git), so a saved result says under which conditions and on which code it was measured.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._data import LAYOUTS
from ._provenance import RunRecord
from ._run import BACKENDS, ESTIMATORS, Row, run

PRESETS: dict[str, dict[str, Any]] = {
    # the targets: N = 65,536 and 1,048,576, K = 7, groups of 8, ragged in runs and shuffled
    "targets": {"n": [65_536, 1_048_576], "k": [7], "layout": ["dense8", "runs8", "runs", "shuffled"]},
    # time per row against N for the plot
    "scaling": {
        "n": [1_000, 10_000, 100_000, 1_000_000, 10_000_000],
        "k": [7],
        "layout": ["dense8", "runs", "shuffled"],
    },
    # the whole grid of the issue (long)
    "full": {
        "n": [1_000, 10_000, 100_000, 1_000_000, 10_000_000],
        "k": [1, 3, 7, 16],
        "layout": list(LAYOUTS),
    },
    "smoke": {"n": [1_000], "k": [3], "layout": ["dense8", "runs", "shuffled"]},
}

COLUMNS = [
    ("backend", "backend", "{}"),
    ("layout", "layout", "{}"),
    ("K", "k", "{}"),
    ("N", "n", "{:,}"),
    ("estimator", "estimator", "{}"),
    ("median ms", "median_s", "ms"),
    ("rows/s", "rows_per_s", "{:.3g}"),
    ("ns/row", "ns_per_row", "{:.1f}"),
    ("peak extra MB", "peak_extra_bytes", "mb"),
    ("peak / input", "peak_extra_x_input", "{:.2f}"),
    ("x floor", "x_floor", "{:.1f}"),
    ("vs loop (torch)", "x_loop", "{:.0f}x"),
    ("vs loop (numpy)", "x_loop_numpy", "{:.0f}x"),
]


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "ms":
        return f"{value * 1e3:.3f}"
    if fmt == "mb":
        return f"{value / 2**20:.1f}"
    return fmt.format(value)


def markdown(rows: Sequence[Row]) -> str:
    cols = [c for c in COLUMNS if any(getattr(r, c[1]) is not None for r in rows)]
    lines = ["| " + " | ".join(c[0] for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_cell(getattr(r, c[1]), c[2]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def _count(text: str) -> int:
    return int(float(text))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named grid (explicit options override it)")
    p.add_argument("--n", type=_count, nargs="+", help="rows, e.g. 1e3 65536 1e6")
    p.add_argument("--k", type=int, nargs="+", help="reward components")
    p.add_argument("--layout", nargs="+", choices=list(LAYOUTS))
    p.add_argument("--estimator", nargs="+", choices=ESTIMATORS, default=list(ESTIMATORS))
    p.add_argument("--backend", nargs="+", choices=BACKENDS, default=["numpy", "torch"])
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--loop-max", type=_count, default=131_072, help="largest N timed with the loop baseline")
    p.add_argument(
        "--cold-malloc", action="store_true", help="skip the allocator warm-up (see warm_allocator)"
    )
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory pass")
    p.add_argument("--repeat", type=int, default=3, help="least timed calls per row (median)")
    p.add_argument(
        "--budget", type=float, default=0.3, help="seconds of timed calls per row, at most 50 calls"
    )
    p.add_argument("--json", type=Path, help="write the rows as JSON")
    p.add_argument("--markdown", type=Path, help="write the table as markdown")
    p.add_argument("--plot", type=Path, help="write a PNG of ns per row against N (needs matplotlib)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    preset = PRESETS[args.preset] if args.preset else PRESETS["smoke"]
    ns = args.n or preset["n"]
    ks = args.k or preset["k"]
    layouts = args.layout or preset["layout"]
    backends = []
    for b in args.backend:
        try:
            __import__({"numpy": "numpy", "torch": "torch", "torch-cuda": "torch", "jax": "jax"}[b])
        except ImportError:
            print(f"# skipping backend {b}: not importable", file=sys.stderr)
            continue
        if b == "torch-cuda":
            import torch

            if not torch.cuda.is_available():
                print("# skipping backend torch-cuda: no CUDA device", file=sys.stderr)
                continue
        backends.append(b)

    def log(row: Row) -> None:
        print(markdown([row]).splitlines()[-1], file=sys.stderr, flush=True)

    record = RunRecord.start()
    rows = run(
        ns=ns,
        ks=ks,
        layouts=layouts,
        estimators=args.estimator,
        backends=backends,
        dtype=args.dtype,
        loop_max=args.loop_max,
        min_repeat=args.repeat,
        budget_s=args.budget,
        memory=not args.no_memory,
        cold_malloc=args.cold_malloc,
        log=log,
    )
    record.finish()
    # The footer keeps load, date and tree with the figures wherever the table is pasted or saved.
    table = markdown(rows) + "\n" + record.footer() + f"; python {sys.version.split()[0]}\n"
    print(table)
    meta = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "argv": list(argv or sys.argv[1:]),
        **record.meta(),
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": [r.as_dict() for r in rows]}, indent=1))
    if args.markdown:
        args.markdown.write_text(table)
    if args.plot:
        from ._plot import plot

        plot(rows, args.plot)
    return 0
