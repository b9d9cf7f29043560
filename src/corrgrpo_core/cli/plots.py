"""PNG figures for ``explain`` and ``simulate`` (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .io import CliError

if TYPE_CHECKING:
    from .explain import Explanation
    from .runs import RunReport
    from .simulate import ScenarioResult

__all__ = ["check_plot_path", "plot_explanation", "plot_run", "plot_scenario"]

_SUFFIXES = {".png", ".pdf", ".svg"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise CliError(
            "plots need matplotlib: pip install 'corrgrpo-core[cli]' (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: str | Path) -> Path:
    """Create the plot's folder and check the suffix before any work, so a typo fails fast."""
    path = Path(path)
    if path.is_dir():
        raise CliError(f"--plot {path}: is a folder; give a file name such as {path / 'plot.png'}")
    if path.suffix.lower() not in _SUFFIXES:
        raise CliError(f"--plot {path}: use a .png, .pdf or .svg file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CliError(f"--plot {path}: cannot create the folder {path.parent} ({err.strerror})") from None
    return path


def _save(fig: Any, path: str | Path) -> Path:
    path = check_plot_path(path)
    try:
        fig.savefig(path, dpi=80)
    except OSError as err:
        raise CliError(f"--plot {path}: cannot write it ({err.strerror})") from None
    finally:
        fig.clf()
    return path


def _percent(v: float) -> str:
    """A share as a percentage to 0.1%, with no "-0.0%" for a tiny negative value."""
    text = f"{100 * v:.1f}%"
    return "0.0%" if text == "-0.0%" else text


def _heatmap(ax: Any, values: np.ndarray[Any, Any], names: list[str], title: str) -> None:
    limit = max(float(np.max(np.abs(values))), 1e-12)
    ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_title(title, fontsize=10)
    if len(names) <= 8:
        for (i, j), v in np.ndenumerate(values):
            color = "white" if abs(v) > 0.6 * limit else "black"
            ax.text(j, i, _percent(v), ha="center", va="center", fontsize=8, color=color)


def plot_explanation(ex: Explanation, path: str | Path, *, group: int = 0) -> Path:
    """The paper's Figure 2 view of one group: each entry's share of GRPO's covariance sum next to
    its share of CorrGRPO's correlation sum, and the advantages each estimator gives."""
    plt = _pyplot()
    view = ex.groups[group]
    names = list(ex.components)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6), gridspec_kw={"width_ratios": [1, 1, 1.5]})
    cov_share = view.covariance / view.covariance_sum if view.covariance_sum > 0 else view.covariance
    corr_share = view.correlation / view.correlation_sum if view.correlation_sum > 0 else view.correlation
    _heatmap(axes[0], cov_share, names, f"GRPO: covariance contributions\nsum = {view.covariance_sum:.4g}")
    _heatmap(
        axes[1], corr_share, names, f"CorrGRPO: correlation contributions\nsum = {view.correlation_sum:.4g}"
    )
    ax = axes[2]
    rows = view.rows
    first = [e for e in ("grpo", "corrgrpo") if e in ex.estimators]  # the paper's pair, drawn first
    order = [*first, *(e for e in ex.estimators if e not in first)]
    width = 0.8 / max(len(order), 1)
    for i, name in enumerate(order):
        ax.bar(
            np.arange(rows.size) + (i - (len(order) - 1) / 2) * width,
            view.advantages[name],
            width,
            label=name,
            edgecolor="black" if name in first else "none",
            linewidth=0.6,
            zorder=3,
        )
    ax.axhline(0.0, color="black", linewidth=0.6, zorder=4)
    ax.grid(axis="y", linewidth=0.3, zorder=0)
    ax.set_xticks(range(rows.size), [str(r + 1) for r in rows] if rows.size <= 16 else [""] * rows.size)
    ax.set_xlabel("rollout (file row)")
    ax.set_ylabel("advantage")
    ax.set_title(f"advantages (c_q = {view.c_q:.3f}: CorrGRPO = c_q x GRPO)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"group {view.label}: {ex.source}", fontsize=11)
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 0.94))
    out = _save(fig, path)
    plt.close(fig)
    return out


