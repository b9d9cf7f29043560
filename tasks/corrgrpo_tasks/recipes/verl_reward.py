"""verl's ``reward.custom_reward_function.path`` for every domain, dispatching on ``data_source``.

verl loads this file by path (not as a package module), so it uses absolute imports only. Which domain
scores which ``data_source`` is its :class:`~corrgrpo_tasks.domains.DomainSpec`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corrgrpo_tasks.domains import domain_for_source


def compute_score(
    data_source: str,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """The domain reward for ``data_source``: a dict whose keys verl logs and hands to the estimator."""
    score = domain_for_source(data_source).compute_score
    return score(data_source, solution_str, ground_truth, extra_info, **kwargs)
