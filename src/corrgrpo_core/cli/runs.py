"""``corrgrpo explain RUN``: a training run's reward logs, step by step.

A run is a folder of verl rollout dumps (``trainer.rollout_data_dir``: one ``<step>.jsonl`` per step,
rows with ``input``, ``output``, ``gts``, ``score``, ``step`` and the reward function's extra keys),
a folder of logs that ``corrgrpo train`` or anything else writes, or one CSV/TSV/JSONL/Parquet file with a
step column. A group is the rows of one step that share the group column (``input`` for verl dumps).

A verl dump is read one file (one step) at a time; a log file is read whole, only the needed
columns, and cut into steps. Each step becomes a small :class:`StepReport`. Every number that feeds an
advantage comes from the core (:func:`corrgrpo_core.compute_advantages`,
:func:`corrgrpo_core.advantage_stats`); this module only aggregates and compares.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import corrgrpo_core as cc

from .explain import group_table, overflow_check
from .facts import sees_only_total
from .io import (
    FORMATS,
    CliError,
    Columns,
    RewardBatch,
    batch_from_columns,
    column_names,
    numeric_column,
    probe_columns,
    read_columns,
)
from .tables import markdown_table

__all__ = [
    "Change",
    "RunReport",
    "RunSource",
    "StepReport",
    "TrainRun",
    "analyse_run",
    "find_run",
    "is_run",
    "render_run",
    "train_runs",
]

Array = npt.NDArray[np.float64]

_VERL_FILE = re.compile(r"^(\d+)\.jsonl$")
#: ``corrgrpo train``'s rollouts: ``rollouts/ESTIMATOR-seedS.csv``, one run per estimator and seed.
_TRAIN_FILE = re.compile(r"^(?P<estimator>.+)-seed(?P<seed>\d+)\.(csv|tsv|jsonl|parquet)$")
#: A correlation sum below this while the total varies: CorrGRPO amplifies by >= 1/sqrt(floor).
COLLAPSE = 0.25
#: The floor to suggest: the correlation sum of one uncorrelated component (docs/method.md).
SUGGESTED_FLOOR = 1.0
#: Suggest the floor when CorrGRPO weighs a collapsed group more than this many typical groups.
FLOOR_WEIGHT = 3.0
#: Switching matters when one component is more than this share of GRPO's denominator^2 (median group),
DOMINANT = 0.75
#: or CorrGRPO's rank agreement with the run falls below this, or its per-group scale spreads wider
#: (90th over 10th percentile) than this, or it flips more than 1% of the signs.
RANK_CHANGE = 0.9
SCALE_SPREAD = 2.0


@dataclass(frozen=True)
class RunSource:
    """Where a run's steps are: ``files`` in step order, and how to read them."""

    path: Path
    kind: str  # "verl" (rollout dumps) or "log"
    files: tuple[Path, ...]
    group_col: str
    step_col: str
    file_format: str | None = None  # --format, else each file's suffix

    def describe(self) -> str:
        if self.kind == "verl":
            return f"verl rollout dumps, {len(self.files)} step file(s)"
        if len(self.files) == 1 and self.files[0] == self.path:
            return "a log file with a step column"
        return f"{len(self.files)} log file(s)"


def _natural(path: Path) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def is_run(path: Path, *, step_col: str, file_format: str | None) -> bool:
    """A folder, or a file with a step column, is a run (a plain reward batch has no steps)."""
    if path.is_dir():
        return True
    if not step_col or not path.is_file():
        return False
    try:
        return step_col in column_names(path, file_format)
    except CliError:
        return False  # the batch reader reports the problem with the file


@dataclass(frozen=True)
class TrainRun:
    """One estimator and seed of a ``corrgrpo train`` output folder: its rollouts file."""

    estimator: str
    seed: int
    path: Path

    @property
    def label(self) -> str:
        return f"{self.estimator}, seed {self.seed}"


