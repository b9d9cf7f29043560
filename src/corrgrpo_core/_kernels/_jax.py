"""jax: ragged groups labelled and summed with no value-dependent shape, so ``jax.jit`` traces them.

Each group is labelled by the sorted position of its first row (an integer in ``[0, N)``: group
level arrays have N rows, of which only the labelled ones are read) and summed with
``jax.ops.segment_sum``. Dense groups and everything else are the generic kernel's.
"""

from __future__ import annotations

from typing import Any

import jax

from .._lib._compat import Array, Namespace, device
from ._generic import Kernel, RaggedIndex, Runs


class JaxKernel(Kernel):
    """Group kernels for jax arrays (see the module docstring)."""

    def __init__(self, xp: Namespace) -> None:
        super().__init__(xp)

    def index(
        self, ids: Array, runs: Runs | None, dtype: Any, *, lazy: bool
    ) -> tuple[RaggedIndex, Array, bool]:
        xp = self.xp
        n, dev = ids.shape[0], device(ids)
        order = xp.argsort(ids)  # any order within a group will do
        sorted_ids = xp.take(ids, order)
        head = xp.ones((min(n, 1),), dtype=xp.bool, device=dev)
        first = xp.concat([head, sorted_ids[1:] != sorted_ids[:-1]])
        position = xp.arange(n, dtype=order.dtype, device=dev)
        start = jax.lax.cummax(xp.where(first, position, 0), axis=0)
        labels = xp.zeros_like(start).at[order].set(start)
        index = RaggedIndex(labels=labels, num=n, member=order, size=None)
        return index, self.group_sum(xp.ones((n, 1), dtype=dtype, device=dev), index), False

    def group_sum(self, x: Array, r: RaggedIndex) -> Array:
        return jax.ops.segment_sum(x, r.labels, num_segments=r.num)
