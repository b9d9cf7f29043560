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
from ._kernels import Kernel, kernel_for, shift_divide
from ._lib._compat import Array, Namespace, device


class Scope(Protocol):
    """Where a statistic is taken: within each group (:class:`Groups`) or over the batch."""

    @property
    def xp(self) -> Namespace: ...
    @property
    def lazy_shift(self) -> bool: ...
    def reduce(self, x: Array, *, ref: Array | None = None) -> Array: ...
    def shift(self, x: Array, g: Array) -> Array: ...
    def divide(self, x: Array, g: Array) -> Array: ...
    def reduce_sq(self, x: Array, *, ref: Array | None = None) -> Array: ...
    def reduce_both(self, x: Array, *, ref: Array | None = None) -> tuple[Array, Array]: ...
    def shift_divide(
        self,
        x: Array,
        sub: Array | None,
        div: Array | None,
        *,
        in_place: bool = False,
        ref: Array | None = None,
    ) -> Array: ...
    def expand(self, g: Array) -> Array: ...
    def row_dot(self, x: Array, g: Array, *, ref: Array | None = None) -> Array: ...
    def sum_k(self, x: Array, *, ref: Array | None = None) -> Array: ...
    def reference(self, x: Array) -> Array: ...


# Treated as immutable (never assigned after it is made); not ``frozen``: a frozen dataclass's
# constructor costs several times more, microseconds on every call of a small batch.
@dataclass(eq=False)
class BatchScope:
    """The whole batch as one scope (every row counts once)."""

    kernel: Kernel
    axes: tuple[int, ...]

    @property
    def xp(self) -> Namespace:
        return self.kernel.xp

    lazy_shift = False  # a ``ref`` is subtracted first (x - ref, a new array)

    def reduce(self, x: Array, *, ref: Array | None = None) -> Array:
        return self.xp.sum(x if ref is None else x - ref, axis=self.axes, keepdims=True)

    def reduce_sq(self, x: Array, *, ref: Array | None = None) -> Array:
        return self.kernel.batch_sum_sq(x if ref is None else x - ref, self.axes)

    def reduce_both(self, x: Array, *, ref: Array | None = None) -> tuple[Array, Array]:
        x = x if ref is None else x - ref
        return self.reduce(x), self.reduce_sq(x)

    def expand(self, g: Array) -> Array:
        return g

    def shift(self, x: Array, g: Array) -> Array:
        return x - g

    def divide(self, x: Array, g: Array) -> Array:
        x /= g
        return x

    def shift_divide(
        self,
        x: Array,
        sub: Array | None,
        div: Array | None,
        *,
        in_place: bool = False,
        ref: Array | None = None,
    ) -> Array:
        if ref is not None:
            x, in_place = x - ref, True
        return shift_divide(x, sub, div, self.expand, in_place=in_place)

    def row_dot(self, x: Array, g: Array, *, ref: Array | None = None) -> Array:
        return self.kernel.batch_row_dot(x if ref is None else x - ref, g)

    def sum_k(self, x: Array, *, ref: Array | None = None) -> Array:
        return self.kernel.sum_k(x if ref is None else x - ref)

    def reference(self, x: Array) -> Array:
        first = (slice(0, 1),) * (x.ndim - 1) + (slice(None),)
        return x[first]


