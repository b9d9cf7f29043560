"""numpy, and everything computed on host memory through numpy: the group kernel for numpy
arrays, host labelling of ids, and dense GRPO / CorrGRPO in the input's float dtype.

**Group kernel** (:class:`NumpyKernel`): dense groups are summed with ``einsum`` (one tight loop, no
temporary for the sum of squares), several times faster than ``sum(axis=1)`` on a short middle
axis. Ragged groups are labelled ``0..G-1`` without sorting where possible (ids already in runs,
or ids in a compact range, by direct addressing) and summed with ``bincount`` (``reduceat`` for
runs), one component column at a time; gathers and updates write into arrays of ours.

**Dense estimators** (:func:`dense`; used for torch tensors on the CPU through zero-copy numpy
views: a numpy call costs under a microsecond where a torch CPU call costs several, and at the
sizes TRL hands over most of the time is per-call overhead). The maths is that of
:func:`corrgrpo_core._stats.moments` with :func:`corrgrpo_core._estimators.grpo` and ``corr_parts``:

- shift by the group's first row, so a constant component is exactly 0 in any dtype;
- centre, then sum the squares of the centred values (two passes: relative error about n eps,
  so float32 keeps about six significant digits);
- the scale-relative zero-variance test of the generic path (same default tolerance);
- the correlation sum as the group variance of the summed z-scores.

Layout: reductions over a short innermost axis, and broadcasts of group values along it, are
several times slower than a copy, so the first pass writes the shifted values position-major,
``(n, K, B)``; every later reduction and broadcast runs along the long batch axis. Temporaries: the
shifted values and one product, each the size of the input.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._lib._compat import Array, Namespace
from ._generic import CHUNK_ROWS, SMALL_GROUP, Kernel, RaggedIndex, Runs
from ._options import KernelOptions

# Ids in a range this many times the row count are labelled by direct addressing (no sort).
_DIRECT_SPAN = 4
# Rows per piece where a row-level temporary is taken in pieces (a piece of float64 is 128 KiB).
_PIECE = 1 << 14
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_EPS = {np.dtype(t): float(np.finfo(t).eps) for t in (np.float16, np.float32, np.float64)}
_TINY = float(np.finfo(np.float32).tiny)
# The generic path's default zero-variance tolerance: 64 epsilons of its working dtype, float64.
_DEFAULT_RTOL = 64.0 * _EPS[np.dtype(np.float64)]


def dense(estimator: str, scores: Array, weights: Any, options: KernelOptions) -> Array | None:
    """Advantages shaped like ``scores`` without its last axis, or None for what this does not cover.

    ``estimator``: grpo, corrgrpo, mo_grpo, gdpo, gdpo_corr or dara, with its checked
    ``options``. ``scores`` is ``(n, K)`` or ``(B, n, K)`` float32 / float64; None (the generic path
    runs) for other dtypes, empty batches, ``n <= ddof``, a group of one under
    ``singleton="raise"``, weights that are not K finite numbers (or need gradients), and scores
    that are not all finite.
    """
    if scores.dtype not in _FLOATS or scores.ndim not in (2, 3):
        return None
    x = scores if scores.ndim == 3 else scores[None]
    b, n, k = x.shape
    ddof = options.ddof
    if b == 0 or n == 0 or k == 0 or n <= ddof or (n == 1 and options.singleton == "raise"):
        return None
    if b > max(1, CHUNK_ROWS // n) and estimator in _GROUP_LOCAL:
        return _in_pieces(estimator, x, weights, options)
    w = None
    if weights is not None:
        w = _weights(weights, k, x.dtype)
        if w is None:
            return None
    rtol = _DEFAULT_RTOL if options.zero_variance_rtol is None else options.zero_variance_rtol
    eps, outside, floor = options.eps, options.eps_placement == "outside", options.min_correlation_sum
    with np.errstate(all="ignore"):  # NaN / inf / overflow: detected, then declined
        if estimator == "corrgrpo":
            out = _corrgrpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol, floor=floor)
        elif estimator == "grpo":
            out = _grpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
        elif estimator == "mo_grpo":
            out = _mo_grpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
        elif estimator == "gdpo":
            out = _gdpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
        elif estimator == "gdpo_corr":
            group_outside = options.group_eps_placement == "outside"
            out = _gdpo_corr(
                x, w, eps=eps, outside=outside, group_outside=group_outside, ddof=ddof, rtol=rtol, floor=floor
            )
        elif (
            estimator == "dara"
            and options.variant in ("sym", "asym")
            and options.base in ("gdpo", "corrgrpo")
        ):
            out = _dara(
                x,
                w,
                eps=eps,
                outside=outside,
                ddof=ddof,
                rtol=rtol,
                floor=floor,
                variant=options.variant,
                base=options.base,
                max_weight=options.max_weight,
            )
        else:
            return None  # another estimator, or an option the generic path names
    if out is None or scores.ndim == 3:
        return out
    return out[0]


# Estimators whose groups are computed independently: a large batch runs in pieces of whole groups.
_GROUP_LOCAL = frozenset({"grpo", "corrgrpo", "mo_grpo"})


def _in_pieces(estimator: str, x: Array, weights: Any, options: KernelOptions) -> Array | None:
    """:func:`dense` of a group-local estimator over (B, n, K) ``x`` in pieces of about CHUNK_ROWS
    rows of whole groups (a piece's temporaries stay in cache; the batch-level estimators run
    whole), or None where a piece declines (the generic path then runs the whole batch)."""
    b, n = x.shape[0], x.shape[1]
    step = max(1, CHUNK_ROWS // n)
    out = np.empty((b, n), dtype=x.dtype)
    for a in range(0, b, step):
        part = dense(estimator, x[a : a + step], weights, options)
        if part is None:
            return None
        out[a : a + step] = part
    return out


def _weights(weights: Any, k: int, dtype: Any) -> Array | None:
    """``weights`` as K finite numbers of ``dtype``, or None where the generic path must run (it
    names the problem, rescales what overflows ``dtype``, or keeps gradients)."""
    if getattr(weights, "requires_grad", False):
        return None
    try:
        w = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights)
    except (TypeError, ValueError, RuntimeError):
        return None
    if w.dtype.kind not in "iuf" or w.shape != (k,):  # complex, strings, objects: the generic error
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        w = w.astype(dtype)
    return w if bool(np.isfinite(w).all()) else None  # inf, NaN, or beyond float32


def _grpo(x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float) -> Array | None:
    n, k = x.shape[1], x.shape[2]
    largest = None  # (B,): a bound on sum_k |shifted component| of a row of the group
    if k == 1 and w is None:
        c, ref = _shifted(x[..., 0].T, None)  # (n, B)
    else:  # sum the shifted components: a large offset of one component costs no precision
        parts, ref_k = _shifted(np.transpose(x, (1, 2, 0)), w)  # (n, K, B)
        c, ref = np.add.reduce(parts, axis=1), np.add.reduce(ref_k, axis=0)
        # One component: its rounding is relative to the total itself, no cancellation. float64:
        # no check, as a group it flagged could only go to the generic path, which rounds as much.
        if k > 1 and x.dtype != np.float64:
            largest = np.add.reduce(np.maximum.reduce(np.abs(parts, out=parts), axis=0), axis=0)
        del parts
    stats = _moments(c, ref, n, rtol)
    if stats is None:
        return None
    ss, varies = stats
    ss /= n - ddof
    den = _den(ss, eps, outside)
    fixed = ~varies
    den[fixed] = np.inf  # z = 0 for a group whose total does not vary
    out = _rows_out(c, den)
    if largest is None:
        return out
    # A total that does not vary in float32 may vary by its rounding: against the smallest
    # denominator it could then have (its spread 0, eps alone), it is checked like the others.
    den[fixed] = max(eps if outside else math.sqrt(eps), _TINY)  # _TINY: eps 0 flags any term
    np.divide(largest, den, out=largest)
    limit = _cancel_limit(k, x.dtype, amplify=1 + math.sqrt(n / (n - ddof)))
    if float(largest.max()) <= limit:
        return out
    return _redo_in_float64(out, x, w, largest > limit, _grpo, eps=eps, outside=outside, ddof=ddof, rtol=rtol)


def _cancel_limit(k: int, dtype: Any, *, amplify: float = 1.0) -> float:
    """The largest ratio for which a group's numerator is not mostly cancellation, which float32
    cannot keep to 1e-4 of the advantages' scale. The ratio: a bound on sum_k |term| of a row over
    the advantages' denominator (or the group's largest |numerator| where that is larger).
    Shifted (and weighted) terms round to at most (K + 1) eps times their |sum| (eps / 2 per
    product and per partial sum), an error the advantages see over the denominator, ``amplify``
    times where the denominator is the numerator's own spread (1 + sqrt(n / (n - ddof))).
    The limit is (K + 1) eps amplify ratio = 5e-5: a margin of 2 for the terms left out (the
    centring, the division)."""
    return 5e-5 / ((k + 1) * _EPS[np.dtype(dtype)] * amplify)


def _redo_in_float64(
    out: Array, x: Array, w: Array | None, groups: Array, kernel: Callable[..., Array | None], **options: Any
) -> Array | None:
    """``out`` (B, n) with the rows of ``groups`` (a (B,) mask) recomputed by ``kernel`` (with
    ``options``) from float64 copies of their scores: those groups' totals are mostly
    cancellation, which their dtype cannot keep. None (the generic path runs) where ``x`` is
    float64 already, or the float64 kernel declines too."""
    if x.dtype == np.float64:
        return None
    redone = kernel(x[groups].astype(np.float64), None if w is None else w.astype(np.float64), **options)
    if redone is None:
        return None
    out[groups] = redone
    return out


def _component_variances(
    x: Array, w: Array | None, *, ddof: int, rtol: float
) -> tuple[Array, Array, Array] | None:
    """(n, K, B) centred (weighted) components of (B, n, K) scores, their (K, B) group variances
    and whether each varies; None when not all finite."""
    n = x.shape[1]
    c, ref = _shifted(np.transpose(x, (1, 2, 0)), w)
    stats = _moments(c, ref, n, rtol)
    if stats is None:
        return None
    ss, varies = stats
    ss /= n - ddof
    return c, ss, varies


def _corrgrpo(
    x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float, floor: float
) -> Array | None:
    n = x.shape[1]
    stats = _component_variances(x, w, ddof=ddof, rtol=rtol)
    if stats is None:
        return None
    c, ss, varies = stats
    inv = np.zeros_like(ss)
    np.divide(1.0, np.sqrt(ss, out=ss), out=inv, where=varies)
    largest = np.add.reduce(ss, axis=0)  # sum_k std_k: a bound on sum_k |c_ik| (see below)
    num = np.add.reduce(c, axis=1)  # (n, B): the centred total
    c *= inv
    zsum = np.add.reduce(c, axis=1)  # sum_k z_ik
    zsum *= zsum
    corr = np.add.reduce(zsum, axis=0)
    corr /= n - ddof
    corr[corr <= noise_floor(n, x.shape[2], x.dtype)] = 0.0  # rounding of the z-scores, not signal
    den = _den(np.maximum(corr, floor, out=corr), eps, outside)
    if eps <= 0:
        den[den <= 0] = np.inf  # advantage 0 where the denominator is 0, as the generic path
    out = _rows_out(num, den)
    groups = None if x.shape[2] == 1 else _corr_cancelling(largest, num, den, n, ddof, x.shape[2], x.dtype)
    if groups is None:
        return out
    options = {"eps": eps, "outside": outside, "ddof": ddof, "rtol": rtol, "floor": floor}
    return _redo_in_float64(out, x, w, groups, _corrgrpo, **options)


def _corr_cancelling(
    std_sum: Array, num: Array, den: Array, n: int, ddof: int, k: int, dtype: Any
) -> Array | None:
    """The (B,) mask of the groups whose CorrGRPO numerator is mostly cancellation (see
    :func:`_cancel_limit`), or None where there is none. The ratio is sum_k |c_ik| (at most
    sum_k std_k sqrt((n - ddof)(n - 1) / n), as |centred c_ik| <= sqrt((n - 1) / n sum_i c_ik^2))
    over the larger of the denominator and the group's largest |numerator|. Over the denominator
    alone it is a bound that clears almost every batch in two numpy calls; only a batch it does not
    clear pays for the numerators. A group whose centred total is 0 in every row in float32 is
    checked too: the true total may differ by its rounding (where the components cancel exactly,
    as pass/fail against its complement, the float64 recompute gives 0 again). Groups of one
    (n = 1, ddof = 0) have no numerator to lose."""
    scale = math.sqrt((n - ddof) * (n - 1) / n)
    if scale == 0:
        return None
    limit = _cancel_limit(k, dtype) / scale  # on std_sum / ...
    if float(np.maximum.reduce(std_sum / den, axis=None)) <= limit:
        return None
    top = np.maximum.reduce(np.abs(num), axis=0)
    groups = std_sum > limit * np.maximum(den, top)
    return groups if bool(groups.any()) else None


def _abs_sum_k(c: Array, out: Array | None = None) -> Array:
    """(n, B): sum_k |c_k| of (n, K, B) ``c``, a component at a time (temporaries of one column);
    a sum of K terms rounds to about (3 + K) eps times it."""
    out = np.abs(c[:, 0], out=out)
    for j in range(1, c.shape[1]):
        out += np.abs(c[:, j])
    return out


def _z_denominators(
    x: Array, *, eps: float, outside: bool, ddof: int, rtol: float
) -> tuple[Array, Array, Array] | None:
    """(n, K, B) centred unweighted components, their (K, B) z-score denominators (inf where a
    component does not vary, so that its z-score is 0) and whether each varies; None if not finite."""
    stats = _component_variances(x, None, ddof=ddof, rtol=rtol)
    if stats is None:
        return None
    c, var_g, varies = stats
    den = _den(var_g, eps, outside)
    den[~varies | (den <= 0)] = np.inf
    return c, den, varies


def _mo_grpo_rows(
    x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float
) -> tuple[Array, float] | None:
    """(n, B): H = sum_k w_k z_k, z the group z-scores of the unweighted components (0 where one
    does not vary), and the largest sum_k |w_k z_k| of a row (H's rounding is about (3 + K) eps
    times it); None when not all finite."""
    got = _z_denominators(x, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
    if got is None:
        return None
    c, den, _ = got
    c *= np.divide(1.0 if w is None else w[:, None], den)  # (K, B): w_k / (std + eps)
    return np.add.reduce(c, axis=1), float(_abs_sum_k(c).max())


def _mo_grpo(x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float) -> Array | None:
    """(B, n) MO-GRPO advantages of (B, n, K) scores, or None when not all finite."""
    rows = _mo_grpo_rows(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
    if rows is None or not bool(np.isfinite(np.add.reduce(rows[0], axis=None))):
        return None
    return np.ascontiguousarray(rows[0].T)


def _gdpo(x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float) -> Array | None:
    """(B, n) GDPO advantages: MO-GRPO's H, then its z-score over the whole batch, or None when not
    all finite."""
    got = _mo_grpo_rows(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
    if got is None:
        return None
    return _batch_zscore(*got, k=x.shape[2], eps=eps, outside=outside, ddof=ddof, rtol=rtol)


def _batch_zscore(
    h: Array, largest: float, *, k: int, eps: float, outside: bool, ddof: int, rtol: float
) -> Array | None:
    """(B, n): the (n, B) row values ``h`` z-scored over the whole batch (the generic path's
    zero-variance test), written row-major; ``largest``: the largest sum of |terms| of an h.
    None when not all finite, or when h is mostly cancellation (its terms nearly sum to 0), which
    float32 cannot hold to 1e-5."""
    rows = h.size
    mean = np.add.reduce(h, axis=None) / rows
    h -= mean
    sq = h * h
    ss = float(np.add.reduce(sq, axis=None))  # pairwise summation: error about log(rows) eps
    del sq
    if not (math.isfinite(ss) and math.isfinite(float(mean))):
        return None
    dof = rows - ddof
    var = ss / dof if dof > 0 else 0.0
    varies = dof > 0 and var > 0 and ss > rtol * rtol * rows * (float(mean) ** 2 + ss / rows)
    den = math.sqrt(var) + eps if outside else math.sqrt(var + eps)
    if (3 + k) * _EPS[h.dtype] * largest > 1e-5 * den:
        return None  # whether h varies or not, its rounding would show in A (at 1e-5 of A's scale)
    if not varies:
        den = math.inf
    out = np.empty(h.shape[::-1], dtype=h.dtype)
    np.divide(h, h.dtype.type(den) if den > 0 else np.inf, out=out.T)
    return out


def _density(varies: Array, max_weight: float) -> Array:
    """DARA's (K,) weights min(max_weight, sqrt(max_j pi_j / pi_k)), pi_k the share of groups where
    component k varies (1 where it varies in none): ``varies`` is (K, B)."""
    pi = np.add.reduce(varies, axis=1) / varies.shape[1]
    ratio = np.divide(pi.max(), pi, out=np.ones_like(pi), where=pi > 0)
    return np.minimum(np.sqrt(ratio), max_weight)


def _calibrate(c: Array, density: Array, variant: str) -> None:
    """In place, component k of (n, K, B) ``c``: sym d_k c, asym d_k max(c, 0) + min(c, 0)."""
    for j in range(c.shape[1]):
        col = c[:, j]
        np.multiply(col, col.dtype.type(density[j]), out=col, where=True if variant == "sym" else col > 0)


def _dara(
    x: Array,
    w: Array | None,
    *,
    eps: float,
    outside: bool,
    ddof: int,
    rtol: float,
    floor: float,
    variant: str,
    base: str,
    max_weight: float,
) -> Array | None:
    """(B, n) DARA advantages (base "gdpo": calibrated group z-scores, weighted, then a batch
    z-score; base "corrgrpo": calibrated centred weighted components over CorrGRPO's norm)."""
    k = x.shape[2]
    if base == "gdpo":
        got = _z_denominators(x, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
        if got is None:
            return None
        c, den, varies = got
        c /= den  # group z-scores, 0 where a component does not vary
        _calibrate(c, _density(varies, max_weight), variant)
        if w is not None:
            c *= w[:, None]
        largest = float(_abs_sum_k(c).max())
        return _batch_zscore(
            np.add.reduce(c, axis=1), largest, k=k, eps=eps, outside=outside, ddof=ddof, rtol=rtol
        )
    n = x.shape[1]
    stats = _component_variances(x, w, ddof=ddof, rtol=rtol)
    if stats is None:
        return None
    c, var_g, varies = stats
    inv = np.zeros_like(var_g)
    np.divide(1.0, np.sqrt(var_g), out=inv, where=varies)
    zsum = c[:, 0] * inv[0]
    for j in range(1, k):
        zsum += c[:, j] * inv[j]
    zsum *= zsum
    corr = np.add.reduce(zsum, axis=0)
    corr /= n - ddof
    corr[corr <= noise_floor(n, k, x.dtype)] = 0.0  # rounding of the z-scores, not signal
    den = _den(np.maximum(corr, floor, out=corr), eps, outside)
    den[den <= 0] = np.inf
    _calibrate(c, _density(varies, max_weight), variant)
    num = np.add.reduce(c, axis=1)
    if k > 1 and _terms_cancel(c, num, den, x.dtype):
        return None  # the densities are the batch's: no group can be redone alone
    return _rows_out(num, den)


def _terms_cancel(c: Array, num: Array, den: Array, dtype: Any) -> bool:
    """Whether some group's numerator ``num`` = sum_k c_ik, of (n, K, B) terms ``c``, is mostly
    cancellation: its rounding, about (K + 3) eps sum_k |c_ik|, above 5e-5 of the larger of the
    group's denominator and its largest |numerator| (1e-4 of its advantages, with a margin of 2).
    A group whose numerator is exactly 0 in every row keeps advantage 0 and is left out."""
    mag = np.maximum.reduce(_abs_sum_k(c), axis=0)  # (B,)
    top = np.maximum.reduce(np.abs(num), axis=0)
    unit = (c.shape[1] + 3) * _EPS[np.dtype(dtype)]
    return bool(np.any((top > 0) & (unit * mag > 5e-5 * np.maximum(den, top))))


def _gdpo_corr(
    x: Array,
    w: Array | None,
    *,
    eps: float,
    outside: bool,
    group_outside: bool,
    ddof: int,
    rtol: float,
    floor: float,
) -> Array | None:
    """(B, n) GDPO-corr advantages: U_k = w_k z_k (group z-scores), centred over the batch, over
    sqrt(Var_B(sum_k U_k / std_B U_k)) (+ eps); None when not all finite, or where float32 cannot
    keep 1e-5 of A (a numerator or a correlation sum that is mostly cancellation)."""
    got = _z_denominators(x, eps=eps, outside=group_outside, ddof=ddof, rtol=rtol)
    if got is None:
        return None
    u, den_g, _ = got
    u *= np.divide(1.0 if w is None else w[:, None], den_g)  # (n, K, B): U = w_k z_k
    del den_g
    n, k, b = u.shape
    rows, dof = n * b, n * b - ddof
    if dof <= 0:
        return None
    eps32 = _EPS[x.dtype]
    inv = np.zeros(k, dtype=u.dtype)  # 1 / std_B U_k where U_k varies over the batch
    for j in range(k):  # a component at a time: temporaries of one column
        col = u[:, j]
        mean = float(np.add.reduce(col, axis=None)) / rows
        col -= col.dtype.type(mean)
        ss = float(np.add.reduce(col * col, axis=None))
        if not (math.isfinite(ss) and math.isfinite(mean)):
            return None
        if ss > 0 and ss > rtol * rtol * rows * (mean * mean + ss / rows):
            inv[j] = 1.0 / math.sqrt(ss / dof)
    num = np.add.reduce(u, axis=1)  # (n, B): sum_k (U_k - mean_B U_k)
    mag = _abs_sum_k(u)  # sum_k |U_k - mean|: the numerator rounds to about (3 + K) eps times it
    largest = float(mag.max())
    u *= inv[None, :, None]  # batch z-scores of U
    zsum = np.add.reduce(u, axis=1)
    _abs_sum_k(u, out=mag)  # sum_k |z_k|: zsum rounds to about (3 + K) eps times it
    del u
    total = float(np.add.reduce(zsum * zsum, axis=None)) / dof
    total_err = 2.0 * (3 + k) * eps32 * float(np.add.reduce(np.abs(zsum) * mag, axis=None)) / dof

    def norm(spread: float) -> float:
        corr = max(spread, floor)
        return math.sqrt(corr) + eps if outside else math.sqrt(corr + eps)

    den = norm(total)
    if not math.isfinite(den) or not den > 0:
        return None
    # Mostly cancellation (a numerator whose terms nearly sum to 0, or a correlation sum near 0
    # whose square root amplifies its rounding): float32 cannot keep 1e-5 of A, the float64 path runs.
    top = float(np.abs(num).max())
    if (3 + k) * eps32 * largest > 1e-5 * max(den, top):
        return None
    if norm(total + total_err) - norm(max(total - total_err, 0.0)) > 1e-5 * den:
        return None
    out = np.empty((b, n), dtype=num.dtype)
    np.divide(num, num.dtype.type(den), out=out.T)
    return out


def noise_floor(n: int, k: int, dtype: Any) -> float:
    """Correlation sums at most this are rounding of the z-scores (each about eps off): zero.

    A degenerate group (anti-correlated components) has a correlation sum of exactly 0, which
    the z-scores' rounding turns into about n K^2 eps^2; with eps outside the square root that
    would move the denominator by sqrt of it (about 1e-7 in float32, as large as eps itself).
    """
    return float((4.0 * k * n * _EPS[np.dtype(dtype)]) ** 2)


def _shifted(xt: Array, w: Array | None) -> tuple[Array, Array]:
    """x - (first row of its group), position-major (a new contiguous array), and that first row."""
    c = np.empty(xt.shape, dtype=xt.dtype)
    np.subtract(xt, xt[:1], out=c)
    ref = xt[0]
    if w is not None:
        c *= w[:, None]
        ref = ref * w[:, None]
    return c, ref


def _moments(c: Array, ref: Array, n: int, rtol: float) -> tuple[Array, Array] | None:
    """Centre ``c`` in place; its sums of squares and whether each component varies (None: not finite)."""
    m = np.add.reduce(c, axis=0)
    m /= n
    c -= m
    sq = c * c
    ss = np.add.reduce(sq, axis=0)
    del sq
    if not np.isfinite(np.add.reduce(ss, axis=None)):
        return None  # NaN, inf or overflow: the generic path (float64) handles or names them
    # population variance against the mean square of the unshifted values (as _stats.moments):
    # ss > rtol^2 n (mean^2 + ss / n), i.e. ss (1 - rtol^2) > rtol^2 n mean^2
    m += ref
    m *= m
    m *= rtol * rtol * n
    keep = 1.0 - rtol * rtol
    return ss, (ss if keep == 1.0 else ss * keep) > m


def _den(spread: Array, eps: float, outside: bool) -> Array:
    """sqrt(spread) + eps ("outside") or sqrt(spread + eps) ("inside"), in place."""
    if outside:
        np.sqrt(spread, out=spread)
        spread += eps
    else:
        spread += eps
        np.sqrt(spread, out=spread)
    return spread


def _rows_out(values: Array, den: Array) -> Array:
    """values / den, written back row-major: (n, B) -> (B, n)."""
    out = np.empty(values.shape[::-1], dtype=values.dtype)
    np.divide(values, den, out=out.T)
    return out


# --- the group kernel --------------------------------------------------------------------------


class NumpyKernel(Kernel):
    """Group kernels for numpy arrays (see the module docstring)."""

    on_host = True

    def __init__(self, xp: Namespace) -> None:
        super().__init__(xp)

    def sum_k(self, x: Array) -> Array:
        if x.shape[-1] == 1:  # the sum of one component is the component: no copy (never written)
            return x
        return np.einsum("...k->...", x)[..., None]  # one tight loop over a short last axis

    def batch_sum_sq(self, x: Array, axes: tuple[int, ...]) -> Array:
        flat = np.reshape(x, (-1, x.shape[-1]))  # no N x K temporary for the squares
        kept = tuple(1 if a in axes else s for a, s in enumerate(x.shape))
        return np.reshape(np.einsum("nk,nk->k", flat, flat), kept)

    def batch_row_dot(self, x: Array, g: Array) -> Array:
        return np.einsum("...k,...k->...", x, np.broadcast_to(g, x.shape))[..., None]

    def dense_sum(self, x: Array) -> Array:
        return _dense_sum(x, None)

    def dense_sum_sq(self, x: Array) -> Array:
        return _dense_sum(x, x)

    def dense_row_dot(self, x: Array, g: Array) -> Array:
        return np.einsum("bnk,bk->bn", x, g[:, 0, :])[..., None]

    def find_runs(self, ids: Array) -> Runs | None:
        return find_runs(ids)

    def index(
        self, ids: Array, runs: Runs | None, dtype: Any, *, lazy: bool
    ) -> tuple[RaggedIndex, Array, bool]:
        index = label(ids, runs)
        assert index.size is not None
        return index, index.size[:, None].astype(dtype), small(index.size)

    def segment_sum(self, x: Array, r: RaggedIndex) -> Array:
        return segment_sums(x, r, square=False)

    def segment_sum_sq(self, x: Array, r: RaggedIndex) -> Array:
        return segment_sums(x, r, square=True)

    def gather(self, g: Array, r: RaggedIndex) -> Array:
        if g.ndim == 2 and g.shape[1] > 1:
            # Column-major rows: each component's column is contiguous, which is what the
            # per-column bincount and the elementwise updates want.
            out = np.empty((g.shape[1], r.labels.shape[0]), dtype=g.dtype)
            for k, column in enumerate(_by_column(g)):
                _take_rows(column, r.labels, out[k])
            return out.T
        return _take_rows(g, r.labels, np.empty((r.labels.shape[0], *g.shape[1:]), dtype=g.dtype))

    def subtract_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return self.shift_divide_gathered(x, g, None, r, in_place=False)

    def divide_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return self.shift_divide_gathered(x, None, g, r, in_place=True)

    def shift_divide_gathered(
        self, x: Array, sub: Array | None, div: Array | None, r: RaggedIndex, *, in_place: bool
    ) -> Array:
        return shift_divide_rows(x, sub, div, r, in_place=in_place)

    def row_dot_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return row_dot_rows(x, g, r)


# Ragged groups on the host, a piece of rows at a time: group values are gathered a piece at a
# time, never as a copy of the batch. ``ref`` (group level): the functions take x - ref[labels]
# in place of x, computed a piece at a time (the values shifted by a row of their group, as
# :func:`corrgrpo_core._stats.moments` takes them, without a shifted copy of the batch).


def _pieces(r: RaggedIndex, rows: int) -> Iterator[tuple[int, int, Array]]:
    """(a, b, labels of rows a..b in numpy's index type): each piece's labels converted once."""
    for a in range(0, rows, _PIECE):
        yield a, a + _PIECE, r.labels[a : a + _PIECE].astype(np.intp, copy=False)


def _by_column(g: Array) -> Array:
    """Group-level ``g`` (num, ...) as (columns, num), each column contiguous (a copy of the group
    level where it has several columns). np.take copies a strided source whole before it gathers,
    so a gather of a piece of rows from ``g[:, k]`` would copy all of column k every time."""
    return np.ascontiguousarray(np.reshape(g, (g.shape[0], -1)).T)


def _column(x: Array, k: int, ref_t: Array | None, labels: Array, a: int, b: int) -> Array:
    """Rows a..b of column k of x (minus column k of ``ref_t``, :func:`_by_column` of the group
    level, at each row's group, ``labels`` theirs: a new array)."""
    part = x[a:b, k]
    if ref_t is None:
        return part
    shifted = np.take(ref_t[k], labels, mode="clip")
    return np.subtract(part, shifted, out=shifted)  # into the gathered piece: one temporary


def shift_divide_rows(
    x: Array,
    sub: Array | None,
    div: Array | None,
    r: RaggedIndex,
    *,
    in_place: bool,
    ref: Array | None = None,
) -> Array:
    """((x - ref) - sub) / div over the rows (None: a term left out): a new array, or with
    ``in_place`` (only without ``ref``) written into x."""
    if in_place and ref is not None:
        raise ValueError("shift_divide_rows: in_place would write the unshifted values")
    parts = [g for g in (sub, div, ref) if g is not None]
    sub_t, div_t, ref_t = (None if g is None else _by_column(g) for g in (sub, div, ref))
    # (a new array is column-major for several components, as the gathers: contiguous columns)
    columns = x.ndim == 2 and x.shape[1] > 1
    out = x if in_place else np.empty(x.shape, dtype=np.result_type(x, *parts), order="F" if columns else "C")
    # (rows, columns) views: row-level arrays are (N, K); anything else is taken as C-ordered rows
    cols, dest = (x, out) if x.ndim == 2 else (x.reshape(x.shape[0], -1), out.reshape(out.shape[0], -1))
    for a, b, labels in _pieces(r, x.shape[0]):
        for k in range(cols.shape[1]):  # a column at a time: contiguous pieces, one-dimensional loops
            piece = dest[a:b, k]
            if ref_t is not None:
                np.subtract(cols[a:b, k], np.take(_col(ref_t, k), labels, mode="clip"), out=piece)
            elif not in_place:
                piece[...] = cols[a:b, k]
            if sub_t is not None:
                piece -= np.take(_col(sub_t, k), labels, mode="clip")
            if div_t is not None:
                piece /= np.take(_col(div_t, k), labels, mode="clip")
    return out


def _col(g_t: Array, k: int) -> Array:
    """Column k of ``g_t`` (:func:`_by_column` of a group-level array; its only column where it
    broadcasts over the components)."""
    return g_t[k if g_t.shape[0] > 1 else 0]


def row_dot_rows(x: Array, g: Array, r: RaggedIndex, ref: Array | None = None) -> Array:
    """(N, 1): sum_k (x - ref)_ik g_(label i) k, a piece of rows and a column at a time."""
    out = np.zeros((x.shape[0], 1), dtype=np.result_type(x, g))
    g_t, ref_t = _by_column(g), None if ref is None else _by_column(ref)
    for a, b, labels in _pieces(r, x.shape[0]):
        rows = out[a:b, 0]
        for k in range(x.shape[1]):
            scale = np.take(g_t[k], labels, mode="clip")
            rows += np.multiply(_column(x, k, ref_t, labels, a, b), scale, out=scale)
    return out


def sum_k_rows(x: Array, ref: Array, r: RaggedIndex) -> Array:
    """(N, 1): sum_k (x - ref)_ik, a new array, the components added in order."""
    out = np.empty((x.shape[0], 1), dtype=np.result_type(x, ref))
    ref_t = _by_column(ref)
    for a, b, labels in _pieces(r, x.shape[0]):
        rows = out[a:b, 0]
        rows[...] = _column(x, 0, ref_t, labels, a, b)
        for k in range(1, x.shape[1]):
            rows += _column(x, k, ref_t, labels, a, b)
    return out


def _take_rows(g: Array, labels: Array, out: Array | None = None) -> Array:
    """g[labels] along axis 0 (into ``out``), in pieces of rows: labels of any integer dtype (int32
    included) are converted to numpy's index type a piece at a time, never as a copy of the batch."""
    if labels.dtype == np.intp or labels.shape[0] <= _PIECE:
        return np.take(g, labels, axis=0, out=out, mode="clip")  # labels are in range: no bounds copy
    if out is None:
        out = np.empty((labels.shape[0], *g.shape[1:]), dtype=g.dtype)
    for a in range(0, labels.shape[0], _PIECE):
        np.take(g, labels[a : a + _PIECE], axis=0, out=out[a : a + _PIECE], mode="clip")
    return out


def _dense_sum(x: Array, y: Array | None) -> Array:
    """(B, 1, K) sums over axis 1 of x (or of x * y), each in row order whatever K is.

    The order matters: a constant extra component must leave the others' statistics bit for
    bit unchanged. einsum adds a strided column in row order but vectorises a lone contiguous
    one, so K = 1 takes the last entry of a running sum instead.
    """
    if x.shape[2] == 1:
        v = x if y is None else x * y
        return np.cumsum(v, axis=1)[:, -1:, :] if v.shape[1] else np.zeros_like(v[:, :1])
    if y is None:
        return np.einsum("bnk->bk", x)[:, None, :]
    return np.einsum("bnk,bnk->bk", x, y)[:, None, :]


def segment_sums(x: Array, r: RaggedIndex, *, square: bool, ref: Array | None = None) -> Array:
    """(num, ...) float64 sums of x (or x * x) per label, one column at a time (x - ref[labels]
    in place of x where ``ref`` is given)."""
    return _segment_sums(x, r, ref, (square,))[0]


def segment_sums_both(x: Array, r: RaggedIndex, ref: Array | None = None) -> tuple[Array, Array]:
    """The sums and the sums of squares of :func:`segment_sums`, in one pass over x."""
    sums, squares = _segment_sums(x, r, ref, (False, True))
    return sums, squares


def _segment_sums(x: Array, r: RaggedIndex, ref: Array | None, squares: tuple[bool, ...]) -> list[Array]:
    """Per label, for each entry of ``squares``: the float64 sums of x (True: of x * x).

    Scattered labels: in pieces of rows at least as long as the group level (unless a lone sum
    of intp labels needs none), so that a piece's temporaries are a fraction of the column while
    its partial sums cost at most one more pass over the group level; a piece's labels are
    converted to numpy's index type once, for its gathers and its sums alike.
    """
    cols = np.reshape(x, (x.shape[0], -1))
    rows, num = cols.shape[0], r.num
    outs = [np.zeros((num, cols.shape[1]), dtype=np.float64) for _ in squares]
    whole = squares == (False,) and ref is None and r.labels.dtype == np.intp
    piece = max(rows, 1) if whole else max(_PIECE, num)
    ref_t = None if ref is None else _by_column(ref)
    for k in range(cols.shape[1]):  # one column at a time: the same sums whatever K is
        if r.starts is not None and ref is None:  # runs: contiguous segments, no scattered adds
            col = cols[:, k]
            for out, square in zip(outs, squares, strict=True):
                out[:, k] = np.add.reduceat(col * col if square else col, r.starts)
            continue
        for a in range(0, max(rows, 1), piece):
            labels = r.labels[a : a + piece].astype(np.intp, copy=False)
            part = _column(cols, k, ref_t, labels, a, a + piece)
            for out, square in zip(outs, squares, strict=True):
                weights = part * part if square else part
                out[:, k] += np.bincount(labels, weights=weights, minlength=num)
    return [np.reshape(out, (num, *x.shape[1:])) for out in outs]


def small(size: Array) -> bool:
    """Whether every group of these sizes has at most :data:`SMALL_GROUP` rows."""
    return size.shape[0] == 0 or int(size.max()) <= SMALL_GROUP


# --- labelling ids on the host -------------------------------------------------------------


def find_runs(ids: Array) -> Runs | None:
    """The runs when every integer id forms one run of adjacent rows, else None. O(N), no sort.

    Scattered ids cost a comparison of neighbours and a count over the run ids; the row labels
    and run starts are built only once the ids are known to form runs.
    """
    if ids.shape[0] == 0:
        return None
    head = np.empty(ids.shape[0], dtype=bool)  # the first row of each run
    head[0] = True
    np.not_equal(ids[1:], ids[:-1], out=head[1:])
    run_ids = ids[head]
    if run_ids.shape[0] > 1 and not _monotone(run_ids) and _repeats(run_ids):
        return None  # some id comes back after another: not runs
    del run_ids
    labels = np.cumsum(head, dtype=np.intp)
    labels -= 1
    return Runs(starts=np.flatnonzero(head), labels=labels)


def _monotone(values: Array) -> bool:
    """Strictly increasing or strictly decreasing: no value repeats, found without a count."""
    return bool(np.all(values[1:] > values[:-1])) or bool(np.all(values[1:] < values[:-1]))


def _offset(values: Array, lo: int) -> Array:
    """values - lo, in [0, span): the values themselves where lo is 0 (no copy), else a new array
    of 8-byte integers (no overflow over the span)."""
    if lo == 0:
        return values
    wide = values.astype(np.int64 if values.dtype.kind == "i" else np.uint64)
    wide -= wide.dtype.type(lo)
    return wide


def _repeats(values: Array) -> bool:
    """Whether some value occurs twice: a table of the values seen for a compact range (a byte per
    value of the span), else a sort."""
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < _DIRECT_SPAN * values.shape[0]:
        seen, key = np.zeros(hi - lo + 1, dtype=bool), _offset(values, lo)
        for a in range(0, key.shape[0], _PIECE):  # index-type pieces: an int32 index is slow here
            seen[key[a : a + _PIECE].astype(np.intp, copy=False)] = True
        return int(np.count_nonzero(seen)) < int(values.shape[0])
    return bool(np.unique(values).shape[0] != values.shape[0])


def _label_type(n: int) -> Any:
    """The labels' dtype for n rows: int32 where every label fits (half the memory of intp)."""
    return np.dtype(np.int32) if n <= np.iinfo(np.int32).max else np.dtype(np.intp)


def label(ids: Array, runs: Runs | None) -> RaggedIndex:
    """Labels 0..G-1 of integer ids without a sort when they are in runs (``runs``) or in a compact range."""
    n = ids.shape[0]
    if n == 0:
        empty = np.zeros(0, dtype=np.intp)
        return RaggedIndex(labels=empty, num=0, member=empty, size=empty)
    if runs is not None:
        starts, labels = runs.starts, runs.labels
        size = np.diff(np.append(starts, n))
        return RaggedIndex(labels=labels, num=int(starts.shape[0]), member=starts, size=size, starts=starts)
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo < _DIRECT_SPAN * n:  # direct addressing: O(N + span), no comparison sort
        key = _offset(ids, lo)  # in [0, span)
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[key] = True
        num = int(np.count_nonzero(present))
        if num == present.shape[0]:  # every value of the span is used: they are the labels
            # (the ids themselves when 0..G-1, int32 or int64; never written)
            labels = key if key.dtype in (np.int32, np.intp) else key.astype(_label_type(n))
        else:
            table = np.cumsum(present, dtype=_label_type(n))
            table -= 1
            labels = table[key]
    else:
        uniq, labels = np.unique(ids, return_inverse=True)
        labels = labels.astype(_label_type(n))
        num = int(uniq.shape[0])
    size = np.zeros(num, dtype=np.intp)
    member = np.empty(num, dtype=np.intp)
    for a in range(0, n, _PIECE):  # pieces: no row-level copy of int32 labels, no row numbers
        part = labels[a : a + _PIECE]
        size += np.bincount(part, minlength=num)
        member[part] = np.arange(a, a + part.shape[0], dtype=np.intp)  # any row of the group: its shift
    return RaggedIndex(labels=labels, num=num, member=member, size=size)


def _neighbours_differ(ids: Array) -> Array | None:
    """(N - 1,) bool: where the id changes between neighbours; None for ids whose ``!=`` is not a
    plain bool per row (arrays as ids, say)."""
    try:
        change = np.asarray(ids[1:] != ids[:-1], dtype=bool)
    except (TypeError, ValueError):
        return None
    return change if change.shape == (ids.shape[0] - 1,) else None


def factorize(ids: Array) -> Array:
    """Labels 0..G-1 in order of first appearance of a 1-d numpy array of hashable ids (N >= 1).

    Runs of one id are hashed once (one comparison of neighbours finds them); the run heads are
    factorised with a dict lookup mapped in C (no Python frame per row), never sorted.
    Scattered ids (runs of one row, mostly) are hashed in place, every row: no array of heads, no
    run index. Labels are int32 up to 2**31 rows, numbered as the ids are first seen (a
    ``defaultdict`` whose factory is a counter: no table over the runs).
    """
    n = ids.shape[0]
    change = _neighbours_differ(ids)
    runs = n if change is None else int(np.count_nonzero(change)) + 1
    if runs > n // 2 or change is None:  # hashing every row costs less than heads and a run index
        runs = n
    heads = ids if runs == n or change is None else ids[np.concatenate(([True], change))]
    if heads.dtype != object:
        heads = heads.tolist()  # numpy scalars -> Python values: hashed as the Python values are
    # Each new id takes the next label as it is first seen: labels 0..G-1 in order of first appearance.
    seen: dict[Any, int] = collections.defaultdict(itertools.count().__next__)
    kind = _label_type(n)
    try:
        labels = np.fromiter(map(seen.__getitem__, heads), dtype=kind, count=runs)
    except TypeError as exc:
        raise TypeError(f"group ids must be hashable: {exc}") from None
    del heads, seen
    if runs == n:
        return labels
    assert change is not None  # (runs < n)
    run_of_row = np.empty(n, dtype=kind)  # each row's run
    run_of_row[0] = 0
    np.cumsum(change, out=run_of_row[1:])
    return _take_rows(labels, run_of_row, run_of_row)


def run_length(ids: Array) -> int:
    """n when 1-d host ids (any hashable type) form runs of n >= 2 adjacent rows each, else 0."""
    rows = ids.shape[0] if ids.ndim == 1 else 0
    if rows < 2:
        return 0
    change = _neighbours_differ(ids)
    if change is None:
        return 0
    runs = int(np.count_nonzero(change)) + 1
    n = rows // runs
    if n < 2 or n * runs != rows:  # scattered ids stop here, after one comparison of neighbours
        return 0
    ends = np.flatnonzero(change)  # the last row of each run but the final one
    if not bool(np.all(ends == np.arange(n - 1, rows - 1, n))):
        return 0
    heads = ids[::n].tolist()
    try:
        return n if len(set(heads)) == runs else 0  # no id comes back after another
    except TypeError:
        return 0