def train_runs(path: Path) -> list[TrainRun]:
    """The runs of a ``corrgrpo train`` output folder (or of its ``rollouts/``), one per estimator
    and seed, in estimator then seed order; [] when ``path`` holds no such files."""
    folder = path / "rollouts" if (path / "rollouts").is_dir() else path
    if not folder.is_dir():
        return []
    known = set(cc.estimator_names())
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []  # find_run reports the folder
    found = [
        TrainRun(m["estimator"], int(m["seed"]), p)
        for p in entries
        if (m := _TRAIN_FILE.match(p.name)) and m["estimator"] in known and p.is_file()
    ]
    return sorted(found, key=lambda r: (r.estimator, r.seed))


def find_run(path: Path, *, group_col: str | None, step_col: str, file_format: str | None) -> RunSource:
    """Recognise the layout: verl dumps (``<step>.jsonl``) or logs (CSV/TSV/JSONL/Parquet)."""
    if not path.is_dir():
        group = group_col or _group_column(path, file_format)
        return RunSource(path, "log", (path,), group, step_col, file_format)
    try:
        entries = sorted(p for p in path.iterdir() if p.is_file())
    except OSError as err:
        raise CliError(f"{path}: cannot list the folder ({err.strerror})") from None
    dumps = [(int(m.group(1)), p) for p in entries if (m := _VERL_FILE.match(p.name))]
    if dumps and file_format in (None, "jsonl"):
        files = tuple(p for _, p in sorted(dumps))
        return RunSource(path, "verl", files, group_col or "input", step_col, "jsonl")
    suffixes = {s for s, f in FORMATS.items() if file_format in (None, f)}
    logs = sorted((p for p in entries if p.suffix.lower() in suffixes), key=_natural)
    if not logs:
        raise CliError(
            f"{path}: is a folder with no verl rollout dumps (<step>.jsonl, from trainer.rollout_data_dir) "
            "and no CSV/TSV/JSONL/Parquet logs"
        )
    group = group_col or _group_column(logs[0], file_format)
    return RunSource(path, "log", tuple(logs), group, step_col, file_format)


#: Group columns tried in order when --group-col is not given (``input``: verl's dumps).
GROUP_COLUMNS = ("group", "group_id", "prompt_id", "uid", "prompt", "input")


def _group_column(path: Path, file_format: str | None) -> str:
    try:
        columns = probe_columns(path, file_format)
    except CliError:
        return "group"  # the reader reports the problem with the file
    return next((c for c in GROUP_COLUMNS if c in columns), "group")


@dataclass(frozen=True)
class Change:
    """How one estimator's advantages differ from the run's own on one step."""

    rank: float  # Spearman correlation over the step's rollouts
    flips: float  # share of rollouts whose advantage changes sign
    scale: float  # mean |A| over the run's mean |A|
    group_scale_p10: float  # per-group RMS(A) ratio, 10th and 90th percentile
    group_scale_p90: float


@dataclass(frozen=True)
class StepReport:
    step: str
    rows: int
    groups: int
    singleton: int
    flat: int  # groups whose total reward does not vary: no signal under any estimator
    collapsed: int  # components vary but the correlation sum is below COLLAPSE
    share: dict[str, float]  # median share of GRPO's denominator^2 per component (groups with spread)
    c_q: tuple[float, float, float, float, float]  # min, p10, median, p90, max over groups that vary
    correlation_sum: float  # mean over groups that vary
    max_blowup: float  # largest |A_corrgrpo| / |A_run| over groups, without a floor
    collapsed_weight: float  # largest such ratio of a collapsed group over the median group's
    changes: dict[str, Change]
    score_gap: float | None  # max |score - weighted sum of components|
    missing: int  # rows with a missing component
    degenerate: int = 0  # the core's degenerate groups (corr. sum < 0.01 while the total varies)
    degenerate_max_abs: float = 0.0  # their largest |CorrGRPO advantage| (no floor)


