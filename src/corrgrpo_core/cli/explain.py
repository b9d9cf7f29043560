"""``corrgrpo explain``: what GRPO's and CorrGRPO's denominators see in a reward batch.

Every number comes from the core's :func:`corrgrpo_core.group_stats`: the diagnostics of
:func:`corrgrpo_core.advantage_stats` and each estimator's advantages, on slices of whole groups (a
group-local estimator directly, GDPO, GDPO-corr and DARA in the passes of their formulas, an
estimator registered elsewhere with batch scope on the whole batch in one call), and the K x K
covariance and correlation matrices for display (the tests check that their sums equal the core's
covariance and correlation sums). This module reads, chooses and renders.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import corrgrpo_core as cc

from .blas import one_blas_thread
from .facts import default_estimators, in_reward_units
from .io import CliError, RewardBatch, read_rewards
from .tables import markdown_table

__all__ = [
    "EXAMPLE",
    "Explanation",
    "GroupView",
    "example_batch",
    "explain",
    "explain_file",
    "explain_shown",
    "group_table",
    "is_group_local",
    "overflow_check",
    "render_explanation",
]

Array = npt.NDArray[np.float64]

#: The paper's Figure 2: one group of four rollouts, three reward components on very different scales.
EXAMPLE = np.array([[0.10, 0.18, 0.80], [0.18, 0.10, 7.28], [0.82, 0.90, 8.00], [0.90, 0.82, 1.52]])


def example_batch() -> RewardBatch:
    return RewardBatch(
        scores=EXAMPLE.copy(),
        group_ids=np.zeros(4, dtype=np.int64),
        group_labels=("fig2",),
        components=("r1", "r2", "r3"),
        source="the paper's Figure 2 example",
    )


@dataclass(frozen=True)
class GroupView:
    """One group: its rows (file rows, 0-based), their scores and advantages under each estimator,
    and the display matrices of its weighted components."""

    label: str
    rows: npt.NDArray[np.integer[Any]]
    scores: Array
    advantages: dict[str, Array]
    covariance: Array
    correlation: Array
    covariance_sum: float
    correlation_sum: float
    c_q: float
    variance_share: Array
    zero_variance: int
    degenerate: bool
    max_abs_advantage: float


@dataclass(frozen=True)
class Explanation:
    """What ``corrgrpo explain`` prints. ``magnitude[e]`` is (mean, max) of abs(A) over every row;
    ``advantages[e]`` holds every row's advantage (file order)."""

    source: str
    n_rows: int
    n_groups: int
    components: tuple[str, ...]
    weights: Array
    estimators: tuple[str, ...]
    groups: tuple[GroupView, ...]
    summary: dict[str, float]
    mean_correlation: Array
    magnitude: dict[str, tuple[float, float]]
    advantages: dict[str, Array]
    max_group_size: int = 0


#: Rows per slice that :func:`corrgrpo_core.group_stats` hands the core at once (None: its default).
SLICE_ROWS: int | None = None


def is_group_local(name: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether an estimator's advantages for a group depend on that group alone (no batch-level
    statistic such as GDPO's batch z-score), as its registry entry declares (``scope`` and
    ``batch_scope_when``; see :meth:`corrgrpo_core.EstimatorSpec.group_local`)."""
    return cc.get_estimator(name).group_local(options)


def group_table(
    scores: Array,
    ids: npt.NDArray[np.integer[Any]],
    n_groups: int,
    *,
    weights: Array,
    nan_policy: cc.NanPolicy = "raise",
    detail: Sequence[int] = (),
    min_correlation_sum: float = 0.0,
    estimators: Sequence[str] = (),
    keep_advantages: bool = True,
) -> cc.GroupStats:
    """:func:`corrgrpo_core.group_stats` of a batch, its errors as one-line :class:`CliError`;
    numpy's OpenBLAS on one thread meanwhile (:func:`~corrgrpo_core.cli.blas.one_blas_thread`)."""
    try:
        with one_blas_thread():
            return cc.group_stats(
                scores,
                ids,
                n_groups=n_groups,
                weights=weights,
                nan_policy=nan_policy,
                min_correlation_sum=min_correlation_sum,
                estimators=estimators,
                matrices_for=detail,
                chunk_rows=SLICE_ROWS,
                keep_advantages=keep_advantages,
            )
    except (ValueError, TypeError, OverflowError) as err:
        raise CliError(f"cannot compute the diagnostics: {err}") from None


