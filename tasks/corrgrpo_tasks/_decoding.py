"""A completion as the model ended it, whatever the framework's decoding, and the reward profile that
OpenRLHF's reward functions read from the environment. Shared by every domain's OpenRLHF reward."""

from __future__ import annotations

import os

__all__ = ["CHAT_MARKERS", "END_OF_TURN", "PROFILE_ENV", "completion_text", "reward_profile"]

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
