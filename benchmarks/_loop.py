"""The loop baseline: the estimators as the reference code writes them, one group at a time.

It runs in the dtype of the benchmark's data (float64 by default, where the reference uses
float32: :mod:`benchmarks._reference` is the faithful float32 version, timed by
``python -m benchmarks.frameworks verl``), with one index array per group as the reference builds.

A dict maps each id to its row positions (``enumerate(index)``), then each group is gathered
and reduced with per-group array operations (numpy, or torch as in the authors' verl fork).
Reference semantics: verl's GRPO gives a group of one mean 0 and std 1; CorrGRPO's zero-variance
test is the exact ``var > 0``; eps is 1e-6 (inside the square root for CorrGRPO, outside the
standard deviation for GRPO and GDPO).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

EPS = 1e-6


class _Ops:
    """The handful of per-group operations the reference uses, on numpy or torch."""

    def __init__(self, like: Any) -> None:
        self.torch = type(like).__module__.startswith("torch")
        if self.torch:
            import torch

            self.lib: Any = torch
        else:
            self.lib = np

    def index(self, pos: list[int], like: Any) -> Any:
        """The group's row positions as an index array, built once per group (as the reference does)."""
        if self.torch:
            return self.lib.tensor(pos, dtype=self.lib.long, device=like.device)
        return np.asarray(pos)

    def take(self, x: Any, idx: Any) -> Any:
        return x.index_select(0, idx) if self.torch else x[idx]

    def put(self, out: Any, idx: Any, v: Any) -> None:
        if self.torch:
            out.index_copy_(0, idx, v)
        else:
            out[idx] = v

    def std(self, x: Any) -> Any:
        return x.std(0) if self.torch else x.std(0, ddof=1)


def _groups(index: Any) -> dict[int, list[int]]:
    id2pos: dict[int, list[int]] = defaultdict(list)
    for i, idx in enumerate(index):
        id2pos[int(idx)].append(i)
    return id2pos


def _group_z(x: Any, index: Any, ops: _Ops) -> Any:
    """verl's GRPO z-score of each column of x, group by group (singleton: mean 0, std 1)."""
    out = ops.lib.zeros_like(x)
    for pos in _groups(index).values():
        idx = ops.index(pos, x)
        g = ops.take(x, idx)
        if len(pos) == 1:
            mean, std = ops.lib.zeros_like(g[0]), ops.lib.ones_like(g[0])
        else:
            mean, std = g.mean(0), ops.std(g)
        ops.put(out, idx, (g - mean) / (std + EPS))
    return out


def loop_grpo(scores: Any, index: Any, weights: Any = None) -> Any:
    ops = _Ops(scores)
    x = scores if weights is None else scores * weights
    return _group_z(x.sum(-1, keepdims=True), index, ops)[:, 0]


def loop_corrgrpo(scores: Any, index: Any, weights: Any = None) -> Any:
    ops, lib = _Ops(scores), _Ops(scores).lib
    x = scores if weights is None else scores * weights
    out = lib.zeros_like(x[:, 0])
    for pos in _groups(index).values():
        idx = ops.index(pos, x)
        g = ops.take(x, idx)
        centred = g - g.mean(0)
        total = centred.sum(-1)
        n = len(pos)
        if n > 1:
            cov = centred.T @ centred / (n - 1)
            var = lib.diagonal(cov) if not ops.torch else cov.diagonal()
            s = lib.where(var > 0, 1.0 / lib.sqrt(lib.where(var > 0, var, lib.ones_like(var))), 0 * var)
            corr = cov * (s[:, None] * s[None, :])
            c = corr.sum()
            c = c.clamp_min(0) if ops.torch else max(float(c), 0.0)
        else:
            c = 0.0
        ops.put(out, idx, total / ((c + EPS) ** 0.5))
    return out


def _batch_z(h: Any, ops: _Ops) -> Any:
    return (h - h.mean(0)) / (ops.std(h) + EPS)


def loop_gdpo(scores: Any, index: Any, weights: Any = None) -> Any:
    ops = _Ops(scores)
    z = _group_z(scores, index, ops)
    h = (z if weights is None else z * weights).sum(-1)
    return _batch_z(h, ops)


def loop_gdpo_corr(scores: Any, index: Any, weights: Any = None) -> Any:
    ops, lib = _Ops(scores), _Ops(scores).lib
    z = _group_z(scores, index, ops)
    u = z if weights is None else z * weights
    centred = u - u.mean(0)
    zs = (centred / ops.std(u)).sum(-1)  # batch z-scores, no eps (the identity's z)
    den = lib.sqrt(ops.std(zs) ** 2 + EPS)
    return centred.sum(-1) / den


LOOPS: dict[str, Callable[..., Any]] = {
    "grpo": loop_grpo,
    "corrgrpo": loop_corrgrpo,
    "gdpo": loop_gdpo,
    "gdpo_corr": loop_gdpo_corr,
}