def overflow_check(
    source: str,
    components: Sequence[str],
    scores: Array,
    weights: Array,
    values: Sequence[Array],
    rows: npt.NDArray[np.integer[Any]] | None = None,
) -> None:
    """A clear error instead of NaN or inf tables when huge values overflow float64 statistics.

    Results must be finite, and NaN only where an input is missing (``inf - inf`` is an overflow).
    Called before anything is computed (``values`` empty), it refuses weighted values whose squares
    overflow: the core would refuse their covariance sum with a message that cannot name the file.
    ``rows``: the file row of each row of ``scores`` (None: file order), for the message.
    """
    too_big = _squares_overflow(scores, weights)
    if not too_big and all(math.isfinite(float(np.sum(v))) for v in values):
        return  # a finite sum: every value is finite
    missing = bool(np.isnan(scores).any())
    if not too_big and all(bool(np.all(np.isfinite(v) | (np.isnan(v) & missing))) for v in values):
        return
    magnitude = np.abs(np.nan_to_num(scores * weights, nan=0.0))
    at, cols = np.nonzero(magnitude == np.max(magnitude))
    first = 0 if rows is None else int(np.lexsort((cols, rows[at]))[0])  # the first in the file
    row, col = int(at[first] if rows is None else rows[at[first]]), int(cols[first])
    big = float(magnitude[at[first], col])
    name = components[int(col)]
    hint = f"--weights {name}={2.0 ** -np.floor(np.log2(big)):.3g}" if big > 0 else "--weights"
    raise CliError(
        f"{source}: values as large as {big:.3g} (component {name!r}, row {row + 1}) overflow the "
        f"float64 statistics (their squares pass 1.8e308); rescale that component, e.g. {hint}"
    )


def _squares_overflow(scores: Array, weights: Array) -> bool:
    """Whether some weighted value's square passes float64's largest (column by column, no copy)."""
    limit = math.sqrt(float(np.finfo(np.float64).max))
    if (
        scores.size == 0
        or max(float(np.max(scores)), -float(np.min(scores))) * np.max(np.abs(weights)) <= limit
    ):
        return False  # the common case, in two passes over the matrix (NaN: a missing value, look closer)
    for j in range(scores.shape[1]):
        column = scores[:, j]
        top = max(abs(float(np.fmax.reduce(column))), abs(float(np.fmin.reduce(column))))
        if top * abs(float(weights[j])) > limit:  # NaN (a column of missing values) compares False
            return True
    return False


def _check_options(estimators: Sequence[str], k: int, weights: Array | None) -> Array:
    known = cc.estimator_names()
    unknown = [e for e in estimators if e not in known]
    if unknown:
        raise CliError(f"unknown estimator(s) {unknown}; known: {', '.join(known)}")
    w = np.ones(k) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (k,):
        raise CliError(f"{w.size} weights for {k} reward components")
    return w