def plot_scenario(result: ScenarioResult, path: str | Path, *, baseline: str | None = None) -> Path:
    """Learning curves (seed mean and 95% band) of every component and the weighted total.

    With ``baseline``, each estimator's curve minus the baseline's on the same seed (paired, so the
    band shows the difference between estimators rather than between drawn environments).
    """
    plt = _pyplot()
    columns = result.columns
    ncols = min(4, len(columns))
    nrows = -(-len(columns) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.6 * nrows + 0.6), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    seeds = next(iter(result.curves.values())).shape[0]
    for j, column in enumerate(columns):
        ax = axes.flat[j]
        for i, (name, curves) in enumerate(result.curves.items()):
            if name == baseline:
                continue
            values = curves[:, :, j]
            if baseline is not None:
                values = values - result.curves[baseline][:, :, j]
            mean = values.mean(axis=0)
            color = colors[i % len(colors)]
            ax.plot(result.steps, mean, color=color, linewidth=2.2 if name == "corrgrpo" else 1.2, label=name)
            if seeds > 1:
                half = 1.96 * values.std(axis=0, ddof=1) / np.sqrt(seeds)
                ax.fill_between(result.steps, mean - half, mean + half, color=color, alpha=0.12, linewidth=0)
        if baseline is None:
            ax.axhline(result.threshold_values[j], color="grey", linestyle=":", linewidth=0.8)
        else:
            ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(column, fontsize=10)
        ax.tick_params(labelsize=8)
    for ax in list(axes.flat)[len(columns) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    what = (
        "expected reward under the policy vs step"
        if baseline is None
        else f"difference to {baseline} on the same seed vs step"
    )
    band = "95% band; dotted: threshold" if baseline is None else "paired 95% band"
    fig.suptitle(f"{result.scenario.name}: {what} (mean of {seeds} seeds, {band})", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    out = _save(fig, path)
    plt.close(fig)
    return out


def plot_run(report: RunReport, path: str | Path) -> Path:
    """A run's trends over steps: each component's share of GRPO's denominator, c_q (median and
    10th-90th percentile), the groups at risk, and how far each estimator is from the run's own."""
    plt = _pyplot()
    steps = report.steps
    x = np.arange(len(steps))
    labels = [s.step for s in steps]
    marker = "." if len(steps) <= 50 else None
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
    ax = axes[0, 0]
    for name in report.components:
        ax.plot(x, [100 * s.share[name] for s in steps], marker=marker, label=name)
    ax.set_title("share of GRPO's denominator^2 (%, median group)", fontsize=10)
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    ax.plot(x, [s.c_q[2] for s in steps], color="C0", label="median")
    ax.fill_between(
        x,
        [s.c_q[1] for s in steps],
        [s.c_q[3] for s in steps],
        alpha=0.2,
        color="C0",
        label="10th-90th percentile",
    )
    ax.set_title("c_q (CorrGRPO advantage / GRPO's), groups with a reward spread", fontsize=10)
    ax.legend(fontsize=8)
    ax = axes[1, 0]
    for key, label in [
        ("singleton", "one rollout"),
        ("flat", "no reward spread"),
        ("collapsed", "collapsed"),
    ]:
        ax.plot(x, [100 * getattr(s, key) / max(s.groups, 1) for s in steps], marker=marker, label=label)
    ax.set_title("groups (% of the step's groups)", fontsize=10)
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    for i, name in enumerate(report.estimators):
        color = f"C{i}"
        ax.plot(x, [s.changes[name].rank for s in steps], color=color, label=f"{name}: rank agreement")
        ax.plot(
            x,
            [s.changes[name].flips for s in steps],
            color=color,
            linestyle="--",
            label=f"{name}: sign flips (share)",
        )
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"against the run's {report.run_estimator}", fontsize=10)
    if report.estimators:
        ax.legend(fontsize=8)
    every = max(1, len(steps) // 12)
    for ax in axes[1]:
        ax.set_xticks(x[::every], labels[::every])
        ax.set_xlabel("step")
    fig.suptitle(f"{report.source.path}", fontsize=11)
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out
