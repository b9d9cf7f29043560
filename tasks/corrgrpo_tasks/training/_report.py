"""What ``corrgrpo train`` writes: evals.csv, steps.csv, rewards.png, accuracy.png and report.md.

Intervals are 95% Student-t intervals over seeds (the mean of n seeds +- t_{0.975, n-1} s / sqrt(n));
paired differences subtract grpo's value on the same seed (same warm start, same sampling seed).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._records import RunRecords, load_csv, write_csv
from ._tasks import get_task

__all__ = ["area_under_curve", "interval", "load_csv", "median", "summarise", "write_outputs"]

# t_{0.975, df} for df = 1..30; beyond that the normal quantile is close enough.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
THRESHOLD_GAIN = 0.10  # on the success rate
SCORE_THRESHOLD_GAIN = 0.25  # on the total score (a finer signal than the 0/1 success)
DIAGNOSTICS = (
    "max_abs_advantage",
    "corrgrpo/c_q/mean",
    "corrgrpo/correlation_sum/mean",
    "frac_reward_zero_std",
)  # steps to threshold: first evaluation with success >= warm start + this


ZERO_SIGNAL = "corrgrpo/zero_signal_groups"  # the adapter's one zero-signal metric, every estimator alike
_DIAG_HEADER = (
    "estimator",
    "mean c_q",
    "c_q range (mean of step min/max)",
    "correlation sum",
    "covariance sum",
    "max abs advantage",
    "blow-ups",
    "grad norm (max)",
    "clipped",
    "zero-signal groups",
    "TRL frac_reward_zero_std",
    "entropy",
    "s/step",
    "rewards scored/s",
)


def median(values: Sequence[float]) -> float:
    """The median: the middle value, or the mean of the two middle values of an even count.

    >>> median([50, 50, 50, 50, 75, 75, 75, 75]), median([150, 250, 150, 225]), median([3])
    (62.5, 187.5, 3)
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("the median of no values")
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _or_dash(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def interval(values: Sequence[float]) -> tuple[float, float]:
    """(mean, 95% half-width over seeds); the half-width is NaN for one value.

    >>> interval([1.0, 2.0, 3.0])
    (2.0, 2.484...)
    """
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return mean, t * sd / math.sqrt(n)


def _fmt(mean: float, half: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if math.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"


def _by_run(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], list[Mapping[str, Any]]]:
    runs: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        runs[(str(row["estimator"]), int(row["seed"]))].append(row)
    for run in runs.values():
        run.sort(key=lambda r: int(r["step"]))
    return runs


def area_under_curve(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    """The held-out ``key`` averaged over training: the trapezoid area under its curve over the
    evaluated steps, divided by the steps covered (the value itself for a single evaluation).

    >>> area_under_curve([{"step": 0, "x": 0.0}, {"step": 10, "x": 1.0}, {"step": 20, "x": 1.0}], "x")
    0.75
    """
    points = [(int(r["step"]), float(r[key])) for r in rows]
    span = points[-1][0] - points[0][0]
    if span == 0:
        return points[-1][1]
    area = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in itertools.pairwise(points))
    return area / span


def _paired(values: Mapping[int, float], base: Mapping[int, float]) -> tuple[float, float, int, int] | None:
    """(mean, 95% half-width, seeds higher, seeds lower) of ``values - base`` over their common seeds."""
    diffs = [values[s] - base[s] for s in values if s in base]
    if not diffs:
        return None
    return (*interval(diffs), sum(d > 0 for d in diffs), sum(d < 0 for d in diffs))


BLOW_UP = 10.0  # a step whose largest |advantage| exceeds this counts as a blow-up (GRPO's bound for
# groups of 8 is 7/sqrt(8) = 2.47; Dr.GRPO's is the reward's range times 7/8)
MAX_GRAD_NORM = 1.0  # TRL's default clipping norm: a step whose pre-clip norm exceeds it was clipped


def summarise(
    evals: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]], task_name: str
) -> dict[str, Any]:
    """Per estimator: final held-out values and their area under the curve (mean, 95% half-width over
    seeds) and the paired differences of both against grpo; steps to threshold; training diagnostics
    (c_q, correlation and covariance sums, the largest |advantage|, blow-ups, gradient norms)."""
    task = get_task(task_name)
    keys = (task.success, *task.components, "score")
    runs = _by_run(evals)
    estimators = list(dict.fromkeys(str(r["estimator"]) for r in evals))
    per_run = {
        run: {
            "final": {k: float(rows[-1][k]) for k in keys},
            "auc": {k: area_under_curve(rows, k) for k in keys},
        }
        for run, rows in runs.items()
    }
    out: dict[str, Any] = {"keys": keys, "estimators": estimators, "rows": {}}
    train_runs = _by_run(steps)
    hits_by: dict[str, dict[int, int]] = {}
    for est in estimators:
        seeds = sorted(s for e, s in runs if e == est)
        row: dict[str, Any] = {"seeds": len(seeds), "paired": {}, "paired_auc": {}, "to_threshold": {}}
        for family in ("final", "auc"):
            row[family] = {k: interval([per_run[(est, s)][family][k] for s in seeds]) for k in keys}
            if est != "grpo":
                for key in keys:
                    found = _paired(
                        {s: per_run[(est, s)][family][key] for s in seeds},
                        {s: v[family][key] for (e, s), v in per_run.items() if e == "grpo"},
                    )
                    if found is not None:
                        row["paired" if family == "final" else "paired_auc"][key] = found
        for key, gain in ((task.success, THRESHOLD_GAIN), ("score", SCORE_THRESHOLD_GAIN)):
            hits: dict[int, int] = {}
            for s in seeds:
                rows = runs[(est, s)]
                target = float(rows[0][key]) + gain
                hit = next((int(r["step"]) for r in rows if float(r[key]) >= target), None)
                if hit is not None:
                    hits[s] = hit
            row["to_threshold"][key] = sorted(hits.values())
            if key == task.success:
                hits_by[est] = hits
        if est != "grpo" and "grpo" in hits_by:
            row["paired_threshold"] = _paired(
                {s: float(v) for s, v in hits_by[est].items()},
                {s: float(v) for s, v in hits_by["grpo"].items()},
            )
        tr = [r for s in seeds for r in train_runs.get((est, s), [])]
        advantages = [float(r.get("max_abs_advantage", 0.0)) for r in tr]
        row["max_abs_advantage"] = max(advantages, default=math.nan)
        row["blow_ups"] = sum(a > BLOW_UP for a in advantages)
        row["train_steps"] = len(tr)
        norms = [
            float(r["grad_norm"]) for r in tr if "grad_norm" in r and not math.isnan(float(r["grad_norm"]))
        ]
        row["clipped"] = sum(n > MAX_GRAD_NORM for n in norms) / len(norms) if norms else math.nan
        row["grad_norm_max"] = max(norms, default=math.nan)

        def mean_of(key: str, rows: Sequence[Mapping[str, Any]] = tr) -> float:
            vals = [float(r[key]) for r in rows if key in r and not math.isnan(float(r[key]))]
            return sum(vals) / len(vals) if vals else math.nan

        for key in (
            "corrgrpo/c_q/mean",
            "corrgrpo/c_q/min",
            "corrgrpo/c_q/max",
            "corrgrpo/correlation_sum/mean",
            "corrgrpo/covariance_sum/mean",
            "frac_reward_zero_std",
            ZERO_SIGNAL,
            "step_time",
            "grad_norm",
            "entropy",
        ):
            row[key] = mean_of(key)
        seconds = sum(float(r.get("reward_seconds", 0.0)) for r in tr)
        samples = sum(float(r.get("reward_samples", 0.0)) for r in tr)
        row["reward_samples_per_s"] = samples / seconds if seconds > 0 else math.nan
        out["rows"][est] = row
    return out


