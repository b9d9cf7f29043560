"""``corrgrpo explain``: what GRPO's and CorrGRPO's denominators see in a reward batch.

Every number that feeds an advantage comes from the core (:func:`corrgrpo_core.advantage_stats`,
:func:`corrgrpo_core.compute_advantages`). The K x K covariance and correlation matrices are computed
here for display only; the tests check that their sums equal the core's covariance and correlation
sums.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import corrgrpo_core as cc

from .io import CliError, RewardBatch, markdown_table

__all__ = [
    "EXAMPLE",
    "Explanation",
    "GroupTable",
    "GroupView",
    "example_batch",
    "explain",
    "group_matrices",
    "group_slices",
    "group_table",
    "is_group_local",
    "overflow_check",
    "render_explanation",
    "sliced_advantages",
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
    """One group: its rows and the display matrices of its weighted components."""

    label: str
    rows: npt.NDArray[np.int64]
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
    batch: RewardBatch
    weights: Array
    estimators: tuple[str, ...]
    advantages: dict[str, Array]
    groups: tuple[GroupView, ...]
    summary: dict[str, float]
    mean_correlation: Array


def group_matrices(x: Array, ids: npt.NDArray[np.int64], n_groups: int) -> tuple[Array, Array]:
    """``(G, K, K)`` sample covariance and Pearson matrices of every group, vectorised over groups.

    Missing (NaN) entries are left out: means over each component's present values, products
    over the rows where both are present. Components that do not vary in a group (the core's
    scale-relative test) get zero rows and columns in its correlation matrix, as in CorrGRPO.
    """
    k = x.shape[1]
    valid = ~np.isnan(x)
    has_nan = not bool(valid.all())
    centred = np.where(valid, x, 0.0) if has_nan else x.copy()
    count = np.stack([np.bincount(ids, valid[:, j], minlength=n_groups) for j in range(k)], axis=1)
    sums = np.stack([np.bincount(ids, centred[:, j], minlength=n_groups) for j in range(k)], axis=1)
    squares = np.stack([np.bincount(ids, centred[:, j] ** 2, minlength=n_groups) for j in range(k)], axis=1)
    means = sums / np.maximum(count, 1)
    centred -= means[ids]
    if has_nan:
        centred[~valid] = 0.0
    cov = np.zeros((n_groups, k, k))
    for a in range(k):
        for b in range(a, k):
            pairs = (
                np.bincount(ids, valid[:, a] & valid[:, b], minlength=n_groups) if has_nan else count[:, a]
            )
            total = np.bincount(ids, centred[:, a] * centred[:, b], minlength=n_groups)
            cov[:, a, b] = cov[:, b, a] = np.where(pairs > 1, total / np.maximum(pairs - 1, 1), 0.0)
    sum_sq = np.stack([np.bincount(ids, centred[:, j] ** 2, minlength=n_groups) for j in range(k)], axis=1)
    varies = (count > 1) & (sum_sq > _ZERO_VAR_RTOL**2 * squares)
    diag = np.diagonal(cov, axis1=1, axis2=2)
    inv = np.where(varies, 1.0 / np.sqrt(np.where(varies, diag, 1.0)), 0.0)
    return cov, cov * inv[:, :, None] * inv[:, None, :]


@dataclass(frozen=True)
class GroupTable:
    """Per-group diagnostics of a batch (index g = group g), from :func:`corrgrpo_core.advantage_stats`
    run over slices of whole groups, so memory stays bounded by a slice, not by the batch.

    ``order``/``starts``/``sizes`` give each group's rows (``order[starts[g]:starts[g] + sizes[g]]``).
    """

    sizes: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]
    covariance_sum: Array
    correlation_sum: Array
    c_q: Array
    variance_share: Array
    zero_variance: npt.NDArray[np.int64]
    degenerate: npt.NDArray[np.bool_]
    total_varies: npt.NDArray[np.bool_]
    mean_correlation: Array
    matrices: dict[int, tuple[Array, Array]]

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


#: Rows per slice handed to the core at once.
SLICE_ROWS = 1 << 17


def group_slices(
    ids: npt.NDArray[np.int64], n_groups: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], list[tuple[int, int]]]:
    """Rows sorted by group (stable), group sizes and starts, and ranges [lo, hi) of whole groups
    holding about :data:`SLICE_ROWS` rows each."""
    order = np.argsort(ids, kind="stable")
    sizes = np.bincount(ids, minlength=n_groups).astype(np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    total = int(ends[-1]) if n_groups else 0
    cuts = np.unique(np.searchsorted(ends, np.arange(SLICE_ROWS, total, SLICE_ROWS)))
    bounds = [0, *[int(c) + 1 for c in cuts if c + 1 < n_groups], n_groups]
    return order, sizes, starts, [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


_LOCAL: dict[str, bool] = {}


def is_group_local(name: str) -> bool:
    """Whether an estimator's advantages for a group depend on that group alone (no batch-level
    statistic such as GDPO's batch z-score), found by running it on three groups and on each alone."""
    if name not in _LOCAL:
        rng = np.random.default_rng(0)
        scores = rng.normal(size=(12, 2)) * np.array([1.0, 5.0])
        ids = np.repeat(np.arange(3), 4)
        whole = np.asarray(cc.compute_advantages(scores, ids, estimator=name), dtype=np.float64)
        alone = np.concatenate(
            [np.asarray(cc.compute_advantages(scores[ids == g], estimator=name)) for g in range(3)]
        )
        _LOCAL[name] = bool(np.allclose(whole, alone, rtol=1e-9, atol=1e-12))
    return _LOCAL[name]


