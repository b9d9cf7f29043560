"""Reference implementations written the slow, obvious way: one group at a time, explicit matrices.

A second writing of the estimators on purpose: they share no code with :mod:`._estimators` (the
one definition the library computes with), so that agreement between the two means something.
They are for the conformance kit and the tests only (the registry hands them out as
``EstimatorSpec.oracle``); no estimator call runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


def _by_group(scores: F64, group_ids: npt.NDArray[Any], per_group: Callable[[F64], F64]) -> F64:
    out = np.zeros(scores.shape[0])
    for gid in np.unique(group_ids):
        rows = np.flatnonzero(group_ids == gid)
        out[rows] = per_group(scores[rows])
    return out


def _varies(column: F64, tol: float) -> bool:
    return bool(column.size > 1 and np.std(column) > tol * np.sqrt(np.mean(column**2)))


def corrgrpo_oracle(
    scores: F64,
    group_ids: npt.NDArray[Any],
    *,
    weights: F64 | None = None,
    eps: float = 1e-6,
    eps_placement: str = "inside",
    tol: float = 1e-12,
) -> F64:
    """CorrGRPO with the explicit masked Pearson matrix of each group (paper eq. 2)."""
    x = scores * (1.0 if weights is None else weights)

    def group(g: F64) -> F64:
        n, k = g.shape
        if n < 2:
            return np.zeros(n)
        c = g - g.mean(axis=0)
        cov = c.T @ c / (n - 1)
        inv = np.array([1 / np.sqrt(cov[j, j]) if _varies(g[:, j], tol) else 0.0 for j in range(k)])
        s = max(float(np.sum(cov * np.outer(inv, inv))), 0.0)
        den = np.sqrt(s + eps) if eps_placement == "inside" else np.sqrt(s) + eps
        return c.sum(axis=1) / den if den > 0 else np.zeros(n)

    return _by_group(x, group_ids, group)


def grpo_oracle(
    scores: F64,
    group_ids: npt.NDArray[Any],
    *,
    weights: F64 | None = None,
    eps: float = 1e-6,
    tol: float = 1e-12,
) -> F64:
    """GRPO: (R - mean) / (std + eps) of the weighted total; constant groups and singletons get 0."""
    total = (scores * (1.0 if weights is None else weights)).sum(axis=1)

    def group(r: F64) -> F64:
        if not _varies(r, tol):
            return np.zeros(r.shape[0])
        return np.asarray((r - r.mean()) / (r.std(ddof=1) + eps), dtype=np.float64)

    return _by_group(total[:, None], group_ids, lambda g: group(g[:, 0]))


def dr_grpo_oracle(scores: F64, group_ids: npt.NDArray[Any], *, weights: F64 | None = None) -> F64:
    """Dr.GRPO: the centred weighted total."""
    total = (scores * (1.0 if weights is None else weights)).sum(axis=1)
    return _by_group(total[:, None], group_ids, lambda g: g[:, 0] - g[:, 0].mean())


def rloo_oracle(scores: F64, group_ids: npt.NDArray[Any], *, weights: F64 | None = None) -> F64:
    """RLOO: each total minus the mean of the others."""
    total = (scores * (1.0 if weights is None else weights)).sum(axis=1)

    def group(r: F64) -> F64:
        n = r.shape[0]
        return np.zeros(n) if n < 2 else r - (r.sum() - r) / (n - 1)

    return _by_group(total[:, None], group_ids, lambda g: group(g[:, 0]))


def _zscores(scores: F64, group_ids: npt.NDArray[Any], eps: float, tol: float) -> F64:
    z = np.zeros_like(scores)
    for j in range(scores.shape[1]):

        def group(g: F64) -> F64:
            r = g[:, 0]
            return np.zeros(r.shape[0]) if not _varies(r, tol) else (r - r.mean()) / (r.std(ddof=1) + eps)

        z[:, j] = _by_group(scores[:, j : j + 1], group_ids, group)
    return z


def mo_grpo_oracle(
    scores: F64,
    group_ids: npt.NDArray[Any],
    *,
    weights: F64 | None = None,
    eps: float = 1e-6,
    tol: float = 1e-12,
) -> F64:
    """MO-GRPO: sum_k w_k z_k."""
    weighted = _zscores(scores, group_ids, eps, tol) * (1.0 if weights is None else weights)
    return np.asarray(weighted.sum(axis=1), dtype=np.float64)


def gdpo_oracle(
    scores: F64,
    group_ids: npt.NDArray[Any],
    *,
    weights: F64 | None = None,
    eps: float = 1e-6,
    tol: float = 1e-12,
) -> F64:
    """GDPO: MO-GRPO, then a z-score over the batch."""
    h = mo_grpo_oracle(scores, group_ids, weights=weights, eps=eps, tol=tol)
    if not _varies(h, tol):
        return np.zeros_like(h)
    return np.asarray((h - h.mean()) / (h.std(ddof=1) + eps), dtype=np.float64)


ORACLES: dict[str, Callable[..., F64]] = {
    "corrgrpo": corrgrpo_oracle,
    "dr_grpo": dr_grpo_oracle,
    "gdpo": gdpo_oracle,
    "grpo": grpo_oracle,
    "mo_grpo": mo_grpo_oracle,
    "rloo": rloo_oracle,
}
