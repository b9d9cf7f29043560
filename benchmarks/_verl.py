"""verl's own GRPO advantage, called the way verl calls it (token-level shapes), when importable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

TOKENS = 16  # response length of the token-level tensors


def verl_calls(flat: Any, ids: np.ndarray) -> dict[str, Callable[[], Any]]:
    """{"verl": ..., "verl_vec": ...} for a torch (N, K) batch; {} when verl is not importable."""
    try:
        from verl.trainer.ppo import core_algos
    except ImportError:
        return {}
    import torch

    n = flat.shape[0]
    mask = torch.ones((n, TOKENS), dtype=torch.float32, device=flat.device)
    rewards = torch.zeros((n, TOKENS), dtype=torch.float32, device=flat.device)
    rewards[:, -1] = flat.sum(-1).to(torch.float32)  # the outcome reward sits on the last token
    index = np.array([str(i) for i in ids], dtype=object)  # verl passes uid strings
    calls: dict[str, Callable[[], Any]] = {
        "verl": lambda: core_algos.compute_grpo_outcome_advantage(rewards, mask, index, epsilon=1e-6)
    }
    vec = getattr(core_algos, "compute_grpo_vectorized_outcome_advantage", None)
    if vec is not None:
        calls["verl_vec"] = lambda: vec(rewards, mask, index, epsilon=1e-6)
    return calls