def explain(
    batch: RewardBatch,
    *,
    estimators: Sequence[str] | None = None,
    weights: Array | None = None,
    nan_policy: cc.NanPolicy = "raise",
    detail: Sequence[int] | None = None,
    keep_advantages: bool = True,
) -> Explanation:
    """Compute everything ``corrgrpo explain`` prints for ``batch``.

    ``detail`` lists the groups (indices into ``batch.group_labels``) whose matrices are kept for
    display (default: every group); the batch-wide numbers always cover every group. Every row's
    advantages are kept too (``Explanation.advantages``) unless ``keep_advantages`` is False (the
    command: memory for a large file does not then grow by one row vector per estimator).
    """
    estimators = default_estimators() if estimators is None else tuple(estimators)
    w = _check_options(estimators, len(batch.components), weights)
    shown = list(range(batch.n_groups)) if detail is None else sorted(set(detail))
    scores, ids = batch.scores, batch.group_ids
    with np.errstate(all="ignore"):
        overflow_check(batch.source, batch.components, scores, w, [], batch.rows)
        table = group_table(
            scores,
            ids,
            batch.n_groups,
            weights=w,
            nan_policy=nan_policy,
            detail=shown,
            estimators=estimators,
            keep_advantages=keep_advantages,
        )
        magnitude = table.advantage_magnitude
        results = [
            table.c_q,
            table.covariance_sum,
            table.mean_correlation,
            *map(np.asarray, magnitude.values()),
        ]
        overflow_check(
            batch.source,
            batch.components,
            scores,
            w,
            results + [m for g in shown for m in table.matrices[g]],
            batch.rows,
        )
    views = []
    for g in shown:
        rows = table.rows(g)
        at = np.searchsorted(table.shown_rows, rows)
        covariance, correlation = table.matrices[g]
        views.append(
            GroupView(
                label=batch.group_labels[g],
                rows=rows if batch.rows is None else batch.rows[rows],
                scores=scores[rows],
                advantages={e: table.shown_advantages[e][at] for e in estimators},
                covariance=covariance,
                correlation=correlation,
                covariance_sum=float(table.covariance_sum[g]),
                correlation_sum=float(table.correlation_sum[g]),
                c_q=float(table.c_q[g]),
                variance_share=table.variance_share[g],
                zero_variance=int(table.zero_variance_count[g]),
                degenerate=bool(table.degenerate[g]),
                max_abs_advantage=float(table.max_abs_advantage[g]),
            )
        )
    return Explanation(
        source=batch.source,
        n_rows=int(ids.size),
        n_groups=batch.n_groups,
        components=batch.components,
        weights=w,
        estimators=tuple(estimators),
        groups=tuple(views),
        summary=table.summary(batch.components),
        mean_correlation=table.mean_correlation,
        magnitude=magnitude,
        advantages=_in_file_order(table.advantages, batch.rows),
        max_group_size=int(table.sizes.max(initial=0)),
    )


def _in_file_order(values: dict[str, Array], rows: npt.NDArray[np.integer[Any]] | None) -> dict[str, Array]:
    """Every row's values of a batch whose rows are the file's ``rows`` (None: in file order), in file order."""
    if rows is None:
        return values
    out = {}
    for name, v in values.items():
        out[name] = np.empty_like(v)
        out[name][rows] = v
    return out


def explain_file(
    path: str | Path,
    *,
    group_col: str = "group",
    components: Sequence[str] | None = None,
    file_format: str | None = None,
    nan_policy: cc.NanPolicy = "raise",
    estimators: Sequence[str] | None = None,
    weights: Callable[[Sequence[str]], Array | None] = lambda names: None,
    max_groups: int = 10,
    plot_group: str | None = None,
    keep_advantages: bool = True,
) -> tuple[Explanation, int]:
    """:func:`explain_shown` of a reward file read whole (only the needed columns); returns the
    report and the index (in ``report.groups``) of ``plot_group`` (default: the first group).
    ``weights(names)`` gives the weights once the component names are known. The rows are read
    sorted by group: :func:`corrgrpo_core.group_stats` then neither sorts nor gathers them (an
    estimator registered elsewhere with batch scope, which it computes on the whole batch in one
    call, sees them in that order)."""
    batch = read_rewards(
        path,
        group_col=group_col,
        components=components,
        file_format=file_format,
        allow_nan=nan_policy == "ignore",
        group_order=True,
    )
    if batch.n_groups and batch.n_groups == batch.group_ids.size:
        raise CliError(
            f"{batch.source}: every group has one row ({batch.n_groups} rows, {batch.n_groups} distinct "
            f"values of {group_col!r}), so every advantage would be 0; is --group-col right? (it names "
            "the column that holds the prompt id)"
        )
    return explain_shown(
        batch,
        estimators=estimators,
        weights=weights(batch.components),
        nan_policy=nan_policy,
        max_groups=max_groups,
        plot_group=plot_group,
        keep_advantages=keep_advantages,
    )


