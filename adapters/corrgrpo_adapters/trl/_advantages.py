"""TRL's gathered reward matrix -> one core call. No estimator maths lives here.

TRL gathers the per-function rewards of every rank into one ``(N, K)`` matrix (rank-major, so each
prompt's ``num_generations`` completions are consecutive rows) before it normalises them. Working on
that global matrix, as TRL does, is what lets a group span ranks; each rank keeps its own rows after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import corrgrpo_core as cc

__all__ = ["advantage_diagnostics", "group_advantages"]


def _as_groups(rewards: Any, num_generations: int) -> Any:
    n, k = rewards.shape
    if num_generations < 1 or n % num_generations:
        raise ValueError(
            f"the gathered reward matrix has {n} rows, which is not a whole number of groups of "
            f"num_generations={num_generations}"
        )
    return rewards.reshape(n // num_generations, num_generations, k)


def group_advantages(
    rewards: Any,
    num_generations: int,
    *,
    estimator: str = "corrgrpo",
    weights: Sequence[float] | Any | None = None,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Advantages for TRL's gathered ``(N, K)`` reward matrix of consecutive groups.

    Args:
        rewards: ``(N, K)``, one column per reward function, NaN where a function returned None;
            rows ``g * num_generations .. (g + 1) * num_generations - 1`` are one prompt's group.
        num_generations: group size G (TRL's ``num_generations``, or ``num_generations_eval``).
        estimator: a name from ``corrgrpo_core.estimator_names()``.
        weights: one weight per column (TRL's ``reward_weights``); None means all ones.
        options: further keyword options of that estimator (eps, nan_policy, ...).

    Returns:
        ``(N,)`` advantages in the rewards' namespace, dtype and device.

    Example::

        >>> import torch
        >>> r = torch.tensor([[0.0, 1.0], [1.0, 3.0], [2.0, 2.0], [2.0, 2.0]])
        >>> group_advantages(r, 2, estimator="dr_grpo")
        tensor([-1.5000,  1.5000,  0.0000,  0.0000])
    """
    n = rewards.shape[0]
    kwargs = {} if options is None else dict(options)
    if weights is not None:
        kwargs["weights"] = weights
    return cc.compute_advantages(_as_groups(rewards, num_generations), estimator=estimator, **kwargs).reshape(
        n
    )


def advantage_diagnostics(
    rewards: Any,
    num_generations: int,
    *,
    component_names: Sequence[str],
    estimator: str = "corrgrpo",
    weights: Sequence[float] | Any | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """The core's diagnostics of a gathered reward matrix, as flat metrics (``AdvantageStats.summary``).

    They describe the batch under CorrGRPO versus GRPO whatever ``estimator`` is, so a GRPO or GDPO run
    can log how much one component dominates GRPO's denominator. They are computed with exactly the
    estimator's options that ``advantage_stats`` shares with it (the core's registry says which:
    ``EstimatorSpec.diagnostic_kwargs``), so with CorrGRPO they describe the advantages used.
    """
    kwargs = cc.get_estimator(estimator).diagnostic_kwargs(dict(options or {}))
    stats = cc.advantage_stats(_as_groups(rewards, num_generations), weights=weights, **kwargs)
    return stats.summary(component_names=list(component_names))
