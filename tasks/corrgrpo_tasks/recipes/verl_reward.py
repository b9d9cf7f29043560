"""verl's ``reward.custom_reward_function.path`` for all three domains, dispatching on ``data_source``.

verl loads this file by path (not as a package module), so it uses absolute imports only.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

_TOOL_CALLING = ("rlla", "api_bank")
_CODE = ("leetcodedataset", "leetcode", "humaneval", "mbpp", "livecodebench")


def compute_score(
    data_source: str,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """The domain reward for ``data_source``: a dict whose keys verl logs and hands to the estimator."""
    if data_source in _TOOL_CALLING:
        module = importlib.import_module("corrgrpo_tasks.tool_calling")
    elif data_source == "agentdojo":
        module = importlib.import_module("corrgrpo_tasks.agent_security")
    elif data_source in _CODE:
        module = importlib.import_module("corrgrpo_tasks.code")
    else:
        raise ValueError(
            f"no corrgrpo reward for data_source {data_source!r}; known: "
            f"{[*_TOOL_CALLING, 'agentdojo', *_CODE]}"
        )
    result: dict[str, float] = module.compute_score(
        data_source, solution_str, ground_truth, extra_info, **kwargs
    )
    return result
