"""Group layouts: per-row group sums for dense ``(B, n, K)`` and ragged ``(N, K)`` batches.

Every statistic the estimators need is a sum over a group (or over the batch) broadcast back to
the rows, so one primitive, :meth:`Groups.group_sum`, serves them all. Dense groups reduce along
an axis. Ragged groups are ranked once by a stable sort of their ids; each row's group is then
named by the sorted position of its group's first row (an integer in ``[0, N)``), which lets
numpy (``bincount``), torch (``index_add_``) and jax (``segment_sum``) sum segments natively
without a value-dependent number of groups. Other namespaces use a segmented doubling scan
written in the array API alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ._lib._compat import Array, Namespace, is_jax_namespace, is_numpy_namespace, is_torch_namespace


@dataclass(frozen=True)
class RaggedIndex:
    """Where each row of a ragged batch sits once the rows are sorted by group id."""

    segment: Array  # (N,) sorted position of the first row of the row's group
    order: Array  # (N,) stable argsort of the ids
    inverse: Array  # (N,) inverse permutation of ``order``
    seg_start: Array  # (N,) in sorted order: first index of the row's group
    seg_end: Array  # (N,) in sorted order: one past the last index
    max_size: int  # largest group; only needed (and only computed) by the generic scan


@dataclass(frozen=True)
class Groups:
    """How the rows of a batch form groups.

    Internal arrays always carry a trailing component axis: ``(B, n, K)`` (dense) or ``(N, K)``
    (ragged). ``count`` is each row's group size, shaped to broadcast against them.
    """

    xp: Namespace
    count: Array
    ragged: RaggedIndex | None = None

    @property
    def dense(self) -> bool:
        return self.ragged is None

    def group_sum(self, x: Array) -> Array:
        """Sum of ``x`` over each row's group, broadcastable against ``x``."""
        xp, r = self.xp, self.ragged
        if r is None:
            return xp.sum(x, axis=1, keepdims=True)
        if is_numpy_namespace(xp):
            return _numpy_segment_sum(xp, x, r.segment)
        if is_torch_namespace(xp):
            sums = xp.zeros(x.shape, dtype=x.dtype, device=x.device).index_add_(0, r.segment, x)
            return sums[r.segment, ...]
        if is_jax_namespace(xp):
            import jax

            sums = jax.ops.segment_sum(x, r.segment, num_segments=x.shape[0])
            return xp.take(sums, r.segment, axis=0)
        return _scan_sum(xp, x, r)

    def batch_sum(self, x: Array) -> Array:
        """Sum of ``x`` over every row of the batch, broadcastable against ``x``."""
        axes = (0, 1) if self.ragged is None else (0,)
        return self.xp.sum(x, axis=axes, keepdims=True)

    def first_of_group(self, x: Array) -> Array:
        """The value of each row's group at the group's first row, broadcastable against ``x``."""
        r = self.ragged
        if r is None:
            return x[:, :1, ...]
        return self.xp.take(x, self.xp.take(r.order, r.segment), axis=0)


def _scan_sum(xp: Namespace, x: Array, r: RaggedIndex) -> Array:
    # Segmented inclusive scan by doubling: exact within a segment (no prefix-sum
    # cancellation across groups), log2(largest group) passes.
    n = x.shape[0]
    scan = xp.take(x, r.order, axis=0)
    index = xp.arange(n, dtype=r.seg_start.dtype, device=_device(x))
    shift = 1
    while shift < r.max_size:
        pad = xp.zeros((shift, *x.shape[1:]), dtype=x.dtype, device=_device(x))
        previous = xp.concat([pad, scan[: n - shift, ...]], axis=0)
        same = xp.reshape(index - shift >= r.seg_start, (n,) + (1,) * (x.ndim - 1))
        scan = xp.where(same, scan + previous, scan)
        shift *= 2
    totals = xp.take(scan, r.seg_end - 1, axis=0)
    return xp.take(totals, r.inverse, axis=0)


def _device(x: Array) -> Any:
    from ._lib._compat import device

    return device(x)


def _numpy_segment_sum(xp: Namespace, x: Array, segment: Array) -> Array:
    import numpy as np

    n, k = x.shape[0], math.prod(x.shape[1:])
    flat = np.reshape(segment, (n, 1)) * k + np.arange(k)
    sums = np.bincount(flat.ravel(), weights=np.reshape(x, (-1,)), minlength=n * k)
    return xp.take(xp.reshape(xp.asarray(sums, dtype=x.dtype), x.shape), segment, axis=0)


def dense_groups(xp: Namespace, shape: tuple[int, ...], dtype: Any, dev: Any) -> Groups:
    """Groups for an internal ``(B, n, K)`` array."""
    count = xp.full((1, 1, 1), float(shape[1]), dtype=dtype, device=dev)
    return Groups(xp=xp, count=count)


def ragged_groups(xp: Namespace, group_ids: Array, dtype: Any, dev: Any, *, lazy: bool) -> Groups:
    """Groups for an internal ``(N, K)`` array whose rows belong to ``group_ids``."""
    order = xp.argsort(group_ids, stable=True)
    sorted_ids = xp.take(group_ids, order)
    start = xp.searchsorted(sorted_ids, sorted_ids, side="left")
    end = xp.searchsorted(sorted_ids, sorted_ids, side="right")
    n = group_ids.shape[0]
    inverse = _inverse_permutation(xp, order, dev)
    segment = xp.take(start, inverse)
    count = xp.reshape(xp.astype(xp.take(end - start, inverse), dtype), (n, 1))
    native = is_numpy_namespace(xp) or is_torch_namespace(xp) or is_jax_namespace(xp)
    max_size = 0 if native or lazy or n == 0 else int(xp.max(end - start))
    index = RaggedIndex(
        segment=segment, order=order, inverse=inverse, seg_start=start, seg_end=end, max_size=max_size
    )
    return Groups(xp=xp, count=count, ragged=index)


def _inverse_permutation(xp: Namespace, order: Array, dev: Any) -> Array:
    n = order.shape[0]
    if is_numpy_namespace(xp):
        import numpy as np

        inverse = np.empty_like(order)
        inverse[order] = np.arange(n, dtype=order.dtype)
        return inverse
    if is_torch_namespace(xp):
        return xp.empty_like(order).scatter_(0, order, xp.arange(n, dtype=order.dtype, device=dev))
    if is_jax_namespace(xp):
        return xp.zeros_like(order).at[order].set(xp.arange(n, dtype=order.dtype, device=dev))
    return xp.argsort(order)