def explain_shown(
    batch: RewardBatch,
    *,
    estimators: Sequence[str] | None = None,
    weights: Array | None = None,
    nan_policy: cc.NanPolicy = "raise",
    max_groups: int = 10,
    plot_group: str | None = None,
    keep_advantages: bool = True,
) -> tuple[Explanation, int]:
    """:func:`explain` keeping the first ``max_groups`` groups and ``plot_group`` for display; returns
    the report and the index of ``plot_group`` (default: the first group) in ``report.groups``."""
    group = 0
    if plot_group is not None:
        if plot_group not in batch.group_labels:
            raise CliError(f"--plot-group {plot_group!r} is not a group in the file")
        group = batch.group_labels.index(plot_group)
    detail = sorted({*range(min(max_groups, batch.n_groups)), group})
    report = explain(
        batch,
        estimators=estimators,
        weights=weights,
        nan_policy=nan_policy,
        detail=detail,
        keep_advantages=keep_advantages,
    )
    return report, detail.index(group)


def _fmt(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:.4f}"


def _share(share: float, groups: float) -> str:
    """A share of the groups as a count and a percentage."""
    return f"{share * groups:.0f} ({100 * share:.1f}%)"


def _matrix_table(names: Sequence[str], m: Array) -> str:
    return markdown_table(
        ["", *names], [[n, *(_fmt(v) for v in row)] for n, row in zip(names, m, strict=False)]
    )


def _dominance(name: str, share: float) -> str:
    """What a component with ``share`` (over 0.5) of GRPO's denominator^2 does to GRPO."""
    if share <= 1.0:
        amount = f"{name} alone is {100 * share:.1f}% of GRPO's denominator^2"
    else:  # the covariance sum subtracts negative covariances: one variance can exceed it
        amount = (
            f"{name}'s variance alone is {100 * share:.1f}% of GRPO's denominator^2 (more than all of it: "
            "negative covariances between components take away from the sum)"
        )
    return (
        f"{amount}, so GRPO scales every component by {name}'s spread; CorrGRPO's correlation sum "
        "counts each component once, whatever its scale"
    )


def render_explanation(ex: Explanation, *, max_groups: int = 10) -> str:
    """The text ``corrgrpo explain`` prints: per group, then for the whole batch."""
    names = list(ex.components)
    out = [
        (
            f"Reward batch: {ex.source}: {ex.n_rows} rollouts, {ex.n_groups} group(s), "
            f"{len(names)} components ({', '.join(names)})"
        ),
        "weights: " + ", ".join(f"{n}={w:g}" for n, w in zip(names, ex.weights, strict=False)),
        "",
    ]
    for view in ex.groups[:max_groups]:
        out += [
            f"## group {view.label} ({view.rows.size} rollouts)",
            "",
            (
                f"GRPO denominator^2 (covariance sum) {_fmt(view.covariance_sum)}; CorrGRPO correlation sum "
                f"{_fmt(view.correlation_sum)}; c_q = {_fmt(view.c_q)} (CorrGRPO advantage = c_q x GRPO's)"
            ),
        ]
        top = int(np.argmax(view.variance_share))
        if view.variance_share[top] > 0.5 and len(names) > 1:
            out.append(_dominance(names[top], float(view.variance_share[top])))
        if view.zero_variance:
            out.append(f"{view.zero_variance} component(s) do not vary in this group (zero row and column)")
        if view.degenerate:
            out.append(
                f"DEGENERATE: the total varies but the correlation sum is {_fmt(view.correlation_sum)} (< 0.01), "
                "so CorrGRPO divides the centred total by about sqrt(eps) and its advantages blow up "
                f"(largest abs(A) {_fmt(view.max_abs_advantage)}; components that cancel); "
                "min_correlation_sum=1 (corrgrpo train --min-correlation-sum 1) bounds them by the centred total (docs/method.md)"
            )
        if view.rows.size < 2:
            zero = all(view.advantages[e][0] == 0 for e in ex.estimators)
            out.append(
                "a group of one rollout: nothing to compare it with"
                + ("; every estimator here gives it advantage 0" if zero else "")
            )
        out += [
            "",
            markdown_table(
                ["component", "variance", "share of GRPO denominator^2"],
                [
                    [n, _fmt(view.covariance[i, i]), f"{100 * view.variance_share[i]:.1f}%"]
                    for i, n in enumerate(names)
                ],
            ),
            "",
            (
                "(the covariance sum is these variances plus the covariances between components; "
                "negative covariances let the shares add up to more than 100%)"
            ),
            "",
            "correlation matrix:",
            "",
            _matrix_table(names, view.correlation),
            "",
            "advantages:",
            "",
            markdown_table(
                ["row", *names, *ex.estimators],
                [
                    [
                        str(r + 1),
                        *(_fmt(v) for v in view.scores[i]),
                        *(_fmt(view.advantages[e][i]) for e in ex.estimators),
                    ]
                    for i, r in enumerate(view.rows)
                ],
            ),
            "",
        ]
    if ex.n_groups > max_groups:
        out += [f"({ex.n_groups - max_groups} more groups not shown; raise --max-groups to see them)", ""]
    out += _batch_section(ex)
    if len(ex.estimators) > 1:
        out += _magnitude_table(ex)
    return "\n".join(out)