@dataclass
class RunReport:
    source: RunSource
    components: tuple[str, ...]
    weights: Array
    run_estimator: str
    baseline_from_score: bool
    estimators: tuple[str, ...]
    steps: list[StepReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    fitted_weights: Array | None = None


def _spearman(a: Array, b: Array) -> float:
    ra, rb = _ranks(a), _ranks(b)
    sa, sb = ra.std(), rb.std()
    if sa == 0 or sb == 0:
        return 1.0 if sa == sb else 0.0
    return float(np.mean((ra - ra.mean()) * (rb - rb.mean())) / (sa * sb))


def _ranks(x: Array) -> Array:
    """Average ranks (ties share their mean rank), vectorised."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    new = np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]])
    block = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], x.size)
    mean_rank = (starts + ends - 1) / 2.0
    out = np.empty(x.size)
    out[order] = mean_rank[block]
    return out


def _change(adv: Array, base: Array, ids: npt.NDArray[np.integer[Any]], n_groups: int) -> Change:
    flips = float(np.mean(np.sign(adv) * np.sign(base) < 0)) if adv.size else 0.0
    base_mean = float(np.mean(np.abs(base)))
    scale = float(np.mean(np.abs(adv))) / base_mean if base_mean > 0 else float("nan")
    rms_a = np.bincount(ids, adv**2, minlength=n_groups)
    rms_b = np.bincount(ids, base**2, minlength=n_groups)
    live = (rms_b > 0) & (rms_a > 0)
    ratio = np.sqrt(rms_a[live] / rms_b[live])
    p10, p90 = (float(v) for v in np.percentile(ratio, [10, 90])) if ratio.size else (np.nan, np.nan)
    return Change(_spearman(adv, base), flips, scale, p10, p90)


def _steps_of_file(
    cols: Columns, step_col: str, file_step: int | None
) -> Iterator[tuple[str, npt.NDArray[np.int64] | None]]:
    """(step label, rows) for each step in a file; a verl dump is one step (its name says which)."""
    if file_step is not None or step_col not in cols.data:
        yield (str(file_step) if file_step is not None else cols.source.stem), None
        return
    steps = numeric_column(cols, step_col, allow_nan=False)
    values, inverse = np.unique(steps, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=values.size))
    for i, value in enumerate(values):
        rows = order[(bounds[i - 1] if i else 0) : bounds[i]]
        yield (f"{value:g}", rows.astype(np.int64))


def _file_steps(
    source: RunSource, path: Path, want: Sequence[str], skipped: list[str]
) -> Iterator[tuple[str, Columns, npt.NDArray[np.int64] | None]]:
    """(step, columns, rows) for each step of one file: a verl dump is one step (its name says
    which); a log is read whole (only the needed columns) and cut by its step column."""
    match = _VERL_FILE.match(path.name) if source.kind == "verl" else None
    cols = read_columns(path, fmt=source.file_format, want=want, text=[source.group_col], skip_bad_lines=True)
    skipped += [f"{path.name} {s}" for s in cols.skipped]
    if cols.num_rows:
        for step, rows in _steps_of_file(
            cols, source.step_col, None if match is None else int(match.group(1))
        ):
            yield step, cols, rows


def _choose_components(source: RunSource, first: Path, given: Sequence[str] | None) -> tuple[str, ...]:
    if given:
        return tuple(given)
    kinds: dict[str, str] = {}
    for path in source.files:  # the first file with rows names the columns
        kinds = probe_columns(path, source.file_format)
        if kinds:
            first = path
            break
    if not kinds:
        raise CliError(f"{source.path}: no data rows in the run")
    skip = {"score", source.step_col, source.group_col}
    names = tuple(k for k, kind in kinds.items() if kind == "number" and k not in skip)
    if not names:
        if "score" in kinds:
            return ("score",)
        raise CliError(
            f"{first}: no numeric reward columns (besides {sorted(skip)}); columns are {list(kinds)}"
        )
    return names


def analyse_run(
    source: RunSource,
    *,
    components: Sequence[str] | None = None,
    weights: Array | None = None,
    estimators: Sequence[str] = ("corrgrpo", "gdpo"),
    run_estimator: str = "grpo",
    nan_policy: cc.NanPolicy = "raise",
    parse_weights: Callable[[Sequence[str]], Array | None] | None = None,
) -> RunReport:
    """Read the run step by step and compare each estimator with the run's own."""
    known = cc.estimator_names()
    bad = [e for e in (*estimators, run_estimator) if e not in known]
    if bad:
        raise CliError(f"unknown estimator(s) {bad}; known: {', '.join(known)}")
    names = _choose_components(source, source.files[0], components)
    if parse_weights is not None:  # --weights can name components only once they are known
        weights = parse_weights(names)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if w is not None and w.shape != (len(names),):
        raise CliError(f"{w.size} weights for {len(names)} reward components {list(names)}")
    skipped: list[str] = []
    want = [source.group_col, source.step_col, "score", *names]
    steps = (step for path in source.files for step in _file_steps(source, path, want, skipped))
    first = next(steps, None)
    if first is None:
        raise CliError(f"{source.path}: no data rows in the run")
    fitted = _fit_weights(first[1], first[2], names)
    if w is None:  # score is exactly a weighted sum: compare like with like
        w = np.ones(len(names)) if fitted is None else fitted
    compare = tuple(e for e in estimators if e != run_estimator)
    report = RunReport(
        source, names, w, run_estimator, False, compare, skipped=skipped, fitted_weights=fitted
    )
    for step, cols, rows in itertools.chain([first], steps):
        path = cols.source
        batch = batch_from_columns(
            cols,
            group_col=source.group_col,
            components=names,
            allow_nan=nan_policy == "ignore",
            rows=rows,
            source=str(path),
        )
        score = None
        if "score" in cols.data and "score" not in names:
            score = numeric_column(cols, "score", allow_nan=True, rows=rows)
        report.steps.append(_analyse_step(step, batch, w, report, score, nan_policy))
    return report


def _fit_weights(cols: Columns, rows: npt.NDArray[np.int64] | None, names: Sequence[str]) -> Array | None:
    """The weights w with score = sum_k w_k R_k on the first step, when some fit exactly (to 1e-6
    relative, rounded to 4 significant digits); None when score is something else."""
    n = cols.num_rows if rows is None else rows.size
    if "score" in names or "score" not in cols.data or n <= len(names):
        return None
    try:
        y = numeric_column(cols, "score", allow_nan=True, rows=rows)
        x = np.column_stack([numeric_column(cols, c, allow_nan=True, rows=rows) for c in names])
    except CliError:
        return None  # the step loop reports the problem with the file
    ok = np.isfinite(y) & np.all(np.isfinite(x), axis=1)
    if ok.sum() <= len(names):
        return None
    coef = np.linalg.lstsq(x[ok], y[ok], rcond=None)[0]
    coef = np.where(np.abs(coef) < 1e-9 * np.max(np.abs(coef)), 0.0, coef)  # not a term of score
    coef = np.array([float(f"{c:.4g}") for c in coef])
    if np.max(np.abs(x[ok] @ coef - y[ok])) > 1e-6 * max(1.0, float(np.max(np.abs(y[ok])))):
        return None
    return None if np.allclose(coef, 1.0) else coef


def _analyse_step(
    step: str, batch: RewardBatch, w: Array, report: RunReport, score: Array | None, nan_policy: cc.NanPolicy
) -> StepReport:
    ids, n_groups = batch.group_ids, batch.n_groups
    missing = int(np.sum(np.any(np.isnan(batch.scores), axis=1)))
    use_score = (
        score is not None and sees_only_total(report.run_estimator) and bool(np.all(np.isfinite(score)))
    )
    report.baseline_from_score = report.baseline_from_score or use_score
    with np.errstate(all="ignore"):
        overflow_check(batch.source, batch.components, batch.scores, w, [])
        table = group_table(batch.scores, ids, n_groups, weights=w, nan_policy=nan_policy)
        try:
            if use_score:
                assert score is not None
                base = cc.compute_advantages(score[:, None], ids, estimator=report.run_estimator)
            else:
                base = cc.compute_advantages(
                    batch.scores, ids, estimator=report.run_estimator, weights=w, nan_policy=nan_policy
                )
            advs = {
                e: np.asarray(
                    cc.compute_advantages(batch.scores, ids, estimator=e, weights=w, nan_policy=nan_policy),
                    dtype=np.float64,
                )
                for e in {*report.estimators, "corrgrpo"}
            }
        except (ValueError, TypeError, OverflowError) as err:
            raise CliError(f"{batch.source} (step {step}): the core rejected the batch: {err}") from None
        base = np.asarray(base, dtype=np.float64)
        overflow_check(
            batch.source,
            batch.components,
            batch.scores,
            w,
            [base, *advs.values(), table.c_q, table.covariance_sum],
        )
    varies = table.total_varies & (table.sizes > 1)
    c_q = table.c_q[varies]
    quant = tuple(float(v) for v in np.percentile(c_q, [0, 10, 50, 90, 100])) if c_q.size else (np.nan,) * 5
    collapsed = varies & (table.correlation_sum < COLLAPSE)
    rms_c = np.sqrt(np.bincount(ids, advs["corrgrpo"] ** 2, minlength=n_groups))
    rms_b = np.sqrt(np.bincount(ids, base**2, minlength=n_groups))
    live = rms_b > 0
    ratio = rms_c[live] / rms_b[live]
    blowup = float(np.max(ratio)) if ratio.size else float("nan")
    hit = collapsed[live]
    calm = ratio[~hit] if (~hit).any() else ratio  # a typical group: one that did not collapse
    typical = float(np.median(calm)) if calm.size else float("nan")
    weight = float(np.max(ratio[hit]) / typical) if hit.any() and typical > 0 else float("nan")
    gap = None
    if score is not None:
        total = np.sum(batch.scores * w, axis=1)
        ok = np.isfinite(score) & np.isfinite(total)
        gap = float(np.max(np.abs(score[ok] - total[ok]))) if ok.any() else None
    return StepReport(
        step=step,
        rows=int(ids.size),
        groups=n_groups,
        singleton=int(np.sum(table.sizes < 2)),
        flat=int(np.sum(~table.total_varies & (table.sizes > 1))),
        collapsed=int(np.sum(collapsed)),
        share={
            n: float(np.median(table.variance_share[varies, i])) if varies.any() else float("nan")
            for i, n in enumerate(batch.components)
        },
        c_q=quant,  # type: ignore[arg-type]
        correlation_sum=float(np.mean(table.correlation_sum[varies])) if varies.any() else float("nan"),
        max_blowup=blowup,
        collapsed_weight=weight,
        changes={e: _change(advs[e], base, ids, n_groups) for e in report.estimators},
        score_gap=gap,
        missing=missing,
        degenerate=int(np.sum(table.degenerate)),
        degenerate_max_abs=float(np.max(table.max_abs_advantage[table.degenerate], initial=0.0)),
    )


# --------------------------------------------------------------------------------------------------
# Text


def _finite(values: Sequence[float] | Array) -> Array:
    arr = np.asarray(values, dtype=np.float64)
    return arr[np.isfinite(arr)]


def _nanmedian(values: Sequence[float] | Array) -> float:
    arr = _finite(values)
    return float(np.median(arr)) if arr.size else float("nan")


def _nanmax(values: Sequence[float] | Array) -> float:
    arr = _finite(values)
    return float(np.max(arr)) if arr.size else float("nan")


def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f}%"