def _timing(records: RunRecords) -> str:
    """Each run's wall time (its last evaluation's ``wall_s``), and the whole invocation's when known."""
    runs = [max(float(r["wall_s"]) for r in rows) for rows in _by_run(records.evals).values()]
    text = f"runs took {min(runs):.0f}-{max(runs):.0f} s each ({sum(runs):.0f} s in all)" if runs else ""
    if records.wall_seconds > 0:
        text += f"; wall time {records.wall_seconds:.0f} s including the warm start"
    return text


def render_report(summary: Mapping[str, Any], records: RunRecords | None = None) -> str:
    """The markdown report of a :func:`summarise` result."""
    keys = summary["keys"]
    lines = ["# corrgrpo train report", ""]
    if records is not None:
        cfg = records.config
        warm = records.warm
        lines += [
            (
                f"Task `{cfg['task']}`; {warm.get('parameters', '?'):,} parameters"
                f" ({'tiny Qwen2' if cfg['model'] is None else cfg['model']}); warm start "
                f"{cfg['warm_steps']} SFT steps; {cfg['steps']} GRPO steps x {cfg['prompts_per_step']} prompts x "
                f"{cfg['num_generations']} completions, lr {cfg['lr']}, loss {cfg['loss_type']}; "
                f"{cfg['n_eval']} held-out prompts, greedy; {_timing(records)}."
            ),
            "",
        ]
        held = warm.get("held_out", {})
        lines += [
            "Warm start (step 0, the same for every run): "
            + ", ".join(f"{k} {held[k]:.3f}" for k in keys if k in held),
            "",
        ]
    seeds = max((r["seeds"] for r in summary["rows"].values()), default=0)
    note = "mean ± 95% interval over seeds" if seeds > 1 else "one seed"
    rows = summary["rows"]

    def table(title: str, cell: Any, which: Sequence[str]) -> list[str]:
        return [
            "",
            title,
            "",
            "| estimator | " + " | ".join(keys) + " |",
            "|---" * (len(keys) + 1) + "|",
            *(f"| {est} | " + " | ".join(cell(rows[est], k) for k in keys) + " |" for est in which),
        ]

    lines += table(f"## Final held-out values ({note})", lambda r, k: _fmt(*r["final"][k]), list(rows))[1:]
    lines += table(
        f"## Area under the held-out curve (the value averaged over training; {note})",
        lambda r, k: _fmt(*r["auc"][k]),
        list(rows),
    )
    legend = "estimator minus grpo on the same seed; (n+ m-): seeds where it is higher, lower"

    def diff(found: Any) -> str:
        m, h, up, down = found
        return f"{_fmt(m, h)} ({up}+ {down}-)"

    for family, title in (("paired", "final values"), ("paired_auc", "areas under the curve")):
        which = [e for e, r in rows.items() if r[family]]
        if which:
            lines += table(
                f"## Paired differences against grpo, {title} ({legend})",
                lambda r, k, f=family: diff(r[f][k]),
                which,
            )

    def reached(hits: Sequence[int], seeds: int) -> str:
        return f"{len(hits)}/{seeds}" + (f", {median(hits):g}" if hits else "")

    lines += [
        "",
        (
            f"## Steps to threshold (first evaluation with {keys[0]} >= warm start + {THRESHOLD_GAIN}, or score "
            f">= warm start + {SCORE_THRESHOLD_GAIN}: seeds that got there, median step; paired: {legend}, on "
            "seeds where both got there)"
        ),
        "",
        f"| estimator | {keys[0]} threshold | score threshold | paired steps to the {keys[0]} threshold |",
        "|---|---|---|---|",
    ]
    for est, row in rows.items():
        hits = row["to_threshold"]
        found = row.get("paired_threshold")
        lines.append(
            f"| {est} | {reached(hits[keys[0]], row['seeds'])} | {reached(hits['score'], row['seeds'])} | "
            f"{diff(found) if found else '-'} |"
        )
    lines += _diagnostics_section(rows, records)
    return "\n".join(lines)


