"""Per-group statistics of reward components, the building block of every estimator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._groups import Groups
from ._lib._compat import Array, Namespace


@dataclass(frozen=True)
class Moments:
    """Centred values and spread of each component within its scope (group or batch).

    ``centred`` is zero where a value is missing, ``varies`` is False for components whose
    spread is zero (or below the scale-relative tolerance), and ``z`` is the z-score with the
    (ddof-corrected) standard deviation, zero for components that do not vary.
    """

    count: Array
    centred: Array
    var: Array
    std: Array
    varies: Array
    z: Array


def moments(
    x: Array,
    valid: Array | None,
    total: Callable[[Array], Array],
    count: Array,
    reference: Array,
    *,
    ddof: int,
    rtol: float,
    xp: Namespace,
) -> Moments:
    """Centre ``x`` and measure its spread over the scope that ``total`` sums over.

    ``reference`` is one value of the scope (e.g. its first row): shifting by it makes a constant
    component exactly zero after centring, whatever the dtype, and keeps the sums small.
    """
    shifted = x - reference
    if valid is not None:
        shifted = xp.where(valid, shifted, xp.zeros_like(shifted))
        count = total(xp.astype(valid, x.dtype))
    safe_count = xp.where(count > 0, count, xp.ones_like(count))
    shifted_mean = total(shifted) / safe_count
    centred = shifted - shifted_mean
    if valid is not None:
        centred = xp.where(valid, centred, xp.zeros_like(centred))
    sum_sq = total(centred * centred)
    dof = count - ddof
    var = xp.where(dof > 0, sum_sq / xp.where(dof > 0, dof, xp.ones_like(dof)), xp.zeros_like(sum_sq))
    # Scale-relative zero-variance test: population variance against the mean square of the
    # (unshifted) values; rtol = 0 is the reference code's exact ``var > 0``.
    mean = reference + shifted_mean
    mean_sq = mean * mean + sum_sq / safe_count
    varies = (dof > 0) & (sum_sq > (rtol * rtol) * mean_sq * safe_count)
    std = xp.sqrt(var)
    inv_std = xp.where(varies, 1.0 / xp.where(varies, std, xp.ones_like(std)), xp.zeros_like(std))
    return Moments(count=count, centred=centred, var=var, std=std, varies=varies, z=centred * inv_std)


def group_moments(x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float) -> Moments:
    """:func:`moments` within each group."""
    xp = groups.xp
    return moments(
        x,
        valid,
        groups.group_sum,
        groups.count,
        _group_reference(x, valid, groups),
        ddof=ddof,
        rtol=rtol,
        xp=xp,
    )


def batch_moments(x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float) -> Moments:
    """:func:`moments` over the whole batch (every row counts once)."""
    xp = groups.xp
    n = 1
    for size in x.shape[:-1]:
        n *= size
    count = xp.full((1,) * x.ndim, float(n), dtype=x.dtype, device=_dev(x))
    first = (slice(0, 1),) * (x.ndim - 1) + (slice(None),)
    reference = x[first] if n else xp.zeros_like(count)
    if valid is not None and n:
        reference = xp.where(valid[first], reference, xp.zeros_like(reference))
    return moments(x, valid, groups.batch_sum, count, reference, ddof=ddof, rtol=rtol, xp=xp)


def _group_reference(x: Array, valid: Array | None, groups: Groups) -> Array:
    xp = groups.xp
    if x.shape[0] == 0 or (groups.dense and x.shape[1] == 0):
        return xp.zeros_like(x)
    ref = groups.first_of_group(x)
    if valid is not None:
        ref = xp.where(groups.first_of_group(valid), ref, xp.zeros_like(ref))
    return ref


def _dev(x: Array) -> object:
    from ._lib._compat import device

    return device(x)
