"""Hypothesis strategies for reward batches that exercise every corner an estimator must handle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st


@dataclass(frozen=True)
class RewardBatch:
    """A ragged batch: ``scores`` (N, K) float64 and integer ``group_ids`` (N,)."""

    scores: npt.NDArray[np.float64]
    group_ids: npt.NDArray[np.int64]

    def dense(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]] | None:
        """``(B, n, K)`` scores and the row order that builds them, when all groups have one size."""
        ids = self.group_ids
        _, counts = np.unique(ids, return_counts=True)
        if ids.size == 0 or np.any(counts != counts[0]):
            return None
        order = np.argsort(ids, kind="stable")
        return self.scores[order].reshape(len(counts), int(counts[0]), self.scores.shape[1]), order


_KINDS = ("normal", "binary", "constant", "scaled", "duplicate", "negated")


@st.composite
def _column(draw: st.DrawFn, n: int, previous: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    kind = draw(st.sampled_from(_KINDS if previous else _KINDS[:4]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "binary":
        return rng.integers(0, 2, n).astype(np.float64)
    if kind == "constant":
        return np.full(n, draw(st.sampled_from([0.0, 0.1, 1.0, -3.7, 1e3])))
    if kind == "scaled":
        return rng.normal(size=n) * 10.0 ** draw(st.integers(-3, 3)) + draw(st.floats(-100, 100))
    if kind == "duplicate":
        return previous[draw(st.integers(0, len(previous) - 1))].copy()
    if kind == "negated":
        return -2.5 * previous[draw(st.integers(0, len(previous) - 1))]
    return rng.normal(size=n)


@st.composite
def reward_batches(
    draw: st.DrawFn,
    *,
    min_groups: int = 1,
    max_groups: int = 5,
    min_group_size: int = 1,
    max_group_size: int = 8,
    max_components: int = 5,
    equal_sizes: bool = False,
    shuffle: bool = True,
) -> RewardBatch:
    """Ragged reward batches: groups of mixed sizes (singletons and pairs included), components
    that are binary, constant, on scales from 1e-3 to 1e3, duplicated or anti-correlated."""
    groups = draw(st.integers(min_groups, max_groups))
    if equal_sizes:
        size = draw(st.integers(min_group_size, max_group_size))
        sizes = [size] * groups
    else:
        sizes = draw(st.lists(st.integers(min_group_size, max_group_size), min_size=groups, max_size=groups))
    n = sum(sizes)
    k = draw(st.integers(1, max_components))
    columns: list[npt.NDArray[np.float64]] = []
    for _ in range(k):
        columns.append(draw(_column(n, columns)))
    scores = np.stack(columns, axis=1) if n else np.zeros((0, k))
    labels = draw(st.lists(st.integers(-(2**40), 2**40), min_size=groups, max_size=groups, unique=True))
    ids = np.repeat(np.asarray(labels, dtype=np.int64), sizes)
    if shuffle and n:
        perm = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(n)
        scores, ids = scores[perm], ids[perm]
    return RewardBatch(scores=np.ascontiguousarray(scores), group_ids=ids)


def weights_for(k: int) -> Any:
    """Weights, negative and zero included."""
    return st.lists(st.sampled_from([1.0, 0.5, 2.0, 0.05, -1.0, 0.0, 3.0]), min_size=k, max_size=k).map(
        np.asarray
    )
