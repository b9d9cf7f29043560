"""Per-group statistics of reward components, the building block of every estimator.

Statistics are computed at *scope level* (one row per group, or one for the whole batch) and
broadcast back to the rows only on demand: the ``N x K`` data is read by two reductions and one
centring update, whatever the layout. Plain array-API code: the sums and gathers that differ
between backends are the scope's kernel's (:mod:`corrgrpo_core._kernels`). Updates written as
``a op= b`` go into temporaries of ours (in place where the backend allows it, a new array on jax).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from ._groups import Groups
from ._kernels import Kernel, kernel_for
from ._lib._compat import Array, Namespace, device


class Scope(Protocol):
    """Where a statistic is taken: within each group (:class:`Groups`) or over the batch."""

    @property
    def xp(self) -> Namespace: ...
    def reduce(self, x: Array) -> Array: ...
    def shift(self, x: Array, g: Array) -> Array: ...
    def divide(self, x: Array, g: Array) -> Array: ...
    def reduce_sq(self, x: Array) -> Array: ...
    def expand(self, g: Array) -> Array: ...
    def row_dot(self, x: Array, g: Array) -> Array: ...
    def sum_k(self, x: Array) -> Array: ...
    def reference(self, x: Array) -> Array: ...


@dataclass(frozen=True)
class BatchScope:
    """The whole batch as one scope (every row counts once)."""

    kernel: Kernel
    axes: tuple[int, ...]

    @property
    def xp(self) -> Namespace:
        return self.kernel.xp

    def reduce(self, x: Array) -> Array:
        return self.xp.sum(x, axis=self.axes, keepdims=True)

    def reduce_sq(self, x: Array) -> Array:
        return self.kernel.batch_sum_sq(x, self.axes)

    def expand(self, g: Array) -> Array:
        return g

    def shift(self, x: Array, g: Array) -> Array:
        return x - g

    def divide(self, x: Array, g: Array) -> Array:
        x /= g
        return x

    def row_dot(self, x: Array, g: Array) -> Array:
        return self.kernel.batch_row_dot(x, g)

    def sum_k(self, x: Array) -> Array:
        return self.kernel.sum_k(x)

    def reference(self, x: Array) -> Array:
        first = (slice(0, 1),) * (x.ndim - 1) + (slice(None),)
        return x[first]


@dataclass(frozen=True)
class Moments:
    """Spread of each component within its scope (group or batch), and the values it came from.

    ``shifted`` is row level: each value minus one value of its scope (zero where missing), so a
    constant component is exactly zero. The ``*_g`` fields are scope level; ``count``, ``var``,
    ``std``, ``varies``, ``centred`` and ``z`` are their row-level broadcasts. ``varies`` is False
    for components whose spread is zero (or below the scale-relative tolerance); ``z`` is the
    z-score with the (ddof-corrected) standard deviation, zero for components that do not vary.
    """

    scope: Scope
    shifted: Array
    shift_mean_g: Array  # mean of ``shifted`` over the scope
    count_g: Array
    var_g: Array
    std_g: Array
    varies_g: Array
    inv_std_g: Array  # 1 / std where the component varies, else 0
    valid: Array | None = None

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
    def centred(self) -> Array:
        """x - mean, zero where missing (a new array)."""
        return self._centred()

    def _centred(self) -> Array:
        xp = self.scope.xp
        centred = self.scope.shift(self.shifted, self.shift_mean_g)
        if self.valid is not None:
            centred = xp.where(self.valid, centred, xp.zeros_like(centred))
        return centred

    @cached_property
    def z(self) -> Array:
        return self.scaled(self.inv_std_g)

    def scaled(self, g: Array) -> Array:
        """c_ik g_k (g: scope level), a new array; without the centred values at hand, scaled in place."""
        if "centred" in self.__dict__:
            return self.centred * self.scope.expand(g)
        out = self._centred()
        out *= self.scope.expand(g)
        return out

    def divided(self, g: Array) -> Array:
        """c_ik / g_k (g: scope level), a new array; without the centred values at hand, divided in place."""
        if "centred" in self.__dict__:
            return self.centred / self.scope.expand(g)
        return self.scope.divide(self._centred(), g)

    def row_sum(self, g: Array | None = None) -> Array:
        """sum_k c_ik g_k (g: scope level; None: all ones) without materialising the centred values.

        sum_k (s_ik - m_k) g_k = sum_k s_ik g_k - sum_k m_k g_k: one pass over the shifted values
        and a scope-level correction; constant components add exact zeros to both.
        """
        scope = self.scope
        if self.valid is not None or "centred" in self.__dict__:  # use the centred values at hand
            c = self.centred
            return scope.sum_k(c) if g is None else scope.row_dot(c, g)
        if g is None:
            return scope.shift(scope.sum_k(self.shifted), scope.sum_k(self.shift_mean_g))
        return scope.shift(scope.row_dot(self.shifted, g), scope.sum_k(self.shift_mean_g * g))

    def z_row_sum(self) -> Array:
        """sum_k z_ik without materialising z."""
        return self.row_sum(self.inv_std_g)


def _sum_k(x: Array, xp: Namespace) -> Array:
    """Sum over the trailing component axis, kept (the kernel of ``xp``)."""
    return kernel_for(xp).sum_k(x)


def moments(
    x: Array,
    valid: Array | None,
    scope: Scope,
    count: Array,
    *,
    ddof: int,
    rtol: float,
    xp: Namespace,
    size: int | None = None,
    one_pass: bool = False,
) -> Moments:
    """Measure the spread of ``x`` over ``scope`` (``count``: its rows, scope level).

    The values are first shifted by one value of the scope (e.g. a row of the group; where that
    value is missing, the mean of the present ones): a constant component is then exactly zero, whatever the dtype, and the sum of squares can be taken in
    the same pass as the sum, sum (s - m)^2 = sum s^2 - n m^2, without cancellation: the shift
    is a member of the scope, so n m^2 is at most about n times the spread. ``size``, when every
    scope has that many rows, spares the arrays of counts. ``one_pass`` only where every scope
    is small (its error bound grows with the scope's size); otherwise the values are centred
    first, as always where entries are missing.

    With s = x - x_ref, m = mean s, S = sum (s - m)^2 and dof = rows - ddof::

        var = S / dof (0 where dof <= 0),   varies = S > rtol^2 rows ((x_ref + m)^2 + S / rows)

    i.e. the population variance against ``rtol`` times the root mean square of the values.
    """
    reference = scope.reference(x)
    if valid is not None:
        count, size = scope.reduce(xp.astype(valid, x.dtype)), None
        # A missing member cannot be the shift; 0 in its place would centre the raw values, and an
        # offset of |mean| / spread = 1e5 costs that many ulps in every z-score. The mean of the
        # present values is as good a shift (x - mean is exact to an ulp of the spread, and the
        # centring below removes what is left); it is 0 where nothing is present.
        present = xp.where(valid, x, xp.zeros_like(x))
        mean = scope.reduce(present) / xp.where(count > 0, count, xp.ones_like(count))
        reference = xp.where(scope.reference(valid), reference, mean)
    shifted = scope.shift(x, reference)
    if valid is not None:
        shifted = xp.where(valid, shifted, xp.zeros_like(shifted))
    if size is not None:  # Python numbers: no arrays of counts
        safe_count: Any = float(max(size, 1))
        dof: Any = float(size - ddof)
        positive: Any = dof > 0
    else:
        safe_count = xp.where(count > 0, count, xp.ones_like(count))
        dof = count - ddof
        positive = dof > 0
    shift_sum = scope.reduce(shifted)
    shifted_mean = shift_sum / safe_count
    centred = None
    if one_pass and valid is None:
        # sum (s - m)^2 = sum s^2 - (sum s) m; clipped at 0 against rounding (a sum of squares)
        shift_sum *= shifted_mean
        sum_sq = scope.reduce_sq(shifted)
        sum_sq -= shift_sum
        sum_sq = xp.maximum(sum_sq, xp.zeros_like(sum_sq))
    else:  # large scopes: centre first (the error of one pass grows with the scope's size)
        centred = scope.shift(shifted, shifted_mean)
        if valid is not None:
            centred = xp.where(valid, centred, xp.zeros_like(centred))
        sum_sq = scope.reduce_sq(centred)
    if size is not None:
        var = sum_sq / dof if positive else xp.zeros_like(sum_sq)
    else:
        var = xp.where(positive, sum_sq / xp.where(positive, dof, xp.ones_like(dof)), xp.zeros_like(sum_sq))
    # Scale-relative zero-variance test: population variance against the mean square of the
    # (unshifted) values; rtol = 0 is the reference code's exact ``var > 0``.
    threshold = reference + shifted_mean  # the mean
    threshold *= threshold
    threshold += sum_sq / safe_count
    threshold *= rtol * rtol
    threshold *= safe_count
    # var > 0: a subnormal sum of squares over dof can round to 0
    varies = (sum_sq > threshold) & positive & (var > 0)
    # Dead from here: their memory serves the temporaries below (with groups of n rows, a
    # group-level array is 1/n of the rows, and a call's peak is reached in this function).
    del sum_sq, threshold
    std = xp.sqrt(var)
    inv_std = 1.0 / xp.where(varies, std, xp.full_like(std, float("inf")))  # 0 where it does not vary
    m = Moments(
        scope=scope,
        # Centred already: keep only those (shifted by their mean, 0), not the shifted values too.
        shifted=shifted if centred is None else centred,
        shift_mean_g=shifted_mean if centred is None else xp.zeros_like(shifted_mean),
        count_g=count,
        var_g=var,
        std_g=std,
        varies_g=varies,
        inv_std_g=inv_std,
        valid=valid,
    )
    if centred is not None:
        m.__dict__["centred"] = centred  # the cached_property's slot: computed already
    return m


def group_moments(x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float) -> Moments:
    """:func:`moments` within each group."""
    return moments(
        x,
        valid,
        groups,
        groups.count_g,
        ddof=ddof,
        rtol=rtol,
        xp=groups.xp,
        size=groups.size,
        one_pass=groups.small,
    )


def batch_scope(groups: Groups) -> BatchScope:
    return BatchScope(kernel=groups.kernel, axes=(0, 1) if groups.dense else (0,))


def batch_moments(x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float) -> Moments:
    """:func:`moments` over the whole batch (every row counts once)."""
    xp = groups.xp
    n = 1
    for size in x.shape[:-1]:
        n *= size
    count = xp.full((1,) * x.ndim, float(n), dtype=x.dtype, device=device(x))
    return moments(x, valid, batch_scope(groups), count, ddof=ddof, rtol=rtol, xp=xp, size=n)
