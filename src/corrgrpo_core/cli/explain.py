"""``corrgrpo explain``: what GRPO's and CorrGRPO's denominators see in a reward batch.

Every number that feeds an advantage comes from the core: the diagnostics from
:func:`corrgrpo_core.advantage_stats`, the advantages from :func:`corrgrpo_core.compute_advantages`
(a group-local estimator on slices of whole groups, any other on the whole batch in one call). The
K x K covariance and correlation matrices are computed here for display only; the tests check that
their sums equal the core's covariance and correlation sums.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import corrgrpo_core as cc

from .io import CliError, RewardBatch, markdown_table, read_rewards

__all__ = [
    "EXAMPLE",
    "Explanation",
    "GroupTable",
    "GroupView",
    "example_batch",
    "explain",
    "explain_file",
    "explain_shown",
    "group_matrices",
    "group_table",
    "is_group_local",
    "overflow_check",
    "render_explanation",
    "whole_group_ranges",
]

Array = npt.NDArray[np.float64]

#: The paper's Figure 2: one group of four rollouts, three reward components on very different scales.
EXAMPLE = np.array([[0.10, 0.18, 0.80], [0.18, 0.10, 7.28], [0.82, 0.90, 8.00], [0.90, 0.82, 1.52]])
DEFAULT_ESTIMATORS = ("grpo", "corrgrpo", "gdpo")
# Same scale-relative test the core uses for "does not vary" (64 float64 epsilons).
_ZERO_VAR_RTOL = 64.0 * float(np.finfo(np.float64).eps)


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
    rows: npt.NDArray[np.int64]
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


def group_matrices(x: Array, sizes: npt.NDArray[np.int64]) -> tuple[Array, Array]:
    """``(G, K, K)`` sample covariance and Pearson matrices of groups of consecutive rows
    (``sizes[g]`` rows in group g), vectorised over groups.

    Missing (NaN) entries are left out: means over each component's present values, products
    over the rows where both are present. Components that do not vary in a group (the core's
    scale-relative test) get zero rows and columns in its correlation matrix, as in CorrGRPO.
    """
    k, present = x.shape[1], sizes > 0
    starts = (np.cumsum(sizes) - sizes)[present]

    def sums(v: npt.NDArray[Any]) -> Array:  # per group, over its rows (reduceat: rows are sorted)
        out = np.zeros(sizes.size)
        out[present] = np.add.reduceat(v, starts) if starts.size else 0.0
        return out

    xt = np.ascontiguousarray(x.T)  # one contiguous row per component
    valid = ~np.isnan(xt)
    has_nan = not bool(valid.all())
    clean = np.where(valid, xt, 0.0) if has_nan else xt
    count = np.stack([sums(v) for v in valid]) if has_nan else np.tile(sizes.astype(np.float64), (k, 1))
    centred = clean - np.repeat(np.stack([sums(c) for c in clean]) / np.maximum(count, 1), sizes, axis=1)
    if has_nan:
        centred[~valid] = 0.0
    cov = np.zeros((sizes.size, k, k))
    sum_sq = np.zeros((k, sizes.size))
    for a in range(k):
        for b in range(a, k):
            pairs = sums(valid[a] & valid[b]) if has_nan else count[a]
            total = sums(centred[a] * centred[b])
            cov[:, a, b] = cov[:, b, a] = np.where(pairs > 1, total / np.maximum(pairs - 1, 1), 0.0)
            if a == b:
                sum_sq[a] = total
    varies = (count > 1) & (sum_sq > _ZERO_VAR_RTOL**2 * np.stack([sums(c * c) for c in clean]))
    diag = np.diagonal(cov, axis1=1, axis2=2)
    inv = np.where(varies.T, 1.0 / np.sqrt(np.where(varies.T, diag, 1.0)), 0.0)
    return cov, cov * inv[:, :, None] * inv[:, None, :]


@dataclass(frozen=True)
class _GroupStats:
    """Per-group diagnostics from :func:`corrgrpo_core.advantage_stats` (index = group)."""

    covariance_sum: Array
    correlation_sum: Array
    c_q: Array
    variance_share: Array
    zero_variance: npt.NDArray[np.int64]
    degenerate: npt.NDArray[np.bool_]
    total_varies: npt.NDArray[np.bool_]

    @staticmethod
    def zeros(n_groups: int, k: int) -> _GroupStats:
        n, z = n_groups, np.zeros
        return _GroupStats(z(n), z(n), z(n), z((n, k)), z(n, np.int64), z(n, np.bool_), z(n, np.bool_))

    def part(self, lo: int, hi: int) -> _GroupStats:
        """Groups [lo, hi): views, written through."""
        return _GroupStats(*(getattr(self, f.name)[lo:hi] for f in dataclasses.fields(_GroupStats)))


@dataclass(frozen=True)
class GroupTable(_GroupStats):
    """Per-group diagnostics of a batch (index g = group g), from :func:`corrgrpo_core.advantage_stats`
    run over slices of whole groups, so the core's temporaries are bounded by a slice, not by the
    batch; ``advantages[e]`` holds every row's advantage under estimator e (file order).

    ``order``/``starts``/``sizes`` give each group's rows (``order[starts[g]:starts[g] + sizes[g]]``).
    """

    sizes: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]
    mean_correlation: Array
    matrices: dict[int, tuple[Array, Array]]
    advantages: dict[str, Array]

    def rows(self, g: int) -> npt.NDArray[np.int64]:
        return self.order[self.starts[g] : self.starts[g] + self.sizes[g]]

    def summary(self, names: Sequence[str]) -> dict[str, float]:
        """The batch numbers, each group counted once (the keys of ``AdvantageStats.summary``)."""
        out = {
            "groups": float(self.sizes.size),
            "singleton_groups": float(np.sum(self.sizes < 2)),
            "degenerate_groups": float(np.sum(self.degenerate)),
            "c_q/mean": float(np.mean(self.c_q)),
            "c_q/min": float(np.min(self.c_q)),
            "c_q/max": float(np.max(self.c_q)),
            "correlation_sum/mean": float(np.mean(self.correlation_sum)),
            "covariance_sum/mean": float(np.mean(self.covariance_sum)),
            "zero_variance_components/mean": float(np.mean(self.zero_variance)),
        }
        for i, name in enumerate(names):
            out[f"denominator_share/{name}"] = float(np.mean(self.variance_share[:, i]))
        return out


#: Rows per slice handed to the core at once (its temporaries are a few times a slice).
SLICE_ROWS = 1 << 16
#: Bits of magnitude that one call to the core may span: it scales a batch by one power of two, so
#: a group 2**-256 below the batch's largest value still has normal squares.
SCALE_BITS = 256


def whole_group_ranges(sizes: npt.NDArray[np.int64], rows: int) -> list[tuple[int, int]]:
    """Ranges [lo, hi) of consecutive groups (sizes given) of about ``rows`` rows each."""
    n_groups = sizes.size
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if n_groups else 0
    cuts = np.unique(np.searchsorted(ends, np.arange(rows, total, rows)))
    bounds = [0, *[int(c) + 1 for c in cuts if c + 1 < n_groups], n_groups]
    return [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


def is_group_local(name: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether an estimator's advantages for a group depend on that group alone (no batch-level
    statistic such as GDPO's batch z-score), as its registry entry declares (``scope`` and
    ``batch_scope_when``; see :meth:`corrgrpo_core.EstimatorSpec.group_local`)."""
    return cc.get_estimator(name).group_local(options)