def _shown(steps: list[StepReport], limit: int) -> list[StepReport]:
    if len(steps) <= limit:
        return steps
    picks = np.unique(np.linspace(0, len(steps) - 1, max(limit, 2)).round().astype(int))
    return [steps[i] for i in picks]


def _share_lines(r: RunReport) -> tuple[list[str], list[str]]:
    """How the components share GRPO's denominator: (lines, reasons switching matters)."""
    names = list(r.components)
    share = {n: _nanmedian([s.share[n] for s in r.steps]) for n in names}
    top = max(share, key=lambda n: share[n] if np.isfinite(share[n]) else -1)
    if len(names) == 1:
        return [
            (
                f"- One reward component ({names[0]}): every correlation sum is 1, so CorrGRPO is Dr.GRPO "
                "here (no division by the group's spread). It reweights groups, not components; log the reward "
                "components (verl: trainer.use_v1=False dumps the reward function's extra keys) to compare more."
            )
        ], []
    if share[top] > DOMINANT:
        over = (
            " (more than all of it: negative covariances between components take away from the sum)"
            if share[top] > 1
            else ""
        )
        return [
            (
                f"- {top}'s variance is {100 * share[top]:.1f}% of GRPO's denominator^2 in the median group{over}: "
                f"GRPO divides every component by {top}'s spread, so the other components "
                f"({', '.join(n for n in names if n != top)}) barely move the update. CorrGRPO's correlation sum "
                "counts each component once."
            )
        ], [f"{top}'s variance is {100 * share[top]:.0f}% of GRPO's denominator^2"]
    return [
        f"- No component dominates GRPO's denominator (largest median share {100 * share[top]:.0f}%, {top})."
    ], []


