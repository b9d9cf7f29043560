"""Policy objectives (PPO clip, DAPO, CISPO, GSPO) and DAPO's sampling machinery, on any array API.

Advantages come from :func:`corrgrpo_core.compute_advantages`; these functions turn them, with
per-token log-probabilities, into a differentiable loss (torch and jax autograd). Combining
CorrGRPO with DAPO, CISPO or GSPO swaps the advantage and keeps the objective; an adapter names
such a pair ``"dapo+corrgrpo"`` (:func:`parse_combination`).
"""

from ._aggregate import AggregationMode, aggregate_loss, aggregation_modes
from ._losses import KLKind, PolicyLoss, cispo_loss, dapo_loss, gspo_loss, kl_penalty, ppo_clip_loss
from ._registry import (
    ObjectiveSpec,
    filter_criterion_for,
    get_objective,
    objective_names,
    parse_combination,
    policy_loss,
)
from ._sampling import FilterCriterion, informative_groups, overlong_penalty

__all__ = [
    "AggregationMode",
    "FilterCriterion",
    "KLKind",
    "ObjectiveSpec",
    "PolicyLoss",
    "aggregate_loss",
    "aggregation_modes",
    "cispo_loss",
    "dapo_loss",
    "filter_criterion_for",
    "get_objective",
    "gspo_loss",
    "informative_groups",
    "kl_penalty",
    "objective_names",
    "overlong_penalty",
    "parse_combination",
    "policy_loss",
    "ppo_clip_loss",
]