def sliced_advantages(
    scores: Array, ids: npt.NDArray[np.int64], n_groups: int, name: str, **options: Any
) -> Array:
    """``cc.compute_advantages`` over slices of whole groups when the estimator is group-local
    (same numbers, memory bounded by a slice), else over the whole batch."""
    if ids.size <= SLICE_ROWS or not is_group_local(name):
        return np.asarray(cc.compute_advantages(scores, ids, estimator=name, **options), dtype=np.float64)
    order, sizes, starts, slices = group_slices(ids, n_groups)
    ends = starts + sizes
    out = np.empty(ids.size, dtype=np.float64)
    for lo, hi in slices:
        rows = order[starts[lo] : ends[hi - 1]]
        out[rows] = np.asarray(cc.compute_advantages(scores[rows], ids[rows] - lo, estimator=name, **options))
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
) -> GroupTable:
    """Per-group diagnostics of ``scores`` (N, K) grouped by ``ids`` (0..G-1), slice by slice.

    ``detail`` groups also keep their covariance and correlation matrices (for display).
    """
    k = scores.shape[1]
    order, sizes, starts, slices = group_slices(ids, n_groups)
    ends = starts + sizes
    cov_sum, corr_sum, c_q = (np.zeros(n_groups) for _ in range(3))
    share = np.zeros((n_groups, k))
    zero_var = np.zeros(n_groups, dtype=np.int64)
    degenerate = np.zeros(n_groups, dtype=bool)
    varies = np.zeros(n_groups, dtype=bool)
    corr_total = np.zeros((k, k))
    wanted = set(detail)
    matrices: dict[int, tuple[Array, Array]] = {}
    for lo, hi in slices:
        rows = order[starts[lo] : ends[hi - 1]]
        local = ids[rows] - lo
        sub = scores[rows]
        try:
            st = cc.advantage_stats(
                sub, local, weights=weights, nan_policy=nan_policy, min_correlation_sum=min_correlation_sum
            )
        except (ValueError, TypeError, OverflowError) as err:
            raise CliError(f"cannot compute the diagnostics: {err}") from None
        first = starts[lo:hi] - starts[lo]
        cov_sum[lo:hi] = np.asarray(st.covariance_sum)[first]
        corr_sum[lo:hi] = np.asarray(st.correlation_sum)[first]
        c_q[lo:hi] = np.asarray(st.c_q)[first]
        share[lo:hi] = np.asarray(st.variance_share)[first]
        zero_var[lo:hi] = np.asarray(st.zero_variance_count)[first]
        degenerate[lo:hi] = np.asarray(st.degenerate)[first]
        varies[lo:hi] = np.asarray(st.total_varies)[first]
        del st
        cov, corr = group_matrices(sub * weights, local, hi - lo)
        corr_total += corr.sum(axis=0)
        for g in wanted.intersection(range(lo, hi)):
            matrices[g] = (cov[g - lo], corr[g - lo])
    return GroupTable(
        sizes,
        starts,
        order,
        cov_sum,
        corr_sum,
        c_q,
        share,
        zero_var,
        degenerate,
        varies,
        corr_total / max(n_groups, 1),
        matrices,
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
    if not too_big and not values:
        return
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
    """Whether some weighted value's square passes float64's largest (column reductions, no copy)."""
    if scores.size == 0:
        return False
    top = np.maximum(np.abs(np.fmax.reduce(scores, axis=0)), np.abs(np.fmin.reduce(scores, axis=0)))
    return bool(np.nanmax(np.append(top * np.abs(weights), 0.0)) > np.sqrt(np.finfo(np.float64).max))


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
    display (default: every group); the batch-wide numbers always cover every group.
    """
    known = cc.estimator_names()
    unknown = [e for e in estimators if e not in known]
    if unknown:
        raise CliError(f"unknown estimator(s) {unknown}; known: {', '.join(known)}")
    k = len(batch.components)
    w = np.ones(k) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (k,):
        raise CliError(f"{w.size} weights for {k} reward components")
    shown = list(range(batch.n_groups)) if detail is None else list(detail)
    advantages: dict[str, Array] = {}
    with np.errstate(all="ignore"):
        overflow_check(batch.source, batch.components, batch.scores, w, [])
        for name in estimators:
            try:
                advantages[name] = sliced_advantages(
                    batch.scores, batch.group_ids, batch.n_groups, name, weights=w, nan_policy=nan_policy
                )
            except (ValueError, TypeError, OverflowError) as err:
                raise CliError(f"estimator {name!r} rejected the batch: {err}") from None
        table = group_table(
            batch.scores, batch.group_ids, batch.n_groups, weights=w, nan_policy=nan_policy, detail=shown
        )
        checked = [*advantages.values(), table.c_q, table.covariance_sum, table.mean_correlation]
        checked += [m for pair in table.matrices.values() for m in pair]
        overflow_check(batch.source, batch.components, batch.scores, w, checked)
    groups = []
    for g in shown:
        cov, corr = table.matrices[g]
        groups.append(
            GroupView(
                label=batch.group_labels[g],
                rows=table.rows(g),
                covariance=cov,
                correlation=corr,
                covariance_sum=float(table.covariance_sum[g]),
                correlation_sum=float(table.correlation_sum[g]),
                c_q=float(table.c_q[g]),
                variance_share=table.variance_share[g],
                zero_variance=int(table.zero_variance[g]),
                degenerate=bool(table.degenerate[g]),
            )
        )
    summary = table.summary(batch.components)
    return Explanation(
        batch, w, tuple(estimators), advantages, tuple(groups), summary, table.mean_correlation
    )


def _fmt(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:.4f}"


def _matrix_table(names: Sequence[str], m: Array) -> str:
    return markdown_table(
        ["", *names], [[n, *(_fmt(v) for v in row)] for n, row in zip(names, m, strict=False)]
    )


def render_explanation(ex: Explanation, *, max_groups: int = 10) -> str:
    """The text ``corrgrpo explain`` prints: per group, then for the whole batch."""
    b = ex.batch
    names = list(b.components)
    out = [
        (
            f"Reward batch: {b.source}: {b.scores.shape[0]} rollouts, {b.n_groups} group(s), "
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
            out.append(
                f"{names[top]} alone is {100 * view.variance_share[top]:.1f}% of GRPO's denominator^2, so GRPO "
                f"scales every component by {names[top]}'s spread; CorrGRPO's correlation sum counts each "
                "component once, whatever its scale"
            )
        if view.zero_variance:
            out.append(f"{view.zero_variance} component(s) do not vary in this group (zero row and column)")
        if view.degenerate:
            out.append(
                "DEGENERATE: components vary but their correlation sum is ~0, so CorrGRPO divides by "
                "~sqrt(eps) and its advantages blow up (anti-correlated components on different scales)"
            )
        if view.rows.size < 2:
            zero = all(ex.advantages[e][view.rows[0]] == 0 for e in ex.estimators)
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
            "(the rest of the covariance sum is covariance between components)",
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
                        *(_fmt(v) for v in b.scores[r]),
                        *(_fmt(ex.advantages[e][r]) for e in ex.estimators),
                    ]
                    for r in view.rows
                ],
            ),
            "",
        ]
    if b.n_groups > max_groups:
        out += [f"({b.n_groups - max_groups} more groups not shown; raise --max-groups to see them)", ""]
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
        rows = []
        for e in ex.estimators:
            a = ex.advantages[e]
            rows.append([e, _fmt(float(np.mean(np.abs(a)))), _fmt(float(np.max(np.abs(a))))])
        out += [
            "advantage magnitude per estimator:",
            "",
            markdown_table(["estimator", "mean abs(A)", "max abs(A)"], rows),
            "",
        ]
    return "\n".join(out)
