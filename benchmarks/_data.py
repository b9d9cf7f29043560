"""Reward batches in the layouts the frameworks deliver."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# name -> (group size, or 0 for ragged sizes 1..32; ids "runs" (each group's rows adjacent) or "shuffled")
LAYOUTS: dict[str, tuple[int, str]] = {
    "dense4": (4, "dense"),
    "dense8": (8, "dense"),
    "dense16": (16, "dense"),
    "runs8": (8, "runs"),  # verl: each prompt's n rollouts adjacent, one size
    "runs": (0, "runs"),  # verl with uneven groups: sizes 1..32, adjacent
    "shuffled": (0, "shuffled"),  # sizes 1..32, rows in random order
}
MAX_RAGGED = 32


@dataclass(frozen=True)
class Case:
    """One benchmark input: ``scores`` is (B, n, K) for dense layouts, else (N, K) with ``ids``."""

    layout: str
    scores: npt.NDArray[np.floating]
    ids: npt.NDArray[np.int64] | None
    flat_ids: npt.NDArray[np.int64]  # (N,) the group of each row of ``scores`` reshaped to (N, K)

    @property
    def rows(self) -> int:
        return int(self.flat_ids.shape[0])

    @property
    def flat(self) -> npt.NDArray[np.floating]:
        return self.scores.reshape(self.rows, -1)


def _sizes(n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    sizes = rng.integers(1, MAX_RAGGED + 1, size=n // 8 + 2)
    cut = int(np.searchsorted(np.cumsum(sizes), n))
    sizes = sizes[: cut + 1].copy()
    sizes[-1] -= int(sizes.sum()) - n
    return sizes[sizes > 0]


def make_case(layout: str, n: int, k: int, *, dtype: str = "float64", seed: int = 0) -> Case:
    """About ``n`` rows (a multiple of the group size when fixed) of ``k`` reward components.

    Components alternate between binary pass/fail rewards, which make constant groups common,
    and continuous scores correlated with the first one, as in multi-reward RL.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    size, kind = LAYOUTS[layout]
    rng = np.random.default_rng(seed)
    if size:
        n = max(size, n // size * size)
        ids = np.repeat(np.arange(n // size), size)
    else:
        ids = np.repeat(np.arange(len(s := _sizes(n, rng))), s)
    quality = rng.random(n)
    cols = []
    for j in range(k):
        if j % 2:
            cols.append((rng.random(n) < quality).astype(np.float64))
        else:
            cols.append(quality * (1 + j) + rng.normal(0.0, 0.3, n))
    scores = np.stack(cols, axis=1).astype(dtype)
    if kind == "shuffled":
        perm = rng.permutation(n)
        scores, ids = scores[perm], ids[perm]
    if kind == "dense":
        return Case(layout, scores.reshape(n // size, size, k), None, ids)
    return Case(layout, np.ascontiguousarray(scores), ids.astype(np.int64), ids.astype(np.int64))
