"""OpenRLHF ``--reward.remote_url`` functions: components in ``extra_logs``, their weighted sum as reward."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

PROFILE_ENV = "CORRGRPO_REWARD_PROFILE"
"""Environment variable naming the reward's ``profile`` (``paper`` when unset); our OpenRLHF launcher
forwards ``CORRGRPO_REWARD_*`` variables to the Ray actors, where the reward runs."""

# The markers a chat template puts around an assistant turn (ChatML, Llama 3). OpenRLHF decodes the
# sequence with special tokens kept; verl and TRL decode without them.
END_OF_TURN: tuple[str, ...] = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>")
CHAT_MARKERS: tuple[str, ...] = (
    "<|im_start|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|begin_of_text|>",
)


def completion_text(query: str, prompt: str) -> str:
    """The completion as the model ended it: what follows ``prompt`` in ``query``, cut at the first
    end-of-turn marker, with any other chat marker removed (what a decode without special tokens gives).

    >>> completion_text("<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nHello<|im_end|>",
    ...                 "<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n")
    'Hello'
    """
    completion = query.removeprefix(prompt)
    for marker in END_OF_TURN:
        completion = completion.split(marker, 1)[0]
    for marker in CHAT_MARKERS:
        completion = completion.replace(marker, "")
    return completion


def reward_profile() -> str:
    """The profile :data:`PROFILE_ENV` names (``paper`` when unset)."""
    return os.environ.get(PROFILE_ENV, "") or "paper"


def make_reward_func(
    score: Callable[..., dict[str, float]], data_source: str, components: Sequence[str]
) -> Callable[..., dict[str, Any]]:
    """An OpenRLHF ``reward_func(queries, prompts, labels, **kw)`` built on a domain ``compute_score``.

    OpenRLHF passes the full text (prompt + completion, special tokens kept) as ``queries``; the
    completion handed to ``score`` is :func:`completion_text` of it, with ``profile=`` from
    :data:`PROFILE_ENV`. Every component lands in ``extra_logs`` (OpenRLHF logs them and our launcher's
    estimator reads them); ``rewards`` and ``scores`` are the component sum.
    """

    def reward_func(
        queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **_: Any
    ) -> dict[str, Any]:
        import torch

        profile = reward_profile()
        rows = [
            score(data_source, completion_text(query, prompt), label, None, profile=profile)
            for query, prompt, label in zip(queries, prompts, labels, strict=True)
        ]
        logs = {c: torch.tensor([r[c] for r in rows], dtype=torch.float32) for c in components}
        total = torch.stack(list(logs.values())).sum(0) if logs else torch.zeros(len(rows))
        return {"rewards": total, "scores": total, "extra_logs": logs}

    return reward_func