# --------------------------------------------------------------------------------------------------
# Pieces of whole groups on one scale.


@dataclass(frozen=True)
class _Piece:
    """Some groups of a slice (``groups``: slice-local indices, ``None`` = all) and their rows."""

    groups: npt.NDArray[np.int64] | None
    rows: npt.NDArray[np.bool_] | None
    ids: npt.NDArray[np.int64]
    unit: float  # a power of two near the piece's largest weighted magnitude


def _scale_pieces(x: Array, sizes: npt.NDArray[np.int64], weights: Array) -> list[_Piece]:
    """The groups of a slice (rows sorted by group, ``sizes`` rows each) split by magnitude so that
    no call spans more than :data:`SCALE_BITS` bits: the core scales each call by one power of two,
    and a group of 1e-162 next to one of 1e34 would otherwise lose its squares below float64's
    range. Usually one piece (no copy)."""
    ids = np.repeat(np.arange(sizes.size), sizes)
    row_top = np.zeros(x.shape[0])  # column by column: a reduction along rows of K is slow
    for j in range(x.shape[1]):
        row_top = np.fmax(row_top, np.abs(x[:, j]) * abs(float(weights[j])))
    top, present = np.zeros(sizes.size), sizes > 0
    top[present] = np.fmax.reduceat(row_top, (np.cumsum(sizes) - sizes)[present])
    exponent = np.frexp(top)[1]
    high = int(exponent.max(initial=0))
    exponent[top == 0] = high  # a group of zeros has no scale: it goes with any piece
    bucket = (high - exponent) // SCALE_BITS  # 0: within SCALE_BITS bits of the largest
    if bucket.size == 0 or bucket.min() == bucket.max():
        return [_Piece(None, None, ids, math.ldexp(1.0, high))]
    pieces = []
    for b in np.unique(bucket):
        groups = np.flatnonzero(bucket == b)
        rows = (bucket == b)[ids]
        unit = math.ldexp(1.0, int(exponent[groups].max()))
        pieces.append(_Piece(groups, rows, np.searchsorted(groups, ids[rows]), unit))
    return pieces


