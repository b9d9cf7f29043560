"""Dense GRPO / CorrGRPO on host memory through numpy, in the input's float dtype.

Used for torch tensors on the CPU (read through zero-copy numpy views): a numpy call costs under a
microsecond where a torch CPU call costs several, and at the sizes TRL hands over (thousands of
rows) the per-call overhead is most of the time. The maths is that of
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

from typing import Any

import numpy as np

Array = Any
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_EPS = {np.dtype(t): float(np.finfo(t).eps) for t in (np.float16, np.float32, np.float64)}


def dense(
    estimator: str,
    scores: Array,
    weights: Any,
    *,
    eps: float,
    outside: bool,
    ddof: int,
    rtol: float,
    singleton: str,
    floor: float,
) -> Array | None:
    """Advantages shaped like ``scores`` without its last axis, or None for what this does not cover.

    ``scores`` is ``(n, K)`` or ``(B, n, K)`` float32 / float64; None (the generic path runs) for
    other dtypes, empty batches, ``n <= ddof``, a group of one under ``singleton="raise"``, weights
    that are not K finite numbers (or need gradients), and scores that are not all finite.
    """
    if scores.dtype not in _FLOATS or scores.ndim not in (2, 3):
        return None
    x = scores if scores.ndim == 3 else scores[None]
    b, n, k = x.shape
    if b == 0 or n == 0 or k == 0 or n <= ddof or (n == 1 and singleton == "raise"):
        return None
    w = None
    if weights is not None:
        if getattr(weights, "requires_grad", False):
            return None
        try:
            w = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights, dtype=x.dtype)
        except (TypeError, ValueError, RuntimeError):
            return None  # the generic path names the problem
        if w.shape != (k,) or not bool(np.isfinite(w).all()):
            return None
    if estimator == "grpo":
        out = grpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)
    else:
        out = corrgrpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol, floor=floor)
    if out is None or scores.ndim == 3:
        return out
    return out[0]


def grpo(x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float) -> Array | None:
    """(B, n) advantages of (B, n, K) scores x (weights w or None), or None when not all finite."""
    with np.errstate(all="ignore"):  # NaN / inf / overflow: detected below, then declined
        return _grpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol)


def corrgrpo(
    x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float, floor: float
) -> Array | None:
    """(B, n) CorrGRPO advantages of (B, n, K) scores, or None when not all finite."""
    with np.errstate(all="ignore"):
        return _corrgrpo(x, w, eps=eps, outside=outside, ddof=ddof, rtol=rtol, floor=floor)


def _grpo(x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float) -> Array | None:
    n, k = x.shape[1], x.shape[2]
    if k == 1 and w is None:
        c, ref = _shifted(x[..., 0].T, None)  # (n, B)
    else:  # sum the shifted components: a large offset of one component costs no precision
        parts, ref_k = _shifted(np.transpose(x, (1, 2, 0)), w)  # (n, K, B)
        c, ref = np.add.reduce(parts, axis=1), np.add.reduce(ref_k, axis=0)
        del parts
    stats = _moments(c, ref, n, rtol)
    if stats is None:
        return None
    ss, varies = stats
    ss /= n - ddof
    den = _den(ss, eps, outside)
    den[~varies] = np.inf  # z = 0 for a group whose total does not vary
    return _rows_out(c, den)


def _corrgrpo(
    x: Array, w: Array | None, *, eps: float, outside: bool, ddof: int, rtol: float, floor: float
) -> Array | None:
    n = x.shape[1]
    c, ref = _shifted(np.transpose(x, (1, 2, 0)), w)  # (n, K, B)
    stats = _moments(c, ref, n, rtol)
    if stats is None:
        return None
    ss, varies = stats
    ss /= n - ddof
    inv = np.zeros_like(ss)
    np.divide(1.0, np.sqrt(ss, out=ss), out=inv, where=varies)
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
    return _rows_out(num, den)


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
