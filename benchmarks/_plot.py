"""Time per row against N, one line per (estimator, backend, layout)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ._run import Row


def plot(rows: Sequence[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = sorted({r.layout for r in rows})
    fig, axes = plt.subplots(1, len(layouts), figsize=(5 * len(layouts), 4), sharey=True, squeeze=False)
    for ax, layout in zip(axes[0], layouts, strict=True):
        lines: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
        floor: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for r in rows:
            if r.layout == layout:
                lines[(r.estimator, r.backend)].append((r.n, r.ns_per_row))
                floor[r.backend].append((r.n, r.floor_s / r.n * 1e9))
        for (est, backend), pts in sorted(lines.items()):
            pts.sort()
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                label=f"{est} ({backend})",
                linestyle="-" if backend == "numpy" else "--",
            )
        for backend, pts in sorted(floor.items()):
            pts = sorted(set(pts))
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                color="k",
                linestyle=":" if backend == "numpy" else "-.",
                label=f"copy floor ({backend})",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows N")
        ax.set_title(layout)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ns per row")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