def _slice_stats(
    x: Array,
    pieces: Sequence[_Piece],
    out: _GroupStats,
    *,
    weights: Array,
    nan_policy: cc.NanPolicy,
    min_correlation_sum: float,
) -> tuple[Array, Array]:
    """:func:`corrgrpo_core.advantage_stats` of each group of a slice (rows sorted by group), piece
    by piece, written into ``out``; returns the display matrices (covariance, correlation)."""
    n, k = out.c_q.size, x.shape[1]
    covariance, correlation = np.zeros((n, k, k)), np.zeros((n, k, k))
    for piece in pieces:
        sub = x if piece.rows is None else x[piece.rows]
        try:
            st = cc.advantage_stats(
                sub,
                piece.ids,
                weights=weights,
                nan_policy=nan_policy,
                min_correlation_sum=min_correlation_sum,
            )
        except (ValueError, TypeError, OverflowError) as err:
            raise CliError(f"cannot compute the diagnostics: {err}") from None
        first = np.flatnonzero(np.diff(piece.ids, prepend=-1))
        local = piece.ids[first]  # the piece's groups that have rows
        at = local if piece.groups is None else piece.groups[local]
        out.covariance_sum[at] = np.asarray(st.covariance_sum)[first]
        out.correlation_sum[at] = np.asarray(st.correlation_sum)[first]
        out.c_q[at] = np.asarray(st.c_q)[first]
        out.variance_share[at] = np.asarray(st.variance_share)[first]
        out.zero_variance[at] = np.asarray(st.zero_variance_count)[first]
        out.degenerate[at] = np.asarray(st.degenerate)[first]
        out.total_varies[at] = np.asarray(st.total_varies)[first]
        del st
        # scaled by a power of two (exact) so that tiny groups keep their correlations
        cov, corr = group_matrices(sub * (weights / piece.unit), np.bincount(piece.ids)[local])
        covariance[at] = cov * piece.unit * piece.unit
        correlation[at] = corr
    return covariance, correlation


def _advantages(x: Array, ids: npt.NDArray[np.int64], name: str, options: dict[str, Any]) -> Array:
    try:
        adv = cc.compute_advantages(x, ids, estimator=name, **options)
    except (ValueError, TypeError, OverflowError) as err:
        raise CliError(f"estimator {name!r} rejected the batch: {err}") from None
    return np.asarray(adv, dtype=np.float64)


def _slice_advantages(x: Array, pieces: Sequence[_Piece], name: str, options: dict[str, Any]) -> Array:
    """A group-local estimator's advantages over a slice, piece by piece."""
    if len(pieces) == 1:
        return _advantages(x, pieces[0].ids, name, options)
    out = np.empty(x.shape[0], dtype=np.float64)
    for piece in pieces:
        out[piece.rows] = _advantages(x[piece.rows], piece.ids, name, options)
    return out


