"""``corrgrpo explain``: what GRPO's and CorrGRPO's denominators see in a reward batch.

Every number that feeds an advantage comes from the core (:func:`corrgrpo_core.advantage_stats`,
:func:`corrgrpo_core.compute_advantages`). The K x K covariance and correlation matrices are computed
here for display only; the tests check that their sums equal the core's covariance and correlation
sums.

Memory: the batch is handed to the core in pieces of whole groups (:class:`_Engine`), and what the
report prints is accumulated piece by piece (sums, extremes, the shown groups), never a per-row
advantage vector of the whole batch. A reward file is read the same way (:func:`explain_file`):
the group column once, then the reward columns in passes of whole groups, so peak memory is about
one pass, not the file.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import corrgrpo_core as cc

from .io import (
    CliError,
    RewardBatch,
    Unstreamable,
    markdown_table,
    read_rewards,
    returning_pool,
    stream_group_codes,
    stream_scores,
)
from .io import file_format as format_of

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
    "group_slices",
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
    ``advantages[e]`` (every row, in file order) only from :func:`explain` on a batch in memory."""

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
    advantages: dict[str, Array] = field(default_factory=dict)


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
class _GroupStats:
    """Per-group diagnostics from :func:`corrgrpo_core.advantage_stats` (index = group)."""

    covariance_sum: Array
    correlation_sum: Array
    c_q: Array
    variance_share: Array
    zero_variance: npt.NDArray[np.int64]
    degenerate: npt.NDArray[np.bool_]
    total_varies: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class GroupTable(_GroupStats):
    """Per-group diagnostics of a batch (index g = group g), from :func:`corrgrpo_core.advantage_stats`
    run over slices of whole groups, so memory stays bounded by a slice, not by the batch.

    ``order``/``starts``/``sizes`` give each group's rows (``order[starts[g]:starts[g] + sizes[g]]``).
    """

    sizes: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]
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


#: Rows per slice handed to the core at once (its temporaries are a few times a slice).
SLICE_ROWS = 1 << 14
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


def group_slices(
    ids: npt.NDArray[np.int64], n_groups: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], list[tuple[int, int]]]:
    """Rows sorted by group (stable), group sizes and starts, and ranges [lo, hi) of whole groups
    holding about :data:`SLICE_ROWS` rows each."""
    order = np.argsort(ids, kind="stable")
    sizes = np.bincount(ids, minlength=n_groups).astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    return order, sizes, starts, whole_group_ranges(sizes, SLICE_ROWS)


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


def _scale_pieces(x: Array, ids: npt.NDArray[np.int64], n_groups: int, weights: Array) -> list[_Piece]:
    """The groups of a slice split by magnitude so that no call spans more than :data:`SCALE_BITS`
    bits: the core scales each call by one power of two, and a group of 1e-162 next to one of 1e34
    would otherwise lose its squares below float64's range. Usually one piece (no copy)."""
    row_top = np.fmax.reduce(np.abs(x) * np.abs(weights), axis=1) if x.shape[1] else np.zeros(x.shape[0])
    first = _run_starts(ids)
    top = np.zeros(n_groups)
    if first.size:
        top[ids[first]] = np.fmax.reduceat(np.nan_to_num(row_top, nan=0.0), first)
    exponent = np.frexp(top)[1]
    high = int(exponent.max(initial=0))
    bucket = (exponent - high) // SCALE_BITS
    if bucket.size == 0 or bucket.min() == bucket.max():
        return [_Piece(None, None, ids, math.ldexp(1.0, high))]
    pieces = []
    for b in np.unique(bucket):
        groups = np.flatnonzero(bucket == b)
        rows = (bucket == b)[ids]
        unit = math.ldexp(1.0, int(exponent[groups].max()))
        pieces.append(_Piece(groups, rows, np.searchsorted(groups, ids[rows]), unit))
    return pieces