def _diagnostics_section(rows: Mapping[str, Any], records: RunRecords | None) -> list[str]:
    """The report's training-diagnostics table, the audit table (code runs) and the note on both."""
    lines: list[str] = []
    lines += [
        "",
        (
            "## Training diagnostics (means over every step of every seed; c_q = CorrGRPO's advantage over "
            f"GRPO's in a group; blow-ups: steps whose largest |advantage| exceeds {BLOW_UP:g}; clipped: share "
            f"of steps whose gradient norm before clipping exceeds {MAX_GRAD_NORM:g})"
        ),
        "",
        "| " + " | ".join(_DIAG_HEADER) + " |",
        "|---" * len(_DIAG_HEADER) + "|",
    ]
    for est, row in rows.items():
        lines.append(
            f"| {est} | {row['corrgrpo/c_q/mean']:.2f} | {row['corrgrpo/c_q/min']:.2f}-"
            f"{row['corrgrpo/c_q/max']:.2f} | {row['corrgrpo/correlation_sum/mean']:.2f} | "
            f"{row['corrgrpo/covariance_sum/mean']:.2f} | {row['max_abs_advantage']:.2f} | "
            f"{row['blow_ups']}/{row['train_steps']} | {row['grad_norm']:.2f} ({row['grad_norm_max']:.1f}) | "
            f"{row['clipped']:.2f} | {_or_dash(row[ZERO_SIGNAL])} | {_or_dash(row['frac_reward_zero_std'])} | "
            f"{row['entropy']:.2f} | "
            f"{row['step_time']:.2f} | {row['reward_samples_per_s']:.0f} |"
        )
    if records is not None and records.audits:
        lines += [
            "",
            "## Audit of the scored RL samples (execution reward without passing the tests)",
            "",
            (
                "| estimator | seed | samples | distinct | accuracy 1 | runtime without accuracy | "
                "accuracy 1 but independent re-run fails | efficiency without accuracy |"
            ),
            "|---" * 8 + "|",
        ]
        for a in records.audits:
            lines.append(
                f"| {a['estimator']} | {a['seed']} | {a['samples']} | {a['distinct']} | {a['accuracy_1']} | "
                f"{a['runtime_without_accuracy']} | {a['accuracy_without_independent_pass']} | "
                f"{a['efficiency_without_accuracy']} |"
            )
    lines += [
        "",
        (
            "c_q and the sums describe each batch's groups (computed for every estimator, so runs are "
            "comparable); 'zero-signal groups' is the adapter's per-step count of groups whose advantages "
            "carry no signal, computed the same way for every estimator ('-' where the run did not log it); "
            "'TRL frac_reward_zero_std' is three different metrics by estimator (TRL's per-group std == 0 for "
            "grpo and dr_grpo, TRL's batch-level test, always 0, for gdpo, the adapter's all-advantages-zero "
            "for the others): do not compare it across estimators."
        ),
    ]
    return lines