def group_table(
    scores: Array,
    ids: npt.NDArray[np.int64],
    n_groups: int,
    *,
    weights: Array,
    nan_policy: cc.NanPolicy = "raise",
    detail: Sequence[int] = (),
    min_correlation_sum: float = 0.0,
    estimators: Sequence[str] = (),
) -> GroupTable:
    """Per-group diagnostics of ``scores`` (N, K) grouped by ``ids`` (0..G-1) and the advantages
    of ``estimators``: the rows are sorted by group once; the diagnostics and the group-local
    estimators go to the core in slices of whole groups, any other estimator (GDPO's batch
    z-score) gets the whole batch in one call.

    ``detail`` groups also keep their covariance and correlation matrices (for display).
    """
    k = scores.shape[1]
    options: dict[str, Any] = {"weights": weights, "nan_policy": nan_policy}
    n = ids.size  # rows sorted by group, stably: sorting the distinct keys id * n + row is ~10x
    order = np.sort(ids * n + np.arange(n)) % n  # faster than argsort(kind="stable") (SIMD sort)
    sizes = np.bincount(ids, minlength=n_groups).astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    x = np.take(scores, order, axis=0)  # sorted by group: each slice is a view
    names = list(dict.fromkeys(estimators))
    by_row = {}  # advantages of the sorted rows
    for name in names:  # the batch estimators first, while their core temporaries have room
        if not is_group_local(name):
            by_row[name] = _advantages(x, np.repeat(np.arange(n_groups), sizes), name, options)
    local = [e for e in names if e not in by_row]
    by_row.update({e: np.empty(n) for e in local})
    stats = _GroupStats.zeros(n_groups, k)
    corr_total = np.zeros((k, k))
    matrices: dict[int, tuple[Array, Array]] = {}
    for lo, hi in whole_group_ranges(sizes, SLICE_ROWS):
        rows = slice(int(starts[lo]), int(starts[hi - 1] + sizes[hi - 1]))
        pieces = _scale_pieces(x[rows], sizes[lo:hi], weights)
        for name in local:
            by_row[name][rows] = _slice_advantages(x[rows], pieces, name, options)
        cov, corr = _slice_stats(
            x[rows],
            pieces,
            stats.part(lo, hi),
            weights=weights,
            nan_policy=nan_policy,
            min_correlation_sum=min_correlation_sum,
        )
        corr_total += corr.sum(axis=0)
        for g in set(detail).intersection(range(lo, hi)):
            matrices[g] = (cov[g - lo], corr[g - lo])
    del x
    advantages = {}
    for name in names:  # back to file order
        advantages[name] = np.empty(n)
        advantages[name][order] = by_row.pop(name)
    return GroupTable(
        **{f.name: getattr(stats, f.name) for f in dataclasses.fields(_GroupStats)},
        sizes=sizes,
        starts=starts,
        order=order,
        mean_correlation=corr_total / max(n_groups, 1),
        matrices=matrices,
        advantages=advantages,
    )