def _corrgrpo_lines(r: RunReport) -> tuple[list[str], list[str]]:
    """What CorrGRPO would change against the run's estimator: (lines, reasons switching matters)."""
    if "corrgrpo" not in r.estimators:
        return [], []
    steps = r.steps
    ranks = np.array([s.changes["corrgrpo"].rank for s in steps])
    flips = np.array([s.changes["corrgrpo"].flips for s in steps])
    p10 = _nanmedian([s.changes["corrgrpo"].group_scale_p10 for s in steps])
    p90 = _nanmedian([s.changes["corrgrpo"].group_scale_p90 for s in steps])
    spread = p90 / p10 if p10 > 0 else float("inf")
    lines = [
        (
            f"- CorrGRPO against the run's {r.run_estimator}: rank agreement {_nanmedian(ranks):.3f} "
            f"(median over steps; 1 = same order of rollouts across the batch), sign flips "
            f"{100 * np.mean(flips):.2f}% of rollouts, groups rescaled by {p10:.2f}x to {p90:.2f}x "
            "(10th-90th percentile)."
        )
    ]
    if _nanmedian(ranks) < RANK_CHANGE or spread > SCALE_SPREAD or np.mean(flips) > 0.01:
        return lines, ["CorrGRPO reorders or reweights the rollouts"]
    return lines, []