def _plot(
    evals: Sequence[Mapping[str, Any]], keys: Sequence[str], path: Path, title: str, *, smooth: int = 1
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _by_run(evals)
    estimators = list(dict.fromkeys(str(r["estimator"]) for r in evals))
    cols = min(len(keys), 4)
    nrows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(max(4 * cols, 6.5), 3.2 * nrows + 0.4), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        for est in estimators:
            seeds = [s for e, s in runs if e == est]
            steps = sorted({int(r["step"]) for s in seeds for r in runs[(est, s)]})
            means, lows, highs = [], [], []
            for step in steps:
                vals = [
                    float(r[key])
                    for s in seeds
                    for r in runs[(est, s)]
                    if step - smooth < int(r["step"]) <= step and key in r and not math.isnan(float(r[key]))
                ]
                if not vals:
                    vals = [math.nan]
                m, h = interval(vals)
                means.append(m)
                lows.append(m - (0 if math.isnan(h) else h))
                highs.append(m + (0 if math.isnan(h) else h))
            (line,) = ax.plot(steps, means, label=est)
            if len(seeds) > 1:
                ax.fill_between(steps, lows, highs, alpha=0.15, color=line.get_color())
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def write_outputs(records: RunRecords, out: str | Path) -> str:
    """Write evals.csv, steps.csv, the two PNGs and report.md under ``out``; returns the report."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    task = get_task(records.config["task"])
    write_csv(folder / "evals.csv", records.evals)
    write_csv(folder / "steps.csv", records.steps)
    summary = summarise(records.evals, records.steps, task.name)
    report = render_report(summary, records)
    try:
        band = " (band: 95% interval over seeds)" if records.config["seeds"] > 1 else ""
        _plot(
            records.evals,
            [*task.components, "score"],
            folder / "rewards.png",
            f"held-out reward components, greedy{band}",
        )
        _plot(records.evals, [task.success], folder / "accuracy.png", f"held-out {task.success}{band}")
        _plot(
            records.steps,
            [*(f"rewards/{c}/mean" for c in task.components), *DIAGNOSTICS],
            folder / "training.png",
            f"training batches (sampled at T={records.config['temperature']}), 5-step windows",
            smooth=5,
        )
    except ImportError:
        report += "\n\n(no plots: matplotlib is not installed; pip install 'corrgrpo-core[cli]')"
    if records.audits:
        (folder / "audit.json").write_text(json.dumps(records.audits, indent=1))
    (folder / "report.md").write_text(report + "\n")
    return report
