"""CISPO for OpenRLHF, through the core's policy objectives (``corrgrpo_core.objectives``).

OpenRLHF's ``PolicyLoss`` knows PPO and GSPO only. The per-token CISPO loss and its clip metric come
from the core; the reduction to a scalar stays OpenRLHF's ``aggregate_loss`` so that its data-parallel
normalisation (``dp_size``, global token and sample counts) is untouched.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, NamedTuple

__all__ = ["CispoTerms", "cispo_terms", "require_cispo"]


class CispoTerms(NamedTuple):
    token_loss: Any  # (N, T), zero outside the mask
    clip_fraction: Any  # 0-d: share of valid tokens whose weight the clip changed
    approx_kl: Any  # 0-d: mean of log pi_old - log pi over valid tokens (OpenRLHF's ``ppo_kl``)


def require_cispo() -> ModuleType:
    """The core's objectives module, or a clear error when this core has no CISPO."""
    try:
        module = importlib.import_module("corrgrpo_core.objectives")
    except ImportError as exc:
        raise RuntimeError(
            "--corrgrpo.policy_loss cispo needs corrgrpo_core.objectives, which this corrgrpo-core lacks"
        ) from exc
    if not callable(getattr(module, "cispo_loss", None)):
        raise RuntimeError(  # noqa: TRY004 -- a missing feature, not a bad argument
            "corrgrpo_core.objectives has no cispo_loss; upgrade corrgrpo-core"
        )
    return module


def cispo_terms(
    log_probs: Any, old_log_probs: Any, advantages: Any, action_mask: Any, *, eps_low: float, eps_high: float
) -> CispoTerms:
    """Per-token CISPO loss with weight ``clip(ratio, 1 - eps_low, 1 + eps_high)`` (OpenRLHF's clip pair)."""
    import torch

    if action_mask is None:
        action_mask = torch.ones_like(log_probs, dtype=torch.bool)
    out = require_cispo().cispo_loss(
        log_probs,
        old_log_probs,
        advantages,
        action_mask,
        bound="relative",
        eps_low=eps_low,
        eps_high=eps_high,
    )
    return CispoTerms(out.token_loss, out.metrics["clip_fraction"], out.metrics["approx_kl"])
