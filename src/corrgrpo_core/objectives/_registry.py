"""Objective registry and ``objective+estimator`` combination names for adapter configs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._lib._compat import Array
from .._registry import estimator_names, get_estimator
from .._validation import FilterCriterion, unknown_name
from ._losses import PolicyLoss, cispo_loss, dapo_loss, gspo_loss, ppo_clip_loss

__all__ = [
    "ObjectiveSpec",
    "filter_criterion_for",
    "get_objective",
    "objective_names",
    "parse_combination",
    "policy_loss",
]


@dataclass(frozen=True)
class ObjectiveSpec:
    """One registered policy objective.

    Attributes
    ----------
    name : str
        Registry key.
    fn : callable
        ``fn(log_prob, old_log_prob, advantages, mask, /, **options) -> PolicyLoss``.
    summary : str
        One line for ``--help`` texts and docs.
    default_estimator : str
        The advantage estimator the method's paper pairs it with (used when a combination names
        only the objective).
    dynamic_sampling : bool
        Whether the method's recipe filters uninformative groups (:func:`informative_groups`).
    overlong_shaping : bool
        Whether the method's recipe adds :func:`overlong_penalty` to the reward.
    """

    name: str
    fn: Callable[..., PolicyLoss]
    summary: str
    default_estimator: str = "grpo"
    dynamic_sampling: bool = False
    overlong_shaping: bool = False


_OBJECTIVES: dict[str, ObjectiveSpec] = {
    spec.name: spec
    for spec in (
        ObjectiveSpec("ppo", ppo_clip_loss, "PPO/GRPO clipped surrogate (symmetric clip 0.2)"),
        ObjectiveSpec(
            "dapo",
            dapo_loss,
            "DAPO: clip-higher (0.2, 0.28), token-mean; recipe adds dynamic sampling and overlong shaping",
            dynamic_sampling=True,
            overlong_shaping=True,
        ),
        ObjectiveSpec("cispo", cispo_loss, "CISPO: REINFORCE with a clipped stop-gradient IS weight"),
        ObjectiveSpec("gspo", gspo_loss, "GSPO: clipped surrogate on the sequence-level ratio"),
    )
}


def objective_names() -> tuple[str, ...]:
    """Registered objective names, sorted."""
    return tuple(sorted(_OBJECTIVES))


def get_objective(name: str) -> ObjectiveSpec:
    """The :class:`ObjectiveSpec` registered as ``name``; ``ValueError`` naming the choices otherwise."""
    try:
        return _OBJECTIVES[name]
    except (KeyError, TypeError):
        raise unknown_name("objective", name, _OBJECTIVES) from None


def policy_loss(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    /,
    *,
    objective: str = "ppo",
    **options: Any,
) -> PolicyLoss:
    """Dispatch to the objective registered as ``objective`` with its keyword ``options``.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import policy_loss
    >>> lp = np.log(np.asarray([[0.5]]))
    >>> float(policy_loss(lp, lp, np.asarray([2.0]), np.asarray([[1]]), objective="dapo").loss)
    -2.0
    """
    return get_objective(objective).fn(log_prob, old_log_prob, advantages, mask, **options)


def parse_combination(name: str) -> tuple[str, str]:
    """Split an adapter option such as ``"cispo+corrgrpo"`` into ``(objective, estimator)``.

    Either part may come first or be left out: a lone objective takes its method's own
    estimator (``"dapo"`` -> ``("dapo", "grpo")``), a lone estimator the PPO/GRPO clip loss
    (``"corrgrpo"`` -> ``("ppo", "corrgrpo")``). Names are case-insensitive.

    Examples
    --------
    >>> from corrgrpo_core.objectives import parse_combination
    >>> parse_combination("cispo+corrgrpo"), parse_combination("DAPO")
    (('cispo', 'corrgrpo'), ('dapo', 'grpo'))
    """
    if not isinstance(name, str):
        raise TypeError(f"combination must be a string like 'dapo+corrgrpo', got {type(name).__name__}")
    parts = [p.strip().lower() for p in name.split("+")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"combination {name!r} must be 'objective', 'estimator' or 'objective+estimator'")
    estimators = estimator_names()
    objective: str | None = None
    estimator: str | None = None
    for part in parts:
        if part in _OBJECTIVES and objective is None:
            objective = part
        elif part in estimators and estimator is None:
            estimator = part
        else:
            raise ValueError(
                f"cannot read {part!r} in combination {name!r}: expected at most one objective from "
                f"{objective_names()} and at most one estimator from {tuple(sorted(estimators))}"
            )
    if objective is None:
        objective = "ppo"
    if estimator is None:
        estimator = _OBJECTIVES[objective].default_estimator
    return objective, estimator


def filter_criterion_for(estimator: str) -> FilterCriterion:
    """The :func:`informative_groups` criterion that matches ``estimator``, as its registry entry
    declares it (:attr:`corrgrpo_core.EstimatorSpec.numerator`).

    ``"total"`` for estimators whose advantage is the centred weighted total up to a group
    factor (grpo, dr_grpo, rloo, corrgrpo), since a group with tied totals gets zero advantage
    from them; ``"any_component"`` for the per-component normalisers (gdpo, gdpo_corr, mo_grpo,
    dara), which can learn from such a group. An estimator added with
    :func:`corrgrpo_core.register_estimator` gets the criterion its ``numerator`` declares.

    Examples
    --------
    >>> from corrgrpo_core.objectives import filter_criterion_for
    >>> filter_criterion_for("corrgrpo"), filter_criterion_for("gdpo")
    ('total', 'any_component')
    """
    return get_estimator(estimator).filter_criterion
