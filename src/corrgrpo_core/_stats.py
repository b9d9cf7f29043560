"""Per-group statistics of reward components, the building block of every estimator.

Statistics are computed at *scope level* (one row per group, or one for the whole batch) and
broadcast back to the rows only on demand: the ``N x K`` data is read by two reductions and one
centring update, whatever the layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from ._groups import Groups
from ._lib._compat import Array, Namespace, is_numpy_namespace


class Scope(Protocol):
    """Where a statistic is taken: within each group (:class:`Groups`) or over the batch."""

    def reduce(self, x: Array) -> Array: ...
    def reduce_sq(self, x: Array) -> Array: ...
    def expand(self, g: Array) -> Array: ...
    def row_dot(self, x: Array, g: Array) -> Array: ...
    def reference(self, x: Array) -> Array: ...


@dataclass(frozen=True)
class BatchScope:
    """The whole batch as one scope (every row counts once)."""

    xp: Namespace
    axes: tuple[int, ...]

    def reduce(self, x: Array) -> Array:
        return self.xp.sum(x, axis=self.axes, keepdims=True)

    def reduce_sq(self, x: Array) -> Array:
        return self.reduce(x * x)

    def expand(self, g: Array) -> Array:
        return g

    def row_dot(self, x: Array, g: Array) -> Array:
        return self.xp.sum(x * g, axis=-1, keepdims=True)

    def reference(self, x: Array) -> Array:
        first = (slice(0, 1),) * (x.ndim - 1) + (slice(None),)
        return x[first]


@dataclass(frozen=True)
class Moments:
    """Centred values and spread of each component within its scope (group or batch).

    ``centred`` is row level and zero where a value is missing. The ``*_g`` fields are scope
    level; ``count``, ``var``, ``std``, ``varies`` and ``z`` are their row-level broadcasts.
    ``varies`` is False for components whose spread is zero (or below the scale-relative
    tolerance), and ``z`` is the z-score with the (ddof-corrected) standard deviation, zero for
    components that do not vary.
    """

    scope: Any
    centred: Array
    count_g: Array
    var_g: Array
    std_g: Array
    varies_g: Array
    inv_std_g: Array  # 1 / std where the component varies, else 0

    @property
    def count(self) -> Array:
        return self.scope.expand(self.count_g)

    @property
    def var(self) -> Array:
        return self.scope.expand(self.var_g)

    @property
    def std(self) -> Array:
        return self.scope.expand(self.std_g)

    @property
    def varies(self) -> Array:
        return self.scope.expand(self.varies_g)

    @cached_property
    def z(self) -> Array:
        return self.centred * self.scope.expand(self.inv_std_g)

    def z_row_sum(self) -> Array:
        """sum_k z_ik without materialising z."""
        return self.scope.row_dot(self.centred, self.inv_std_g)


def moments(
    x: Array,
    valid: Array | None,
    scope: Scope,
    count: Array,
    *,
    ddof: int,
    rtol: float,
    xp: Namespace,
) -> Moments:
    """Centre ``x`` and measure its spread over ``scope`` (``count``: its rows, scope level).

    The values are first shifted by one value of the scope (e.g. a row of the group): a constant
    component is then exactly zero after centring, whatever the dtype, and the sums stay small.
    """
    reference = scope.reference(x)
    if valid is not None:
        reference = xp.where(scope.reference(valid), reference, xp.zeros_like(reference))
    shifted = x - scope.expand(reference)
    if valid is not None:
        shifted = xp.where(valid, shifted, xp.zeros_like(shifted))
        count = scope.reduce(xp.astype(valid, x.dtype))
    safe_count = xp.where(count > 0, count, xp.ones_like(count))
    shifted_mean = scope.reduce(shifted) / safe_count
    if is_numpy_namespace(xp):  # shifted is ours: centre it in place (one N x K buffer fewer)
        import numpy as np

        centred = np.subtract(shifted, scope.expand(shifted_mean), out=shifted)
    else:
        centred = shifted - scope.expand(shifted_mean)
    if valid is not None:
        centred = xp.where(valid, centred, xp.zeros_like(centred))
    sum_sq = scope.reduce_sq(centred)
    dof = count - ddof
    var = xp.where(dof > 0, sum_sq / xp.where(dof > 0, dof, xp.ones_like(dof)), xp.zeros_like(sum_sq))
    # Scale-relative zero-variance test: population variance against the mean square of the
    # (unshifted) values; rtol = 0 is the reference code's exact ``var > 0``.
    mean = reference + shifted_mean
    mean_sq = mean * mean + sum_sq / safe_count
    varies = (dof > 0) & (sum_sq > (rtol * rtol) * mean_sq * safe_count)
    std = xp.sqrt(var)
    inv_std = xp.where(varies, 1.0 / xp.where(varies, std, xp.ones_like(std)), xp.zeros_like(std))
    return Moments(
        scope=scope, centred=centred, count_g=count, var_g=var, std_g=std, varies_g=varies, inv_std_g=inv_std
    )


def group_moments(x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float) -> Moments:
    """:func:`moments` within each group."""
    return moments(x, valid, groups, groups.count_g, ddof=ddof, rtol=rtol, xp=groups.xp)


def batch_scope(groups: Groups) -> BatchScope:
    return BatchScope(xp=groups.xp, axes=(0, 1) if groups.dense else (0,))


def batch_moments(x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float) -> Moments:
    """:func:`moments` over the whole batch (every row counts once)."""
    xp = groups.xp
    n = 1
    for size in x.shape[:-1]:
        n *= size
    count = xp.full((1,) * x.ndim, float(n), dtype=x.dtype, device=_dev(x))
    return moments(x, valid, batch_scope(groups), count, ddof=ddof, rtol=rtol, xp=xp)


def _dev(x: Array) -> object:
    from ._lib._compat import device

    return device(x)
