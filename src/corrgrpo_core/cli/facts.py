"""What the commands need to know about an estimator, from the registry (no lists of names here).

The registry declares each estimator's scope and numerator; the two facts below that it does not
declare are measured on the estimator itself, on the paper's Figure 2 group, once per process.
"""

from __future__ import annotations

import functools

import numpy as np

import corrgrpo_core as cc

__all__ = ["default_estimators", "in_reward_units", "sees_only_total"]

# The paper's Figure 2 group (one group of four rollouts, three components on different scales).
_PROBE = np.array([[0.10, 0.18, 0.80], [0.18, 0.10, 7.28], [0.82, 0.90, 8.00], [0.90, 0.82, 1.52]])


def default_estimators() -> tuple[str, ...]:
    """Every registered estimator: the default of every command that compares estimators."""
    return cc.estimator_names()


def _advantages(scores: np.ndarray, name: str) -> np.ndarray:
    return np.asarray(cc.compute_advantages(scores, estimator=name), dtype=np.float64)


@functools.cache
def in_reward_units(name: str) -> bool:
    """Whether the estimator's advantages scale with the rewards (CorrGRPO, Dr.GRPO, RLOO) rather
    than being unit-free (GRPO, GDPO): the probe group x 10 gives advantages x 10."""
    base = _advantages(_PROBE, name)
    return bool(np.any(base != 0) and np.allclose(_advantages(_PROBE * 10.0, name), 10.0 * base, rtol=1e-6))


@functools.cache
def sees_only_total(name: str) -> bool:
    """Whether the estimator's advantages are a function of the weighted total alone (GRPO, Dr.GRPO,
    RLOO; not CorrGRPO, whose factor depends on the components), so a run's logged ``score`` column
    reproduces them: the registry's ``numerator == "total"``, and the total as one component gives
    the same advantages as the components."""
    if cc.get_estimator(name).numerator != "total":
        return False
    total = _PROBE.sum(axis=1, keepdims=True)
    return bool(np.allclose(_advantages(total, name), _advantages(_PROBE, name), rtol=1e-9, atol=1e-12))