def _collapse_lines(steps: Sequence[StepReport]) -> tuple[list[str], bool]:
    """Groups whose correlation sum collapses: (lines, whether a floor is needed)."""
    collapsed = sum(s.collapsed for s in steps)
    if not collapsed:
        return [], False
    worst = _nanmax([s.collapsed_weight for s in steps])
    needs_floor = worst > FLOOR_WEIGHT
    where = f"{collapsed} group(s) in {sum(s.collapsed > 0 for s in steps)} step(s)"
    return [
        f"- {where} have anti-correlated components whose correlation sum collapses below {COLLAPSE}: "
        f"CorrGRPO without a floor weighs them up to {worst:.1f}x a typical group of their step "
        "(against the run's advantages). "
        + (
            f"Set min_correlation_sum={SUGGESTED_FLOOR:g}."
            if needs_floor
            else f"That is within {FLOOR_WEIGHT:g}x; a floor (min_correlation_sum={SUGGESTED_FLOOR:g}) is optional."
        )
    ], needs_floor


def _data_lines(r: RunReport) -> list[str]:
    """What the run's data lacks or adds: flat and one-row groups, missing values, score against the components."""
    steps = r.steps
    names = list(r.components)
    groups = sum(s.groups for s in steps)
    lines: list[str] = []
    flat = sum(s.flat for s in steps)
    single = sum(s.singleton for s in steps)
    if groups and flat / groups > 0.2:
        lines.append(
            f"- {100 * flat / groups:.0f}% of groups have no reward spread (every rollout scored the same): "
            "no estimator learns from them (DAPO's dynamic sampling would drop them)."
        )
    if single:
        lines.append(
            f"- {single} group(s) of one rollout: no baseline to compare with; check the rollouts per prompt "
            f"(verl: actor_rollout_ref.rollout.n) or the group column ({r.source.group_col!r})."
        )
    missing = sum(s.missing for s in steps)
    if missing:
        lines.append(
            f"- {missing} rollout(s) miss a component; they are left out of that component's statistics."
        )
    gaps = [s.score_gap for s in steps if s.score_gap is not None]
    if r.fitted_weights is not None and np.array_equal(r.weights, r.fitted_weights):
        fitted = ",".join(f"{n}={v:.4g}" for n, v in zip(names, r.fitted_weights, strict=False))
        lines.append(
            f"- score is exactly the weighted sum of the components with {fitted}; those are the weights used "
            "here (override with --weights)."
        )
    if gaps and max(gaps) > 1e-6:
        lines.append(
            f"- score is not the weighted sum of the components (off by up to {max(gaps):.3g}): the run's "
            "advantages used score, the other estimators use the components, so part of the difference "
            "comes from what score adds (penalties, other terms)."
        )
    return lines