def _run_starts(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index of each group's first row (``ids`` sorted)."""
    return np.flatnonzero(np.diff(ids, prepend=-1))


@dataclass(frozen=True)
class _SliceStats(_GroupStats):
    """Per-group diagnostics of one slice of whole groups (index = slice-local group) and the
    display matrices."""

    covariance: Array
    correlation: Array


def _slice_stats(
    x: Array,
    ids: npt.NDArray[np.int64],
    n_groups: int,
    pieces: Sequence[_Piece],
    *,
    weights: Array,
    nan_policy: cc.NanPolicy,
    min_correlation_sum: float = 0.0,
) -> _SliceStats:
    """:func:`corrgrpo_core.advantage_stats` and the display matrices of each group of a slice
    (rows sorted by group), piece by piece."""
    k = x.shape[1]
    out = _SliceStats(
        covariance_sum=np.zeros(n_groups),
        correlation_sum=np.zeros(n_groups),
        c_q=np.zeros(n_groups),
        variance_share=np.zeros((n_groups, k)),
        zero_variance=np.zeros(n_groups, dtype=np.int64),
        degenerate=np.zeros(n_groups, dtype=bool),
        total_varies=np.zeros(n_groups, dtype=bool),
        covariance=np.zeros((n_groups, k, k)),
        correlation=np.zeros((n_groups, k, k)),
    )
    for piece in pieces:
        sub = x if piece.rows is None else x[piece.rows]
        m = n_groups if piece.groups is None else piece.groups.size
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
        first = _run_starts(piece.ids)
        local = piece.ids[first]
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
        cov, corr = group_matrices(sub * (weights / piece.unit), piece.ids, m)
        out.covariance[at] = cov[local] * piece.unit * piece.unit
        out.correlation[at] = corr[local]
    return out


def _slice_advantages(x: Array, pieces: Sequence[_Piece], name: str, options: dict[str, Any]) -> Array:
    """``cc.compute_advantages`` of a group-local estimator over a slice, piece by piece."""
    out = np.empty(x.shape[0], dtype=np.float64) if len(pieces) > 1 else None
    for piece in pieces:
        sub = x if piece.rows is None else x[piece.rows]
        try:
            adv = np.asarray(
                cc.compute_advantages(sub, piece.ids, estimator=name, **options), dtype=np.float64
            )
        except (ValueError, TypeError, OverflowError) as err:
            raise CliError(f"estimator {name!r} rejected the batch: {err}") from None
        if out is None:
            return adv
        out[piece.rows] = adv
    assert out is not None
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
        st = _slice_stats(
            sub,
            local,
            hi - lo,
            _scale_pieces(sub, local, hi - lo, weights),
            weights=weights,
            nan_policy=nan_policy,
            min_correlation_sum=min_correlation_sum,
        )
        cov_sum[lo:hi] = st.covariance_sum
        corr_sum[lo:hi] = st.correlation_sum
        c_q[lo:hi] = st.c_q
        share[lo:hi] = st.variance_share
        zero_var[lo:hi] = st.zero_variance
        degenerate[lo:hi] = st.degenerate
        varies[lo:hi] = st.total_varies
        corr_total += st.correlation.sum(axis=0)
        for g in wanted.intersection(range(lo, hi)):
            matrices[g] = (st.covariance[g - lo], st.correlation[g - lo])
    return GroupTable(
        covariance_sum=cov_sum,
        correlation_sum=corr_sum,
        c_q=c_q,
        variance_share=share,
        zero_variance=zero_var,
        degenerate=degenerate,
        total_varies=varies,
        sizes=sizes,
        starts=starts,
        order=order,
        mean_correlation=corr_total / max(n_groups, 1),
        matrices=matrices,
    )


# --------------------------------------------------------------------------------------------------
# Batch z-scores (GDPO) from group-local pieces.

#: Estimators that are the batch z-score of a group-local one (checked on a probe batch first).
_ZSCORE_OF = {"gdpo": "mo_grpo"}


@dataclass(frozen=True)
class _ZScoreSpec:
    """``(h - mean_B h) / (std_B h + eps)`` over the rows with a valid component, 0 where the batch
    does not vary (the core's scale-relative test), 0 on rows with no valid component."""

    base: str
    eps: float
    placement: str
    ddof: int


def _zscore_spec(name: str, weights: Array, nan_policy: cc.NanPolicy) -> _ZScoreSpec | None:
    """How to compute ``name`` from pieces, or ``None`` (then it needs the whole batch at once)."""
    return _zscore_spec_cached(name, tuple(float(w) for w in weights), nan_policy)


@functools.cache
def _zscore_spec_cached(
    name: str, weights: tuple[float, ...], nan_policy: cc.NanPolicy
) -> _ZScoreSpec | None:
    base = _ZSCORE_OF.get(name)
    if base is None or base not in cc.estimator_names() or not is_group_local(base):
        return None
    params = inspect.signature(cc.get_estimator(name).fn).parameters
    try:
        spec = _ZScoreSpec(
            base,
            float(params["eps"].default),
            str(params["eps_placement"].default),
            int(params["ddof"].default),
        )
    except (KeyError, TypeError, ValueError):
        return None
    # the probe: uneven groups, a singleton, a constant group, missing entries where allowed
    rng = np.random.default_rng(3)
    w = np.asarray(weights)
    ids = np.repeat(np.arange(5), [4, 5, 1, 3, 4])
    x = rng.normal(size=(ids.size, w.size)) * np.geomspace(0.1, 10.0, w.size)
    x[ids == 3] = 0.5
    if nan_policy == "ignore":
        x[1, 0] = x[6] = np.nan
    options: dict[str, Any] = {"weights": w, "nan_policy": nan_policy}
    with np.errstate(all="ignore"):
        try:
            want = np.asarray(cc.compute_advantages(x, ids, estimator=name, **options), dtype=np.float64)
            h = np.asarray(cc.compute_advantages(x, ids, estimator=base, **options), dtype=np.float64)
        except (ValueError, TypeError, OverflowError):
            return None
        z = _ZScores(spec, ids.size, missing=bool(np.isnan(x).any()), band=0.0, keep=False)
        valid = z.valid_rows(x)
        z.put(0, h, valid)
        got = z.values(h, valid)
    return spec if np.allclose(got, want, rtol=1e-12, atol=1e-14) else None


class _ZScores:
    """A batch z-score ``(h - mean_B h) / (std_B h + eps)`` from slices of h, without keeping h.

    The moments are merged slice by slice (Chan et al.). For sum |h - mean| the values above and
    below a narrow band around 0 are summed apart and the few nonzero values inside it kept: h is
    centred in every group, so the batch mean is 0 up to rounding and lies inside the band, where
    sum |h - m| = (above - n_above m) + (n_below m - below) + sum_inside |h - m| + n_zero |m|
    holds exactly. ``keep`` stores every h as well (for every row's advantage).
    """

    #: nonzero values kept inside the band before giving up (then the file is read whole)
    MAX_INSIDE = 1 << 20

    def __init__(self, spec: _ZScoreSpec, n_rows: int, *, missing: bool, band: float, keep: bool) -> None:
        self.spec = spec
        self.missing = missing
        self.band = band
        self.h = np.empty(n_rows, dtype=np.float64) if keep else None
        self.valid = np.ones(n_rows, dtype=bool) if keep and missing else None
        self.count, self.mean, self.m2 = 0, 0.0, 0.0
        self.ref: float | None = None  # the core shifts by the batch's first value: so do we
        self.shifted: list[float] = []
        self.high, self.low = -math.inf, math.inf
        self.above: list[float] = []
        self.below: list[float] = []
        self.n_above = self.n_below = self.n_zero = 0
        self.inside: list[Array] = []
        self.n_inside = 0
        self.finite = True

    def valid_rows(self, x: Array) -> npt.NDArray[np.bool_] | None:
        """Rows with a valid component (``None``: all)."""
        return np.asarray(~np.isnan(x).all(axis=1), dtype=np.bool_) if self.missing else None

    def put(self, at: int, h: Array, valid: npt.NDArray[np.bool_] | None) -> None:
        """The base values of sorted rows [at, at + len(h))."""
        if self.h is not None:
            self.h[at : at + h.size] = h
        if self.valid is not None and valid is not None:
            self.valid[at : at + h.size] = valid
        hv = h if valid is None else h[valid]
        if hv.size == 0:
            return
        if not bool(np.all(np.isfinite(hv))):
            self.finite = False
            return
        if self.ref is None:
            self.ref = float(hv[0])
        self.shifted.append(float(np.sum(hv - self.ref)))
        mean = float(np.mean(hv))
        m2 = float(np.sum((hv - mean) ** 2))
        n = self.count + hv.size
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.count * hv.size / n
        self.mean += delta * hv.size / n
        self.count = n
        self.high, self.low = max(self.high, float(np.max(hv))), min(self.low, float(np.min(hv)))
        above, below = hv > self.band, hv < -self.band
        self.above.append(float(np.sum(hv[above])))
        self.below.append(float(np.sum(hv[below])))
        self.n_above += int(np.count_nonzero(above))
        self.n_below += int(np.count_nonzero(below))
        inside = hv[~above & ~below]
        nonzero = inside[inside != 0]
        self.n_zero += inside.size - nonzero.size
        self.n_inside += nonzero.size
        if nonzero.size and self.n_inside <= self.MAX_INSIDE:
            self.inside.append(nonzero.copy())

    def stats(self) -> tuple[float, float]:
        """Mean and denominator (0: the batch does not vary, every advantage 0), as the core."""
        n, sum_sq = self.count, self.m2
        mean = (self.ref or 0.0) + self._shifted_mean()
        dof = n - self.spec.ddof
        var = sum_sq / dof if dof > 0 else 0.0
        rtol = _ZERO_VAR_RTOL
        varies = dof > 0 and var > 0 and sum_sq > (mean * mean + sum_sq / max(n, 1)) * rtol * rtol * max(n, 1)
        eps = self.spec.eps
        den = math.sqrt(var + eps) if self.spec.placement == "inside" else math.sqrt(var) + eps
        return mean, den if varies and den > 0 else 0.0

    def _shifted_mean(self) -> float:
        return float(np.sum(self.shifted)) / self.count if self.count else 0.0

    def values(self, h: Array, valid: npt.NDArray[np.bool_] | None) -> Array:
        """The advantages of rows with base values ``h``."""
        den = self.stats()[1]
        if den <= 0:
            return np.zeros(h.size)
        out = ((h - (self.ref or 0.0)) - self._shifted_mean()) / den  # as the core rounds
        if valid is not None:
            out[~valid] = 0.0
        return out

    def magnitude(self, n_rows: int) -> tuple[float, float] | None:
        """(mean, max) of abs(A) over ``n_rows`` rows (those without a valid component are 0);
        ``None`` where the band cannot give it exactly."""
        mean, den = self.stats()
        if not self.finite or abs(mean) > self.band or self.n_inside > self.MAX_INSIDE:
            return None
        if den <= 0 or self.count == 0:
            return 0.0, 0.0
        total = (
            (float(np.sum(self.above)) - self.n_above * mean)
            + (self.n_below * mean - float(np.sum(self.below)))
            + sum(float(np.sum(np.abs(v - mean))) for v in self.inside)
            + self.n_zero * abs(mean)
        )
        top = max(self.high - mean, mean - self.low) / den
        return total / den / n_rows, top


# --------------------------------------------------------------------------------------------------
# The engine: slices of whole groups in, the report's numbers out.


@dataclass
class _Magnitude:
    """Sum and maximum of abs(A) over the rows seen; NaN propagates as in ``np.mean``/``np.max``."""

    total: list[float] = field(default_factory=list)
    top: list[float] = field(default_factory=list)

    def add(self, a: Array) -> None:
        if a.size:
            magnitude = np.abs(a)
            self.total.append(float(np.sum(magnitude)))
            self.top.append(float(np.max(magnitude)))

    def result(self, n_rows: int) -> tuple[float, float]:
        if not self.top:
            return math.nan, math.nan
        return float(np.sum(self.total)) / n_rows, float(np.max(self.top))


class _Engine:
    """Everything :func:`explain` reports, accumulated over ranges [lo, hi) of whole groups whose
    rows come sorted by group (file order within a group).

    Group-local estimators and the diagnostics run per slice of :data:`SLICE_ROWS` rows (exact on
    any whole-group slice); batch z-scores (GDPO) keep one float per row and finish at the end;
    any other estimator needs the whole batch in one range (``needs_whole``).
    """

    def __init__(
        self,
        sizes: npt.NDArray[np.int64],
        components: Sequence[str],
        weights: Array,
        estimators: Sequence[str],
        nan_policy: cc.NanPolicy,
        detail: Sequence[int],
        *,
        missing: bool,
        keep_rows: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self.sizes = sizes
        self.starts = np.cumsum(sizes) - sizes
        self.n_rows = int(sizes.sum())
        self.k = len(components)
        self.weights = weights
        self.estimators = tuple(estimators)
        self.options: dict[str, Any] = {"weights": weights, "nan_policy": nan_policy}
        self.nan_policy = nan_policy
        self.missing = missing
        self.zscored: dict[str, _ZScores] = {}
        self.local: list[str] = []
        self.whole: list[str] = []
        for name in self.estimators:
            spec = None if is_group_local(name) else _zscore_spec(name, weights, nan_policy)
            if is_group_local(name):
                self.local.append(name)
            elif spec is not None:
                band = math.ldexp(float(np.sum(np.abs(weights))), -26)  # far above rounding
                self.zscored[name] = _ZScores(
                    spec, self.n_rows, missing=missing, band=band, keep=keep_rows is not None
                )
            else:
                self.whole.append(name)
        self.magnitude = {name: _Magnitude() for name in self.estimators}
        self.detail = sorted(set(detail))
        self.shown: dict[int, dict[str, Any]] = {}
        self.keep_rows = keep_rows  # sorted position -> file row: keep every advantage (in memory)
        self.advantages = {n: np.empty(self.n_rows) for n in self.estimators} if keep_rows is not None else {}
        self.sums: dict[str, list[float]] = {}
        self.c_q_low: list[float] = []
        self.c_q_high: list[float] = []
        self.corr_total = np.zeros((self.k, self.k))
        self.nonfinite = False

    @property
    def needs_whole(self) -> bool:
        return bool(self.whole)

    def _add_sum(self, key: str, value: Any) -> None:
        self.sums.setdefault(key, []).append(float(np.sum(value)))

    def _check(self, *values: Array) -> None:
        for v in values:
            if not bool(np.all(np.isfinite(v) | (np.isnan(v) & self.missing))):
                self.nonfinite = True

    def add(self, lo: int, hi: int, x: Array) -> None:
        """Rows of groups [lo, hi), sorted by group."""
        start = int(self.starts[lo])
        sizes = self.sizes[lo:hi]
        for a, b in whole_group_ranges(sizes, SLICE_ROWS):
            rows = slice(
                int(self.starts[lo + a]) - start, int(self.starts[lo + b - 1] + sizes[b - 1]) - start
            )
            self._slice(lo + a, lo + b, x[rows])
        if self.whole:
            if (lo, hi) != (0, self.sizes.size):
                raise RuntimeError("estimators that need the whole batch got a part")  # a bug of ours
            ids = np.repeat(np.arange(hi - lo), sizes)
            for name in self.whole:
                try:
                    adv = np.asarray(
                        cc.compute_advantages(x, ids, estimator=name, **self.options), dtype=np.float64
                    )
                except (ValueError, TypeError, OverflowError) as err:
                    raise CliError(f"estimator {name!r} rejected the batch: {err}") from None
                self._advantages(name, lo, hi, adv)

    def _advantages(self, name: str, lo: int, hi: int, adv: Array) -> None:
        at = int(self.starts[lo])
        self._check(adv)
        self.magnitude[name].add(adv)
        if self.keep_rows is not None:
            self.advantages[name][self.keep_rows[at : at + adv.size]] = adv
        for g in self._shown_in(lo, hi):
            a = int(self.starts[g]) - at
            self.shown[g]["advantages"][name] = adv[a : a + int(self.sizes[g])].copy()

    def _shown_in(self, lo: int, hi: int) -> list[int]:
        i, j = np.searchsorted(self.detail, [lo, hi])
        return self.detail[i:j]

    def _slice(self, lo: int, hi: int, x: Array) -> None:
        ids = np.repeat(np.arange(hi - lo), self.sizes[lo:hi])
        pieces = _scale_pieces(x, ids, hi - lo, self.weights)
        at = int(self.starts[lo])
        for g in self._shown_in(lo, hi):
            a = int(self.starts[g]) - at
            self.shown[g] = {"scores": x[a : a + int(self.sizes[g])].copy(), "advantages": {}}
        for name in self.local:
            self._advantages(name, lo, hi, _slice_advantages(x, pieces, name, self.options))
        for name, z in self.zscored.items():
            h, valid = _slice_advantages(x, pieces, z.spec.base, self.options), z.valid_rows(x)
            z.put(at, h, valid)
            for g in self._shown_in(lo, hi):
                a, b = int(self.starts[g]) - at, int(self.starts[g] + self.sizes[g]) - at
                self.shown[g]["advantages"][name] = (h[a:b].copy(), None if valid is None else valid[a:b])
        st = _slice_stats(x, ids, hi - lo, pieces, weights=self.weights, nan_policy=self.nan_policy)
        self._check(st.c_q, st.covariance_sum)
        sizes = self.sizes[lo:hi]
        self._add_sum("singleton_groups", sizes < 2)
        self._add_sum("degenerate_groups", st.degenerate)
        self._add_sum("c_q", st.c_q)
        self.c_q_low.append(float(np.min(st.c_q)))
        self.c_q_high.append(float(np.max(st.c_q)))
        self._add_sum("correlation_sum", st.correlation_sum)
        self._add_sum("covariance_sum", st.covariance_sum)
        self._add_sum("zero_variance", st.zero_variance)
        for i in range(self.k):
            self._add_sum(f"share/{i}", st.variance_share[:, i])
        self.corr_total += st.correlation.sum(axis=0)
        for g in self._shown_in(lo, hi):
            view = self.shown[g]
            view.update(
                covariance=st.covariance[g - lo],
                correlation=st.correlation[g - lo],
                covariance_sum=float(st.covariance_sum[g - lo]),
                correlation_sum=float(st.correlation_sum[g - lo]),
                c_q=float(st.c_q[g - lo]),
                variance_share=st.variance_share[g - lo],
                zero_variance=int(st.zero_variance[g - lo]),
                degenerate=bool(st.degenerate[g - lo]),
            )
            self._check(view["covariance"], view["correlation"])

    def finish(
        self,
        source: str,
        components: Sequence[str],
        label: Callable[[int], str],
        rows: Callable[[int], npt.NDArray[np.int64]],
    ) -> Explanation:
        """The report; ``label(g)`` and ``rows(g)`` (file rows) name the shown groups."""
        magnitude = {e: self.magnitude[e].result(self.n_rows) for e in self.estimators}
        for name, z in self.zscored.items():
            found = z.magnitude(self.n_rows)
            if found is None:
                raise Unstreamable  # a batch mean off 0 (not seen in practice): read the file whole
            magnitude[name] = found
            if not z.finite or not math.isfinite(found[1]):
                self.nonfinite = True
            if z.h is not None and self.keep_rows is not None:
                self.advantages[name][self.keep_rows] = z.values(z.h, z.valid)
            for g in self.detail:
                self.shown[g]["advantages"][name] = z.values(*self.shown[g]["advantages"][name])
        n_groups = self.sizes.size
        mean_corr = self.corr_total / max(n_groups, 1)
        self._check(mean_corr)

        def mean(key: str) -> float:
            return float(np.sum(self.sums[key])) / n_groups

        summary = {
            "groups": float(n_groups),
            "singleton_groups": float(np.sum(self.sums["singleton_groups"])),
            "degenerate_groups": float(np.sum(self.sums["degenerate_groups"])),
            "c_q/mean": mean("c_q"),
            "c_q/min": float(np.min(self.c_q_low)),
            "c_q/max": float(np.max(self.c_q_high)),
            "correlation_sum/mean": mean("correlation_sum"),
            "covariance_sum/mean": mean("covariance_sum"),
            "zero_variance_components/mean": mean("zero_variance"),
        }
        for i, name in enumerate(components):
            summary[f"denominator_share/{name}"] = mean(f"share/{i}")
        views = []
        for g in self.detail:
            view = self.shown[g]
            advantages = {e: view["advantages"][e] for e in self.estimators}
            views.append(
                GroupView(
                    label=label(g),
                    rows=rows(g),
                    advantages=advantages,
                    **{k: v for k, v in view.items() if k != "advantages"},
                )
            )
        return Explanation(
            source=source,
            n_rows=self.n_rows,
            n_groups=n_groups,
            components=tuple(components),
            weights=self.weights,
            estimators=self.estimators,
            groups=tuple(views),
            summary=summary,
            mean_correlation=mean_corr,
            magnitude=magnitude,
            advantages=self.advantages,
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
    shown = list(range(batch.n_groups)) if detail is None else list(detail)
    ids = batch.group_ids
    with np.errstate(all="ignore"):
        overflow_check(batch.source, batch.components, batch.scores, w, [])
        order = np.argsort(ids, kind="stable")
        sizes = np.bincount(ids, minlength=batch.n_groups).astype(np.int64)
        missing = bool(np.isnan(batch.scores).any())
        engine = _Engine(
            sizes, batch.components, w, estimators, nan_policy, shown, missing=missing, keep_rows=order
        )
        ranges = [(0, batch.n_groups)] if engine.needs_whole else whole_group_ranges(sizes, SLICE_ROWS)
        ends = np.cumsum(sizes)
        for lo, hi in ranges:
            engine.add(lo, hi, batch.scores[order[ends[lo] - sizes[lo] : ends[hi - 1]]])
        report = engine.finish(
            batch.source,
            batch.components,
            batch.group_labels.__getitem__,
            lambda g: order[ends[g] - sizes[g] : ends[g]],
        )
        if engine.nonfinite:
            overflow_check(batch.source, batch.components, batch.scores, w, [np.array([np.inf])])
    return report


#: Memory one pass over a reward file may hold (its rows as float64): the larger of this and the
#: file's size over :data:`PASS_SHARE`, so a small file takes one pass and a large one several.
#: CSV and Parquet passes are cheap (~0.3 s for 50 MB of CSV); JSONL takes half its size, since
#: parsing JSON is most of the time (~2 s a pass over 100 MB) and its files are about twice the
#: CSV of the same rows, so 3x its size leaves the room. 2 MB, not 4: the 22 MB Parquet file of
#: the benchmark peaks ~5 MB lower in 17 passes of 2.75 MB instead of 11 of 4 MB, in
#: about the same time (3.2 s).
PASS_BYTES = 1 << 21
PASS_SHARE = {"csv": 8, "jsonl": 2, "parquet": 8}


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
    """:func:`explain` of a reward file, read in passes of whole groups; returns the report and the
    index (in ``report.groups``) of ``plot_group`` (default: the first group).

    The group column is read once into int32 codes; then each pass reads the reward columns and
    keeps the rows of its groups, sorted by group, for :class:`_Engine`. ``weights(names)`` gives
    the weights once the component names are known. A file the streamed reader cannot take (bad
    values, types that change) is read whole by :func:`read_rewards`, which names the problem.
    """
    allow_nan = nan_policy == "ignore"
    try:
        with returning_pool():
            return _explain_streamed(
                path,
                group_col,
                components,
                file_format,
                nan_policy,
                estimators,
                weights,
                max_groups,
                plot_group,
            )
    except Unstreamable:
        pass
    batch = read_rewards(
        path, group_col=group_col, components=components, file_format=file_format, allow_nan=allow_nan
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
    labels = batch.group_labels
    group = _plot_group(plot_group, lambda label: labels.index(label) if label in labels else None)
    detail = sorted({*range(min(max_groups, batch.n_groups)), group})
    report = explain(batch, estimators=estimators, weights=weights, nan_policy=nan_policy, detail=detail)
    return report, detail.index(group)


def _plot_group(label: str | None, index: Callable[[str], int | None]) -> int:
    if label is None:
        return 0
    g = index(label)
    if g is None:
        raise CliError(f"--plot-group {label!r} is not a group in the file")
    return g


def _explain_streamed(
    path: str | Path,
    group_col: str,
    components: Sequence[str] | None,
    file_format: str | None,
    nan_policy: cc.NanPolicy,
    estimators: Sequence[str],
    weights: Callable[[Sequence[str]], Array | None],
    max_groups: int,
    plot_group: str | None,
) -> tuple[Explanation, int]:
    allow_nan = nan_policy == "ignore"
    groups = stream_group_codes(path, fmt=file_format, group_col=group_col, components=components)
    names = groups.components
    sizes = np.bincount(groups.codes, minlength=groups.n_groups)
    n_rows, k = groups.codes.size, len(names)
    known = cc.estimator_names()
    whole = any(e in known and not is_group_local(e) and e not in _ZSCORE_OF for e in estimators)
    size = Path(path).stat().st_size
    per_pass = (
        n_rows
        if whole
        else max(SLICE_ROWS, max(PASS_BYTES, size // _share(path, file_format)) // (8 * max(k, 1)))
    )
    passes = whole_group_ranges(sizes, per_pass)
    plot = None if plot_group is None else groups.index(plot_group)
    detail = sorted({*range(min(max_groups, groups.n_groups)), 0 if plot is None else plot})
    starts = np.cumsum(sizes) - sizes
    fill = starts.copy()  # next free sorted position of each group

    def read_pass(lo: int, hi: int, scan: _Scan | None) -> Array:
        """The rows of groups [lo, hi), sorted by group (file order within a group); ``scan``
        (first pass) sees every row."""
        base = int(starts[lo])
        x = np.empty((int(starts[hi - 1] + sizes[hi - 1]) - base, k), dtype=np.float64)

        def keep(offset: int, n: int) -> npt.NDArray[np.bool_] | None:
            codes = groups.codes[offset : offset + n]
            return None if scan is not None else (codes >= lo) & (codes < hi)

        stream = stream_scores(path, fmt=file_format, components=names, allow_nan=allow_nan, keep=keep)
        for offset, mask, block in stream:
            codes = groups.codes[offset : offset + (block.shape[0] if mask is None else mask.size)]
            if scan is not None:
                scan.see(block, offset)
                mask = (codes >= lo) & (codes < hi)
                block = block[mask]
            if mask is not None:
                codes = codes[mask]
            x[_positions(codes, fill) - base] = block
        return x

    scan = _Scan(k)
    x = read_pass(*passes[0], scan)
    if scan.rows != n_rows:
        raise Unstreamable  # the two readers disagree: let the whole-file reader decide
    # the file is read and valid: now the option errors, in the order of the whole-file command
    given = weights(names)
    g = _plot_group(plot_group, groups.index)
    w = _check_options(estimators, k, given)
    if scan.overflows(w):
        raise Unstreamable  # the whole-file reader names the value and its row
    engine = _Engine(sizes, names, w, estimators, nan_policy, detail, missing=scan.missing)
    if engine.needs_whole and len(passes) > 1:
        raise Unstreamable
    with np.errstate(all="ignore"):
        engine.add(*passes[0], x)
        del x
        for lo, hi in passes[1:]:
            engine.add(lo, hi, read_pass(lo, hi, None))
        rows = groups.rows(detail)
        report = engine.finish(str(path), names, groups.label, rows.__getitem__)
    if engine.nonfinite:
        raise Unstreamable
    return report, detail.index(g)


def _share(path: str | Path, fmt: str | None) -> int:
    return PASS_SHARE[format_of(Path(path), fmt)]


class _Scan:
    """What the first pass learns from every row: the count, missing values, each column's range."""

    def __init__(self, k: int) -> None:
        self.rows = 0
        self.missing = False
        self.high = np.full(k, np.nan)  # fmax/fmin skip NaN
        self.low = np.full(k, np.nan)

    def see(self, block: Array, offset: int) -> None:
        self.rows = max(self.rows, offset + block.shape[0])
        if block.size:
            self.missing = self.missing or bool(np.isnan(block).any())
            self.high = np.fmax(self.high, np.fmax.reduce(block, axis=0))
            self.low = np.fmin(self.low, np.fmin.reduce(block, axis=0))

    def overflows(self, weights: Array) -> bool:
        return _squares_overflow(np.stack([self.high, self.low]), weights)


def _positions(codes: npt.NDArray[np.int32], fill: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Sorted-by-group positions of rows with these group codes, in file order within a group
    (a stable counting sort); ``fill`` (each group's next free position) moves past them."""
    order = np.argsort(codes, kind="stable")
    ranked = codes[order]
    first = np.flatnonzero(np.diff(ranked, prepend=-1))
    index = np.arange(ranked.size)
    run = np.repeat(first, np.diff(np.append(first, ranked.size)))
    out = np.empty(ranked.size, dtype=np.int64)
    out[order] = fill[ranked] + (index - run)
    fill[ranked[first]] += np.diff(np.append(first, ranked.size))
    return out


def _fmt(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:.4f}"


def _matrix_table(names: Sequence[str], m: Array) -> str:
    return markdown_table(
        ["", *names], [[n, *(_fmt(v) for v in row)] for n, row in zip(names, m, strict=False)]
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