# Treated as immutable (never assigned after it is made); not ``frozen``: a frozen dataclass's
# constructor costs several times more, microseconds on every call of a small batch.
@dataclass(eq=False)
class Moments:
    """Spread of each component within its scope (group or batch), and the values it came from.

    ``shifted`` is row level: each value minus one value of its scope (zero where missing), so a
    constant component is exactly zero; or, where ``reference_g`` is set (ragged groups on the
    host, see ``Scope.lazy_shift``), the values themselves, shifted by ``reference_g`` a piece of
    rows at a time whenever they are read (no shifted copy of the batch; never written then). The ``*_g`` fields are scope level; ``count``, ``var``,
    ``std``, ``varies``, ``centred`` and ``z`` are their row-level broadcasts. ``varies`` is False
    for components whose spread is zero (or below the scale-relative tolerance); ``z`` is the
    z-score with the (ddof-corrected) standard deviation, zero for components that do not vary.
    """

    scope: Scope
    shifted: Array
    shift_mean_g: Array  # mean of ``shifted`` over the scope
    count_g: Array
    var_g: Array
    varies_g: Array
    valid: Array | None = None
    reference_g: Array | None = None  # set: ``shifted`` holds the unshifted values (see above)
    scale_g: Array | None = None  # what ``inv_std_g`` is, where not 1 / std (see there)

    @cached_property
    def std_g(self) -> Array:
        return self.scope.xp.sqrt(self.var_g)

    @cached_property
    def inv_std_g(self) -> Array:
        """1 / std where the component varies, else 0 (or ``scale_g`` where given: the z-scores
        are then c_ik times it)."""
        if self.scale_g is not None:
            return self.scale_g
        return 1.0 / self.scope.xp.where(self.varies_g, self.std_g, float("inf"))

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
        if self.reference_g is not None:
            return self.scope.shift_divide(self.shifted, self.shift_mean_g, None, ref=self.reference_g)
        centred = self.scope.shift(self.shifted, self.shift_mean_g)
        if self.valid is not None:
            centred = xp.where(self.valid, centred, 0.0)
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

    def divided(self, g: Array, *, consume: bool = False) -> Array:
        """c_ik / g_k (g: scope level), a new array; ``consume``: written over this Moments' own
        row-level values instead, for a caller that uses the Moments no further."""
        if "centred" in self.__dict__:
            return self.scope.shift_divide(self.centred, None, g, in_place=consume)
        if self.valid is not None:
            return self.scope.divide(self._centred(), g)
        ref = self.reference_g  # (with a reference, the values are the caller's: a new array)
        return self.scope.shift_divide(
            self.shifted, self.shift_mean_g, g, in_place=consume and ref is None, ref=ref
        )

    def row_sum(self, g: Array | None = None, *, div: Array | None = None, consume: bool = False) -> Array:
        """sum_k c_ik g_k (g: scope level; None: all ones), over the scope-level ``div`` where given,
        without materialising the centred values; ``consume``: this Moments' own row-level values
        may be written (one component: the sum is written over them), for a caller that uses the
        Moments no further.

        sum_k (s_ik - m_k) g_k = sum_k s_ik g_k - sum_k m_k g_k: one pass over the shifted values
        and a scope-level correction; constant components add exact zeros to both.
        """
        scope = self.scope
        if self.valid is not None or "centred" in self.__dict__:  # use the centred values at hand
            c = self.centred
            total = scope.sum_k(c) if g is None else scope.row_dot(c, g)
            # (the sum of one component is the component itself: divided into a new array)
            fresh = consume or g is not None
            return total if div is None else scope.shift_divide(total, None, div, in_place=fresh)
        ref = self.reference_g
        if g is None:  # a new array, except the sum of one component (the values themselves) without ref
            fresh = consume or self.shifted.shape[-1] > 1 or ref is not None
            return scope.shift_divide(
                scope.sum_k(self.shifted, ref=ref), scope.sum_k(self.shift_mean_g), div, in_place=fresh
            )
        # the row dot is a new array of ours: corrected (and divided) in place
        return scope.shift_divide(
            scope.row_dot(self.shifted, g, ref=ref), scope.sum_k(self.shift_mean_g * g), div, in_place=True
        )

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
    own: bool = False,
) -> Moments:
    """Measure the spread of ``x`` over ``scope`` (``count``: its rows, scope level).

    The values are first shifted by one value of the scope (e.g. a row of the group; where that
    value is missing, the mean of the present ones): a constant component is then exactly zero, whatever the dtype, and the sum of squares can be taken in
    the same pass as the sum, sum (s - m)^2 = sum s^2 - n m^2, without cancellation: the shift
    is a member of the scope, so n m^2 is at most about n times the spread. ``size``, when every
    scope has that many rows, spares the arrays of counts. ``one_pass`` only where every scope
    is small (its error bound grows with the scope's size); otherwise the values are centred
    first, as always where entries are missing. ``own``: ``x`` is an array of ours that the caller
    reads no further, and the shifted values are written over it (no shifted copy of the batch).

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
        present = xp.where(valid, x, 0.0)
        mean = scope.reduce(present) / xp.where(count > 0, count, 1.0)
        reference = xp.where(scope.reference(valid), reference, mean)
    # Without missing entries, a scope that can subtract the reference as it reads the values
    # (scattered ragged groups on the host) keeps the values as they are: no shifted copy of the batch.
    ref = reference if valid is None and scope.lazy_shift else None
    if ref is not None:
        shifted = x
    elif own and valid is None:  # (the reference, a view of x where groups are dense, copied first)
        reference = xp.astype(reference, reference.dtype, copy=True)
        shifted = scope.shift_divide(x, reference, None, in_place=True)
    else:
        shifted = scope.shift(x, reference)
    if valid is not None:
        shifted = xp.where(valid, shifted, 0.0)
    if size is not None:  # Python numbers: no arrays of counts
        safe_count: Any = float(max(size, 1))
        dof: Any = float(size - ddof)
        positive: Any = dof > 0
    else:
        safe_count = xp.where(count > 0, count, 1.0)
        dof = count - ddof
        positive = dof > 0
    one_pass = one_pass and valid is None
    if one_pass:  # the sums and the sums of squares in one pass over the values
        shift_sum, sum_sq = scope.reduce_both(shifted, ref=ref)
    else:
        shift_sum = scope.reduce(shifted, ref=ref)
    shifted_mean = shift_sum / safe_count
    centred = None
    if one_pass:
        # sum (s - m)^2 = sum s^2 - (sum s) m; clipped at 0 against rounding (a sum of squares)
        shift_sum *= shifted_mean
        sum_sq -= shift_sum
        sum_sq = xp.maximum(sum_sq, 0.0)
    else:  # large scopes: centre first (the error of one pass grows with the scope's size)
        # (``own``: the shifted values are ours and read no further, centred where they lie)
        centred = scope.shift_divide(shifted, shifted_mean, None, in_place=own and valid is None, ref=ref)
        if valid is not None:
            centred = xp.where(valid, centred, 0.0)
        sum_sq = scope.reduce_sq(centred)
    if size is not None:
        var = sum_sq / dof if positive else xp.zeros_like(sum_sq)
    else:
        var = xp.where(positive, sum_sq / xp.where(positive, dof, 1.0), 0.0)
    varies = _varies(reference + shifted_mean, sum_sq, var, safe_count, positive, rtol)
    # Dead from here: its memory serves the temporaries below (with groups of n rows, a
    # group-level array is 1/n of the rows, and a call's peak is reached in this function).
    del sum_sq
    m = Moments(
        scope=scope,
        # Centred already: keep only those (shifted by their mean, 0), not the shifted values too.
        shifted=shifted if centred is None else centred,
        shift_mean_g=shifted_mean if centred is None else xp.zeros_like(shifted_mean),
        count_g=count,
        var_g=var,
        varies_g=varies,
        valid=valid,
        reference_g=ref if centred is None else None,
    )
    if centred is not None:
        m.__dict__["centred"] = centred  # the cached_property's slot: computed already
    return m


def _varies(mean: Array, sum_sq: Array, var: Array, rows: Any, positive: Any, rtol: float) -> Array:
    """Scale-relative zero-variance test: the population variance against the mean square of the
    (unshifted) values, S > rtol^2 (rows mean^2 + S); rtol = 0 is the reference code's exact
    ``var > 0``. ``mean`` is written over (a new array of the caller's)."""
    threshold = mean
    threshold *= threshold
    threshold *= rows
    threshold += sum_sq
    threshold *= rtol * rtol
    # var > 0: a subnormal sum of squares over dof can round to 0
    varies = (sum_sq > threshold) & (var > 0)
    if positive is not True:  # (a Python True where every scope has more rows than ddof)
        varies &= positive
    return varies


def group_moments(
    x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float, own: bool = False
) -> Moments:
    """:func:`moments` within each group (``own``: see there)."""
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
        own=own,
    )


def batch_scope(groups: Groups) -> BatchScope:
    return BatchScope(kernel=groups.kernel, axes=(0, 1) if groups.dense else (0,))


def batch_moments(
    x: Array, valid: Array | None, groups: Groups, *, ddof: int, rtol: float, own: bool = False
) -> Moments:
    """:func:`moments` over the whole batch (every row counts once; ``own``: see there)."""
    xp = groups.xp
    n = 1
    for size in x.shape[:-1]:
        n *= size
    count = groups.kernel.constant(float(n), x.ndim, x.dtype, device(x))
    return moments(x, valid, batch_scope(groups), count, ddof=ddof, rtol=rtol, xp=xp, size=n, own=own)
