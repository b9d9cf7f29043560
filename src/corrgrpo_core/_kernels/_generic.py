"""Group kernels in the array API alone: the reference every backend module refines.

A kernel does what depends on how a backend stores and indexes arrays: sums over a group's rows,
the labels of a ragged batch, gathers of group values back to the rows. The maths on top of it
(:mod:`corrgrpo_core._stats`, :mod:`corrgrpo_core._estimators`) is written once.

Ragged groups here are labelled by the sorted position of each group's first row (an integer
in ``[0, N)``, so no shape depends on the values), and summed by a segmented doubling scan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._lib._compat import Array, Namespace, device

__all__ = ["CHUNK_ROWS", "SMALL_GROUP", "Joined", "Kernel", "RaggedIndex", "Runs", "shift_divide"]

# Groups up to this size take the one-pass sum of squares (relative error about size * eps).
SMALL_GROUP = 1024
# Rows per piece when a group-local estimator runs over a large batch on the host in pieces of
# whole groups: a piece's temporaries stay in cache, so the cost per row is flat in N.
CHUNK_ROWS = 65536


@dataclass(frozen=True)
class RaggedIndex:
    """Which group each row of a ragged batch belongs to.

    ``labels`` (N,) names each row's group in ``[0, num)``; group-level arrays have ``num`` rows
    (entries of unused labels are never read). ``member`` (num,) is one row of each group, the
    shift that centres a constant component to exactly zero. ``size`` (num,) is the group size
    (None where the kernel sums ones for it).
    """

    labels: Array
    num: int
    member: Array
    size: Array | None
    order: Array | None = None  # generic scan only: stable argsort of the ids
    seg_end: Array | None = None  # generic scan only: one past each sorted row's group
    seg_start: Array | None = None  # generic scan only
    max_size: int = 0  # generic scan only: largest group
    starts: Array | None = None  # ids in runs (host numpy array): the first row of each group, in order


@dataclass(frozen=True)
class Runs:
    """Ids on the host that form runs (each id's rows adjacent): where each run starts, row labels."""

    starts: Array
    labels: Array

    def equal_size(self) -> int:
        """The common run length n >= 2, else 0: such a batch is a dense ``(N / n, n, K)``."""
        rows, runs = self.labels.shape[0], self.starts.shape[0]
        n = rows // runs if runs else 0
        if n < 2 or n * runs != rows:
            return 0
        return n if bool((self.starts[1:] - self.starts[:-1] == n).all()) else 0


class Kernel:
    """Group kernels for any array-API namespace ``xp``.

    Row-level arrays are ``(B, n, K)`` (dense groups, reduced along axis 1) or ``(N, K)``
    (ragged groups, with a :class:`RaggedIndex`); ``sum_k`` and the ``row_dot`` methods reduce
    the trailing component axis.
    """

    #: Whether an array made once by :meth:`constant` may serve every later call (never where a call
    #: may be traced, as under ``jax.jit``: a constant made in one trace must not leak into another).
    shares_constants = False

    def __init__(self, xp: Namespace) -> None:
        self.xp = xp

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self.xp, '__name__', self.xp)!r})"

    # --- layout ----------------------------------------------------------------------------

    def working(self, x: Array, dtype: Any) -> Array:
        """``x`` in the working ``dtype``, laid out as this backend sums it best (no copy where it is)."""
        return self.xp.astype(x, dtype, copy=False)

    def output(self, x: Array, dtype: Any) -> Array:
        """Advantages ``x`` in the caller's ``dtype`` (no copy where they are in it)."""
        return self.xp.astype(x, dtype, copy=False)

    def joined(self, rows: int, dtype: Any) -> Joined:
        """An empty :class:`Joined`: arrays of ``rows`` along axis 0 in all, joined in ``dtype``."""
        return Joined(self, rows, dtype)

    def constant(self, value: float, ndim: int, dtype: Any, dev: Any) -> Array:
        """A ``(1,) * ndim`` array of ``value`` (a group size, a row count), never written."""
        return self.xp.full((1,) * ndim, value, dtype=dtype, device=dev)

    def in_host_memory(self, x: Array) -> bool:
        """Whether ``x`` lies in host memory a pass can stream through a piece at a time
        (accelerators and ``jax.jit`` get their batches whole)."""
        return False

    def max_abs(self, x: Array) -> float:
        """The largest magnitude in a concrete array (0 for an empty one), as a Python float."""
        if math.prod(x.shape) == 0:
            return 0.0
        return max(abs(_to_float(self.xp.max(x))), abs(_to_float(self.xp.min(x))))

    def sum_of_squares(self, x: Array) -> float | None:
        """sum(x * x) in one pass with no temporary and no floating-point warning, where the backend
        has one; else None (the caller then uses max and min, which cannot overflow)."""
        return None

    # --- the component axis and the whole batch -------------------------------------------

    def sum_k(self, x: Array) -> Array:
        """Sum over the trailing component axis, kept."""
        return self.xp.sum(x, axis=-1, keepdims=True)

    def batch_sum_sq(self, x: Array, axes: tuple[int, ...]) -> Array:
        """Sum of ``x * x`` over ``axes``, kept."""
        return self.xp.sum(x * x, axis=axes, keepdims=True)

    def batch_row_dot(self, x: Array, g: Array) -> Array:
        """sum_k x_ik g_k with ``g`` one value per component."""
        return self.xp.sum(x * g, axis=-1, keepdims=True)

    # --- dense groups, (B, n, K) ----------------------------------------------------------

    def dense_sum(self, x: Array) -> Array:
        """(B, 1, K) sums over each group's rows."""
        return self.xp.sum(x, axis=1, keepdims=True)

    def dense_sum_sq(self, x: Array) -> Array:
        """(B, 1, K) sums of ``x * x`` over each group's rows."""
        return self.dense_sum(x * x)

    def dense_row_dot(self, x: Array, g: Array) -> Array:
        """(B, n, 1): sum_k x_ik g_k with ``g`` (B, 1, K) the row's group value."""
        return self.xp.sum(x * g, axis=-1, keepdims=True)

    # --- ragged groups, (N, K) with an index ----------------------------------------------

    def find_runs(self, ids: Array) -> Runs | None:
        """The runs of ``ids`` where they can be read without a sort or a device read, else None."""
        return None

    def index(
        self, ids: Array, runs: Runs | None, dtype: Any, *, lazy: bool
    ) -> tuple[RaggedIndex, Array, bool]:
        """The index of integer ``ids``, each group's size (``(num, 1)``, ``dtype``), and whether every
        group has at most :data:`SMALL_GROUP` rows (False where that would need a device read)."""
        xp = self.xp
        n = ids.shape[0]
        order = xp.argsort(ids, stable=True)
        sorted_ids = xp.take(ids, order)
        start = xp.searchsorted(sorted_ids, sorted_ids, side="left")
        end = xp.searchsorted(sorted_ids, sorted_ids, side="right")
        segment = xp.take(start, xp.argsort(order))
        size = end - start  # indexed by sorted position, which is what the labels are
        max_size = 0 if lazy or n == 0 else int(xp.max(size))
        index = RaggedIndex(
            labels=segment,
            num=n,
            member=order,  # the row at sorted position s: for a group's label s, its first row
            size=size,
            order=order,
            seg_start=start,
            seg_end=end,
            max_size=max_size,
        )
        return index, xp.reshape(xp.astype(size, dtype), (n, 1)), False

    def lazy_shift(self, r: RaggedIndex) -> bool:
        """Whether the ragged methods below take their ``ref`` a piece of rows at a time, with no
        shifted copy of the batch. ``ref`` (group level, here and below): x - ref[labels] in place
        of x; where this is False, that difference is made first (a new array)."""
        return False

    def _minus_ref(self, x: Array, r: RaggedIndex, ref: Array | None) -> Array:
        return x if ref is None else self.subtract_gathered(x, ref, r)

    def group_sum(self, x: Array, r: RaggedIndex) -> Array:
        """(num, ...) sums of the rows of ``x`` with each label: the primitive the ragged sums use.

        A segmented inclusive scan by doubling: exact within a segment (no prefix-sum
        cancellation across groups), log2(largest group) passes. Labels are sorted positions of
        the groups' first rows, so the totals indexed by sorted position are the group level.
        """
        xp = self.xp
        assert r.order is not None
        assert r.seg_start is not None
        assert r.seg_end is not None
        n = x.shape[0]
        dev = device(x)
        scan = xp.take(x, r.order, axis=0)
        index = xp.arange(n, dtype=r.seg_start.dtype, device=dev)
        shift = 1
        while shift < r.max_size:
            pad = xp.zeros((shift, *x.shape[1:]), dtype=x.dtype, device=dev)
            previous = xp.concat([pad, scan[: n - shift, ...]], axis=0)
            same = xp.reshape(index - shift >= r.seg_start, (n,) + (1,) * (x.ndim - 1))
            scan = xp.where(same, scan + previous, scan)
            shift *= 2
        return xp.take(scan, r.seg_end - 1, axis=0)

    def segment_sum(self, x: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        """(num, ...) sums of the rows of ``x`` with each label."""
        return self.group_sum(self._minus_ref(x, r, ref), r)

    def segment_sum_sq(self, x: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        """(num, ...) sums of ``x * x`` of the rows with each label."""
        x = self._minus_ref(x, r, ref)
        return self.group_sum(x * x, r)

    def segment_sum_both(self, x: Array, r: RaggedIndex, *, ref: Array | None = None) -> tuple[Array, Array]:
        """:meth:`segment_sum` and :meth:`segment_sum_sq` of ``x``, in one pass where the backend can."""
        x = self._minus_ref(x, r, ref)
        return self.group_sum(x, r), self.group_sum(x * x, r)

    def gather(self, g: Array, r: RaggedIndex) -> Array:
        """Each row's group value: a new ``(N, ...)`` array."""
        return self.xp.take(g, r.labels, axis=0)

    def subtract_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        """A new array ``x - g[labels]``."""
        return x - self.gather(g, r)

    def divide_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        """``x / g[labels]``, written into ``x`` (an array of the caller's) where the backend can."""
        x /= self.gather(g, r)
        return x

    def shift_divide_gathered(
        self,
        x: Array,
        sub: Array | None,
        div: Array | None,
        r: RaggedIndex,
        *,
        in_place: bool,
        ref: Array | None = None,
    ) -> Array:
        """``(x - sub[labels]) / div[labels]`` (a None term left out): a new array, or with
        ``in_place`` written into ``x`` (an array of the caller's own) where the backend can
        (with ``ref``: into the new x - ref)."""
        if ref is not None:
            x, in_place = self._minus_ref(x, r, ref), True
        return shift_divide(x, sub, div, lambda g: self.gather(g, r), in_place=in_place)

    def row_dot_gathered(self, x: Array, g: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        """(N, 1): sum_k x_ik g_(label i) k."""
        return self.xp.sum(self._minus_ref(x, r, ref) * self.gather(g, r), axis=-1, keepdims=True)

    def sum_k_gathered(self, x: Array, r: RaggedIndex, ref: Array) -> Array:
        """(N, 1): sum_k (x - ref[labels])_ik, a new array."""
        return self.sum_k(self._minus_ref(x, r, ref))

    # --- tokens ---------------------------------------------------------------------------

    def broadcast_to_tokens(self, advantages: Array, response_mask: Array) -> Array:
        """The advantage of each sequence on its tokens inside the mask, 0 outside."""
        xp = self.xp
        mask = response_mask if response_mask.dtype == xp.bool else response_mask != 0
        values = xp.broadcast_to(advantages[..., None], tuple(response_mask.shape))
        return xp.where(mask, values, 0.0)


class Joined:
    """Arrays added in order (``rows`` along axis 0 in all), joined along axis 0 in ``dtype``."""

    def __init__(self, kernel: Kernel, rows: int, dtype: Any) -> None:
        self.kernel, self.rows, self.dtype = kernel, rows, dtype
        self.parts: list[Array] = []

    def add(self, part: Array) -> None:
        self.parts.append(part)

    def result(self) -> Array:
        parts, kernel = self.parts, self.kernel
        return kernel.output(parts[0] if len(parts) == 1 else kernel.xp.concat(parts, axis=0), self.dtype)


def shift_divide(
    x: Array, sub: Array | None, div: Array | None, expand: Callable[[Array], Array], *, in_place: bool
) -> Array:
    """``(x - expand(sub)) / expand(div)`` (a None term left out): a new array, or with ``in_place``
    written into ``x`` (an array of the caller's own) where the backend can (jax: a new array;
    a tensor that autograd records: a new one, as its graph may hold x for a backward pass)."""
    own = in_place and not getattr(x, "requires_grad", False)  # whether y may be written
    y = x
    if sub is not None:
        if own:
            y -= expand(sub)
        else:
            y, own = x - expand(sub), True
    if div is not None:
        if own:
            y /= expand(div)
        else:
            y = y / expand(div)
    return y


def _to_float(value: Array) -> float:
    """A 0-d array's value (torch: without its autograd graph)."""
    detach = getattr(value, "detach", None)
    return float(detach() if callable(detach) else value)