def _switch_options(names: Sequence[str], weights: Array, needs_floor: bool) -> list[str]:
    """The settings that switch a verl or TRL run to CorrGRPO."""
    keys = "[" + ",".join(names) + "]"
    w_list = "[" + ", ".join(f"{v:.4g}" for v in weights) + "]"
    floor = f", min_correlation_sum: {SUGGESTED_FLOOR:g}" if needs_floor else ""
    return [
        "To switch (verl, with this project's plugin):",
        f"  algorithm.adv_estimator=corrgrpo +algorithm.reward_keys='{keys}'"
        + (f" +algorithm.reward_weights='{w_list}'" if not np.all(weights == 1) else "")
        + (f" +algorithm.estimator_kwargs='{{{floor[2:]}}}'" if floor else "")
        + " trainer.v1.trainer_mode=corrgrpo",
        'TRL: CorrGRPOConfig(advantage_estimator="corrgrpo"'
        + (f", reward_weights={w_list}" if not np.all(weights == 1) else "")
        + (f", advantage_min_correlation_sum={SUGGESTED_FLOOR:g}" if floor else "")
        + ")",
    ]


def _verdict(r: RunReport) -> list[str]:
    """The plain-words summary: does switching matter for this run, and what to set."""
    steps = r.steps
    share_lines, share_reasons = _share_lines(r)
    change_lines, change_reasons = _corrgrpo_lines(r)
    collapse_lines, needs_floor = _collapse_lines(steps)
    lines = [*share_lines, *change_lines, *collapse_lines, *_data_lines(r)]
    reasons = [*share_reasons, *change_reasons]
    groups = sum(s.groups for s in steps)
    varying = groups - sum(s.flat + s.singleton for s in steps)
    verdict = (
        f"Switching matters for this run: {'; '.join(reasons)}."
        if reasons
        else "Switching would change little in this run: the estimators rank and scale its rollouts alike."
    )
    if not varying:
        verdict = "No group in this run has a reward spread: no estimator would learn from it."
    return [verdict, "", *lines, "", *_switch_options(list(r.components), r.weights, needs_floor)]


