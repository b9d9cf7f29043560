"""Group layouts: group-level sums for dense ``(B, n, K)`` and ragged ``(N, K)`` batches.

Statistics live at *group level* (one row per group) and are broadcast back to the rows only
where a row-level value is needed, so each pass over the ``N x K`` data is a reduction or an
elementwise update, never a per-row gather of a per-row sum.

Dense groups reduce along axis 1. Ragged groups carry a *label* per row (a
:class:`~corrgrpo_core._kernels.RaggedIndex`). How sums, labels and gathers are computed depends
on the backend and lives in :mod:`corrgrpo_core._kernels`; the kernel is chosen once, when the
groups are built, and :class:`Groups` holds it.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._kernels import (
    SMALL_GROUP,
    Kernel,
    RaggedIndex,
    Runs,
    factorize,
    host_dense_group_size,
    kernel_for,
    shift_divide,
)
from ._lib._compat import Array, Namespace

__all__ = [
    "SMALL_GROUP",
    "Groups",
    "RaggedIndex",
    "Runs",
    "dense_group_size",
    "dense_groups",
    "find_runs",
    "group_labels",
    "ragged_groups",
    "run_length",
]


# Treated as immutable (never assigned after it is made); not ``frozen``: a frozen dataclass's
# constructor costs several times more, microseconds on every call of a small batch.
@dataclass(eq=False)
class Groups:
    """How the rows of a batch form groups, and the backend kernel that sums over them.

    Row-level arrays carry a trailing component axis: ``(B, n, K)`` (dense) or ``(N, K)``
    (ragged). Group-level arrays are ``(B, 1, K)`` (dense) or ``(num, K)`` (ragged);
    :meth:`expand` broadcasts them back against the rows.
    """

    kernel: Kernel
    count_g: Array  # group sizes, group level, in the working dtype
    ragged: RaggedIndex | None = None
    size: int | None = None  # dense: the group size, known without reading an array
    small: bool = False  # every group has at most SMALL_GROUP rows (known without a device read)

    @property
    def xp(self) -> Namespace:
        return self.kernel.xp

    @property
    def dense(self) -> bool:
        return self.ragged is None

    @property
    def count(self) -> Array:
        """Each row's group size, broadcastable against the rows."""
        return self.expand(self.count_g)

    def expand(self, g: Array) -> Array:
        """Group-level values broadcastable against the rows (a new array for ragged groups)."""
        return g if self.ragged is None else self.kernel.gather(g, self.ragged)

    def shift(self, x: Array, g: Array) -> Array:
        """A new array x - g, with ``g`` group level."""
        return x - g if self.ragged is None else self.kernel.subtract_gathered(x, g, self.ragged)

    def divide(self, x: Array, g: Array) -> Array:
        """x / g with ``g`` group level, written into ``x`` (an array of the caller's) where the backend can."""
        if self.ragged is not None:
            return self.kernel.divide_gathered(x, g, self.ragged)
        x /= g
        return x

    @property
    def lazy_shift(self) -> bool:
        """Whether the ``ref`` of the methods below is taken a piece of rows at a time, with no
        shifted copy of the batch (the kernel says for which ragged groups); elsewhere x - ref is
        made first."""
        r = self.ragged
        return r is not None and self.kernel.lazy_shift(r)

    def shift_divide(
        self,
        x: Array,
        sub: Array | None,
        div: Array | None,
        *,
        in_place: bool = False,
        ref: Array | None = None,
    ) -> Array:
        """(x - sub) / div with ``sub``, ``div`` group level (None: left out): a new array, or with
        ``in_place`` written into ``x`` (an array of the caller's own) where the backend can.
        Ragged groups gather the group values a piece of rows at a time where the backend can.
        ``ref`` (here and below): x - ref in place of x (``in_place`` then writes a new array)."""
        if self.ragged is not None:
            return self.kernel.shift_divide_gathered(x, sub, div, self.ragged, in_place=in_place, ref=ref)
        if ref is not None:
            x, in_place = x - ref, True
        return shift_divide(x, sub, div, self.expand, in_place=in_place)

    def reduce(self, x: Array, *, ref: Array | None = None) -> Array:
        """Group-level sums of the row-level ``x``."""
        if self.ragged is not None:
            return self.kernel.segment_sum(x, self.ragged, ref=ref)
        return self.kernel.dense_sum(x if ref is None else x - ref)

    def reduce_sq(self, x: Array, *, ref: Array | None = None) -> Array:
        """Group-level sums of ``x * x``."""
        if self.ragged is not None:
            return self.kernel.segment_sum_sq(x, self.ragged, ref=ref)
        return self.kernel.dense_sum_sq(x if ref is None else x - ref)

    def reduce_both(self, x: Array, *, ref: Array | None = None) -> tuple[Array, Array]:
        """:meth:`reduce` and :meth:`reduce_sq` of ``x``, in one pass where the backend can."""
        if self.ragged is not None:
            return self.kernel.segment_sum_both(x, self.ragged, ref=ref)
        x = x if ref is None else x - ref
        return self.kernel.dense_sum(x), self.kernel.dense_sum_sq(x)

    def row_dot(self, x: Array, g: Array, *, ref: Array | None = None) -> Array:
        """sum_k x_ik g_k over the components, with ``g`` the group-level value of the row's group."""
        if self.ragged is not None:
            return self.kernel.row_dot_gathered(x, g, self.ragged, ref=ref)
        return self.kernel.dense_row_dot(x if ref is None else x - ref, g)

    def sum_k(self, x: Array, *, ref: Array | None = None) -> Array:
        """Sum over the trailing component axis, kept (with ``ref``: a new array)."""
        if ref is None:
            return self.kernel.sum_k(x)
        if self.ragged is not None:
            return self.kernel.sum_k_gathered(x, self.ragged, ref)
        return self.kernel.sum_k(x - ref)

    def reference(self, x: Array) -> Array:
        """Group level: the value of one row of each group."""
        r = self.ragged
        if r is None:
            return x[:, :1, ...]
        return self.xp.take(x, r.member, axis=0)

    def batch_sum(self, x: Array) -> Array:
        """Sum of ``x`` over every row of the batch, broadcastable against ``x``."""
        axes = (0, 1) if self.ragged is None else (0,)
        return self.xp.sum(x, axis=axes, keepdims=True)