def overflow_check(
    source: str, components: Sequence[str], scores: Array, weights: Array, values: Sequence[Array]
) -> None:
    """A clear error instead of NaN or inf tables when huge values overflow float64 statistics.

    Results must be finite, and NaN only where an input is missing (``inf - inf`` is an overflow).
    Called before anything is computed (``values`` empty), it refuses weighted values whose squares
    overflow: the core would refuse their covariance sum with a message that cannot name the file.
    """
    too_big = _squares_overflow(scores, weights)
    if not too_big and all(math.isfinite(float(np.sum(v))) for v in values):
        return  # a finite sum: every value is finite
    missing = bool(np.isnan(scores).any())
    if not too_big and all(bool(np.all(np.isfinite(v) | (np.isnan(v) & missing))) for v in values):
        return
    magnitude = np.abs(np.nan_to_num(scores * weights, nan=0.0))
    row, col = np.unravel_index(int(np.argmax(magnitude)), magnitude.shape)
    big = float(magnitude[row, col])
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
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    weights: Array | None = None,
    nan_policy: cc.NanPolicy = "raise",
    detail: Sequence[int] | None = None,
) -> Explanation:
    """Compute everything ``corrgrpo explain`` prints for ``batch``.

    ``detail`` lists the groups (indices into ``batch.group_labels``) whose matrices are kept for
    display (default: every group); the batch-wide numbers always cover every group. Every row's
    advantages are kept too (``Explanation.advantages``).
    """
    w = _check_options(estimators, len(batch.components), weights)
    shown = list(range(batch.n_groups)) if detail is None else sorted(set(detail))
    scores, ids = batch.scores, batch.group_ids
    with np.errstate(all="ignore"):
        overflow_check(batch.source, batch.components, scores, w, [])
        table = group_table(
            scores, ids, batch.n_groups, weights=w, nan_policy=nan_policy, detail=shown, estimators=estimators
        )
        advantages = table.advantages
        results = [table.c_q, table.covariance_sum, table.mean_correlation, *advantages.values()]
        overflow_check(
            batch.source, batch.components, scores, w, results + [m for g in shown for m in table.matrices[g]]
        )
        magnitude = {e: (float(np.mean(np.abs(a))), float(np.max(np.abs(a)))) for e, a in advantages.items()}
    views = []
    for g in shown:
        rows = table.rows(g)
        covariance, correlation = table.matrices[g]
        views.append(
            GroupView(
                label=batch.group_labels[g],
                rows=rows,
                scores=scores[rows],
                advantages={e: advantages[e][rows] for e in estimators},
                covariance=covariance,
                correlation=correlation,
                covariance_sum=float(table.covariance_sum[g]),
                correlation_sum=float(table.correlation_sum[g]),
                c_q=float(table.c_q[g]),
                variance_share=table.variance_share[g],
                zero_variance=int(table.zero_variance[g]),
                degenerate=bool(table.degenerate[g]),
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
        advantages=advantages,
    )


def explain_file(
    path: str | Path,
    *,
    group_col: str = "group",
    components: Sequence[str] | None = None,
    file_format: str | None = None,
    nan_policy: cc.NanPolicy = "raise",
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    weights: Callable[[Sequence[str]], Array | None] = lambda names: None,
    max_groups: int = 10,
    plot_group: str | None = None,
) -> tuple[Explanation, int]:
    """:func:`explain_shown` of a reward file read whole (only the needed columns); returns the
    report and the index (in ``report.groups``) of ``plot_group`` (default: the first group).
    ``weights(names)`` gives the weights once the component names are known."""
    batch = read_rewards(
        path,
        group_col=group_col,
        components=components,
        file_format=file_format,
        allow_nan=nan_policy == "ignore",
    )
    return explain_shown(
        batch,
        estimators=estimators,
        weights=weights(batch.components),
        nan_policy=nan_policy,
        max_groups=max_groups,
        plot_group=plot_group,
    )


def explain_shown(
    batch: RewardBatch,
    *,
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    weights: Array | None = None,
    nan_policy: cc.NanPolicy = "raise",
    max_groups: int = 10,
    plot_group: str | None = None,
) -> tuple[Explanation, int]:
    """:func:`explain` keeping the first ``max_groups`` groups and ``plot_group`` for display; returns
    the report and the index of ``plot_group`` (default: the first group) in ``report.groups``."""
    group = 0
    if plot_group is not None:
        if plot_group not in batch.group_labels:
            raise CliError(f"--plot-group {plot_group!r} is not a group in the file")
        group = batch.group_labels.index(plot_group)
    detail = sorted({*range(min(max_groups, batch.n_groups)), group})
    report = explain(batch, estimators=estimators, weights=weights, nan_policy=nan_policy, detail=detail)
    return report, detail.index(group)


def _fmt(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:.4f}"


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
                "DEGENERATE: components vary but their correlation sum is ~0, so CorrGRPO divides by "
                "~sqrt(eps) and its advantages blow up (anti-correlated components on different scales)"
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
    s = ex.summary
    mean_corr = ex.mean_correlation
    out += [
        "## batch",
        "",
        markdown_table(
            ["metric", "value"],
            [
                ["groups", f"{s['groups']:.0f}"],
                ["groups of one rollout", f"{s['singleton_groups']:.0f}"],
                ["degenerate groups", f"{s['degenerate_groups']:.0f}"],
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
        _matrix_table(names, mean_corr),
        "",
    ]
    if len(ex.estimators) > 1:
        rows = [[e, _fmt(ex.magnitude[e][0]), _fmt(ex.magnitude[e][1])] for e in ex.estimators]
        out += [
            "advantage magnitude per estimator:",
            "",
            markdown_table(["estimator", "mean abs(A)", "max abs(A)"], rows),
            "",
        ]
    return "\n".join(out)
