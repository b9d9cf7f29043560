"""What every adapter logs, under the same names: the core's ``AdvantageStats.summary()`` under
``corrgrpo/``, for every estimator (TRL's trainer, verl's step metrics, OpenRLHF's ``Experience.info``).
Among them ``corrgrpo/zero_signal_groups``, the share of groups where no reward component varies (every
estimator's advantages are 0 there), computed the same way whatever the estimator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["METRIC_PREFIX", "ZERO_SIGNAL", "logged_summary"]

#: The prefix of every metric an adapter adds to its framework's logs.
METRIC_PREFIX = "corrgrpo/"
#: The summary key of the zero-signal-group metric (TRL's adapter logs it in place of TRL's
#: frac_reward_zero_std, even with its other diagnostics off).
ZERO_SIGNAL = "zero_signal_groups"


def logged_summary(stats: Any, component_names: Sequence[str]) -> dict[str, float]:
    """``stats.summary(component_names)`` (an ``AdvantageStats``) as the metrics an adapter logs."""
    return {
        METRIC_PREFIX + k: float(v) for k, v in stats.summary(component_names=list(component_names)).items()
    }