def dense_groups(xp: Namespace, shape: tuple[int, ...], dtype: Any, dev: Any) -> Groups:
    """Groups for an internal ``(B, n, K)`` array (where the kernel's constants may be shared, one
    instance per namespace, group size and dtype: it holds no array of the batch's, and nothing
    writes to it)."""
    kernel = kernel_for(xp)
    if kernel.shares_constants:
        return _shared_dense_groups(kernel, shape[1], dtype, dev)
    return _dense_groups(kernel, shape[1], dtype, dev)


def _dense_groups(kernel: Kernel, n: int, dtype: Any, dev: Any) -> Groups:
    count = kernel.constant(float(n), 3, dtype, dev)
    return Groups(kernel=kernel, count_g=count, size=n, small=n <= SMALL_GROUP)


_shared_dense_groups = functools.lru_cache(maxsize=256)(_dense_groups)


def find_runs(xp: Namespace, group_ids: Array) -> Runs | None:
    """The runs of ``group_ids`` (verl's layout: each prompt's rollouts adjacent), else None.

    Only looked for where the ids are on the host (numpy, torch on the CPU): O(N), no sort.
    """
    return kernel_for(xp).find_runs(group_ids)


def ragged_groups(
    xp: Namespace, group_ids: Array, dtype: Any, dev: Any, *, lazy: bool, runs: Runs | None = None
) -> Groups:
    """Groups for an internal ``(N, K)`` array whose rows belong to ``group_ids`` (``runs``: theirs)."""
    kernel = kernel_for(xp)
    index, count, small = kernel.index(group_ids, runs, dtype, lazy=lazy)
    return Groups(kernel=kernel, count_g=count, ragged=index, small=small)


def group_labels(ids: Any, /) -> Array:
    """Integer group labels ``0..G-1`` (in order of first appearance; int32 up to 2**31 rows) for
    ids of any hashable type.

    For ids that are not integers, such as verl's ``uid`` strings (a numpy object array of uuid4
    strings). Ids in runs, each group's rows adjacent as verl lays out a batch, are labelled in
    O(N) without hashing every row: one comparison of neighbours, then a set of the run ids checks
    that no id comes back. Scattered ids are factorised with a dict (O(N), exact), never sorted:
    ``numpy.unique`` over Python strings costs several times more. Integer numpy ids are returned
    unchanged (the estimators label those themselves).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> cc.group_labels(np.array(["b", "b", "a", "a", "c"], dtype=object))
    array([0, 0, 1, 1, 2], dtype=int32)
    >>> cc.group_labels(["x", "y", "x"])
    array([0, 1, 0], dtype=int32)
    """
    if not isinstance(ids, np.ndarray):
        ids = np.asarray(ids) if not isinstance(ids, (list, tuple)) else _object_array(ids)
    if ids.ndim != 1:
        raise ValueError(f"group ids must be one-dimensional, got shape {tuple(ids.shape)}")
    if ids.dtype.kind in "iu":
        return ids
    if ids.shape[0] == 0:
        return np.zeros(0, dtype=np.int32)
    return factorize(ids)


def _object_array(values: Any) -> Array:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def dense_group_size(ids: Array) -> int:
    """The group size n when host ids (any hashable type) lay the rows out as dense groups, each
    group n >= 2 adjacent rows and every group of that size; else 0.

    Such a batch is ``(N / n, n, K)``: verl's usual layout (each prompt's n rollouts adjacent). No
    labels are built, and only the run heads are hashed, and only once the runs have one length
    (scattered ids cost one comparison of neighbours).

    Examples
    --------
    >>> import numpy as np
    >>> import corrgrpo_core as cc
    >>> cc.dense_group_size(np.array(["a", "a", "b", "b", "c", "c"], dtype=object))
    2
    >>> cc.dense_group_size(np.array([0, 1, 0, 1]))  # scattered: not dense
    0
    """
    return host_dense_group_size(np.asarray(ids))


def run_length(ids: Array) -> int:
    """Deprecated name of :func:`dense_group_size` (it returns a group size, not a run's length).

    Examples
    --------
    >>> import warnings, numpy as np, corrgrpo_core as cc
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     cc.run_length(np.array([3, 3, 9, 9]))
    2
    """
    warnings.warn(
        "corrgrpo_core.run_length is deprecated; call dense_group_size (the same function)",
        DeprecationWarning,
        stacklevel=2,
    )
    return dense_group_size(ids)
