"""The reference CorrGRPO estimator as its authors wrote it, for timing (HKUST-KnowComp/CorrGRPO).

A restatement of ``compute_grpo_covariance_coefficient_outcome_advantage`` in the authors' verl
fork, kept faithful in what costs time: each reward component is read from ``non_tensor_batch`` as
float32, scattered into a zeros ``(N, T)`` float32 tensor at the last response token and summed
back (as the fork does), the groups come from a ``defaultdict(list)`` over ``enumerate(index)``
(uuid strings), and each group runs ``index_select`` (one index tensor per group), the K x K
covariance by matmul in float32, the masked ``rsqrt``, the correlation sum, ``index_copy_``; the
scalars are broadcast with ``scalar[:, None] * response_mask``. Semantics: the exact ``var > 0``
test, eps = 1e-6 inside the square root, a group of one gets 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

EPS = 1e-6


def reference_corrgrpo(
    response_mask: Any, index: Any, non_tensor_batch: Mapping[str, Any], keys: Sequence[str]
) -> tuple[Any, Any]:
    import torch

    with torch.no_grad():
        n, t = response_mask.shape
        dev = response_mask.device
        last = torch.clamp(response_mask.sum(-1) - 1, 0, t - 1)
        rows = torch.arange(n, device=dev)
        columns = []
        for key in keys:
            comp = torch.tensor(np.asarray(non_tensor_batch[key], dtype=np.float32), device=dev)
            token = torch.zeros((n, t), dtype=torch.float32, device=dev)
            token[rows, last] = comp
            columns.append(token.sum(-1))
        x = torch.stack(columns, dim=-1)  # (N, K) float32
        positions: dict[Any, list[int]] = defaultdict(list)
        for i, uid in enumerate(index):
            positions[uid].append(i)
        scalar = torch.zeros(n, dtype=torch.float32, device=dev)
        for pos in positions.values():
            idx = torch.tensor(pos, dtype=torch.long, device=dev)
            g = x.index_select(0, idx)
            centred = g - g.mean(0, keepdim=True)
            total = centred.sum(-1)
            m = len(pos)
            if m > 1:
                cov = centred.T @ centred / (m - 1)
                var = cov.diagonal()
                inv = torch.where(var > 0, torch.rsqrt(var), torch.zeros_like(var))
                s = (cov * (inv[:, None] * inv[None, :])).sum().clamp_min(0)
            else:
                s = torch.zeros((), dtype=torch.float32, device=dev)
            scalar.index_copy_(0, idx, total / torch.sqrt(s + EPS))
        adv = scalar[:, None] * response_mask
    return adv, adv