def _run_table(steps: Sequence[StepReport], names: Sequence[str]) -> str:
    """The run's numbers over every step."""
    groups = sum(s.groups for s in steps)
    return markdown_table(
        ["metric", "value"],
        [
            ["steps", str(len(steps))],
            ["groups of one rollout", f"{sum(s.singleton for s in steps)} of {groups}"],
            ["groups without reward spread", f"{sum(s.flat for s in steps)} of {groups}"],
            [f"collapsed groups (corr. sum < {COLLAPSE})", str(sum(s.collapsed for s in steps))],
            [
                "degenerate groups (corr. sum < 0.01, total varies): count, largest abs(A)",
                f"{sum(s.degenerate for s in steps)}, {_f(max((s.degenerate_max_abs for s in steps), default=0.0), 1)}",
            ],
            [
                "largest CorrGRPO / run advantage, per group (no floor)",
                _f(float(_nanmax([s.max_blowup for s in steps])), 2),
            ],
            [
                "heaviest collapsed group (x a typical group)",
                _f(float(_nanmax([s.collapsed_weight for s in steps])), 2),
            ],
            *[
                [
                    f"median share of GRPO denominator^2: {n}",
                    _pct(_nanmedian([s.share[n] for s in steps])),
                ]
                for n in names
            ],
            ["c_q median (of step medians)", _f(float(_nanmedian([s.c_q[2] for s in steps])))],
        ],
    )


def render_run(r: RunReport, *, max_steps: int = 20) -> str:
    """The text ``corrgrpo explain RUN`` prints."""
    steps = r.steps
    names = list(r.components)
    rows = sum(s.rows for s in steps)
    groups = sum(s.groups for s in steps)
    base = f"{r.run_estimator} on score" if r.baseline_from_score else f"{r.run_estimator} on the components"
    out = [
        f"Run: {r.source.path}: {r.source.describe()}; {len(steps)} step(s), {rows} rollouts, {groups} groups",
        (
            f"groups: rows of one step sharing {r.source.group_col!r}; components: {', '.join(names)}; "
            f"weights: {', '.join(f'{n}={v:g}' for n, v in zip(names, r.weights, strict=False))}"
        ),
        f"the run's own advantages: {base}; compared: {', '.join(r.estimators) or 'none'}",
    ]
    if r.skipped:
        more = f" (and {len(r.skipped) - 3} more)" if len(r.skipped) > 3 else ""
        out.append(f"skipped {len(r.skipped)} malformed line(s): {'; '.join(r.skipped[:3])}{more}")
    shown = _shown(steps, max_steps)
    out += ["", "## per step", ""]
    if len(shown) < len(steps):
        out += [f"({len(shown)} of {len(steps)} steps, evenly spaced; raise --max-steps to see more)", ""]
    out.append(
        markdown_table(
            [
                "step",
                "rollouts",
                "groups",
                "one rollout",
                "no spread",
                "collapsed",
                *(f"share {n}" for n in names),
                "c_q p10 / median / p90",
                "corr. sum",
            ],
            [
                [
                    s.step,
                    str(s.rows),
                    str(s.groups),
                    str(s.singleton),
                    str(s.flat),
                    str(s.collapsed),
                    *(_pct(s.share[n]) for n in names),
                    f"{_f(s.c_q[1])} / {_f(s.c_q[2])} / {_f(s.c_q[3])}",
                    _f(s.correlation_sum),
                ]
                for s in shown
            ],
        )
    )
    out += [
        "",
        (
            "(share: a component's variance over GRPO's denominator^2, the covariance sum, in the median group; shares pass 100% "
            "when components are negatively correlated. collapsed: the components vary but their correlation "
            f"sum is below {COLLAPSE}. c_q and corr. sum: over groups with a reward spread.)"
        ),
    ]
    if r.estimators:
        out += [
            "",
            (
                f"advantages against the run's ({base}): rank agreement (Spearman over the step's rollouts), "
                "sign flips (share of rollouts), scale (mean |A| ratio) and per-group scale (10th-90th percentile):"
            ),
            "",
            markdown_table(
                ["step", "estimator", "rank agreement", "sign flips", "scale", "group scale p10-p90"],
                [
                    [
                        s.step,
                        e,
                        _f(c.rank),
                        _pct(c.flips),
                        _f(c.scale),
                        f"{_f(c.group_scale_p10)}-{_f(c.group_scale_p90)}",
                    ]
                    for s in shown
                    for e, c in s.changes.items()
                ],
            ),
        ]
    out += ["", "## run", "", _run_table(steps, names)]
    out += ["", "## verdict", "", *_verdict(r), ""]
    return "\n".join(out)