def _batch_section(ex: Explanation) -> list[str]:
    """The batch's numbers, each group counted once."""
    s, names = ex.summary, list(ex.components)
    return [
        "## batch",
        "",
        markdown_table(
            ["metric", "value"],
            [
                ["groups", f"{s['groups']:.0f}"],
                ["groups of one rollout", f"{s['singleton_groups']:.0f}"],
                ["degenerate groups", _share(s["degenerate_groups"], s["groups"])],
                ["largest abs(A) in a degenerate group", _fmt(s["degenerate/max_abs_advantage"])],
                ["groups where no component varies (A = 0)", _share(s["zero_signal_groups"], s["groups"])],
                ["c_q mean / min / max", f"{s['c_q/mean']:.4f} / {s['c_q/min']:.4f} / {s['c_q/max']:.4f}"],
                ["mean covariance sum", _fmt(s["covariance_sum/mean"])],
                ["mean correlation sum", _fmt(s["correlation_sum/mean"])],
                ["mean zero-variance components", _fmt(s["zero_variance_components/mean"])],
            ],
        ),
        "",
        "mean share of GRPO's denominator^2 per component:",
        "",
        markdown_table(names, [[f"{100 * s[f'denominator_share/{n}']:.1f}%" for n in names]]),
        "",
        "mean within-group correlation matrix:",
        "",
        _matrix_table(names, ex.mean_correlation),
        "",
        (
            "(a component that does not vary in a group has a zero row and column there, so each diagonal "
            "entry is the share of groups in which that component varies)"
        ),
        "",
    ]


def _magnitude_table(ex: Explanation) -> list[str]:
    """Mean and max abs(A) per estimator, the unit of each, and a flag on large ones."""
    n = max(ex.max_group_size, 2)
    bound = (n - 1) / math.sqrt(n)  # GRPO's largest abs(A) in a group of n
    limit = 10 * bound * len(ex.components)  # a sum of K z-scores (GDPO) reaches K x GRPO's bound
    rows, large = [], []
    for e in ex.estimators:
        mean, top = ex.magnitude[e]
        if top > limit:
            large.append(e)
        scale = "reward units" if in_reward_units(e) else "unit-free"
        rows.append([e, _fmt(mean), _fmt(top) + (" LARGE" if top > limit else ""), scale])
    out = [
        "advantage magnitude per estimator:",
        "",
        markdown_table(["estimator", "mean abs(A)", "max abs(A)", "scale"], rows),
        "",
        (
            f"(GRPO's abs(A) is at most (n-1)/sqrt(n) = {bound:.3f} in a group of {n}, whatever the rewards; "
            "advantages in reward units grow with them: x10 the rewards, x10 the advantages)"
        ),
    ]
    if large:
        out.append(
            f"LARGE: {', '.join(large)} reach more than {limit:.3g} (10 x K x GRPO's bound); the policy "
            "loss multiplies each token's ratio by A, so these rows dominate a step (see the degenerate "
            "groups above; min_correlation_sum=1 bounds CorrGRPO's)"
        )
    return [*out, ""]
