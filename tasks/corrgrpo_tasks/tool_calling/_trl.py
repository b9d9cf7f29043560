"""The tool-calling reward as TRL reward functions: one callable per component."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrgrpo_tasks.tool_calling._reward import COMPONENTS, PROFILES, _as_text, compute_score


@functools.lru_cache(maxsize=4096)
def _cached_score(
    completion: str, ground_truth: str, allow_missing_think_open: bool, profile: str, dialogue: str
) -> dict[str, float]:
    # The K component functions score the same completions one after another; scoring once is enough.
    return compute_score(
        "rlla",
        completion,
        ground_truth,
        allow_missing_think_open=allow_missing_think_open,
        profile=profile,
        dialogue=dialogue,
    )


def _dialogue(prompt: Any) -> str:
    """The dialogue of one TRL prompt: the last user message of a conversation, or the text itself."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        return users[-1] if users and isinstance(users[-1], str) else ""
    return ""


def trl_reward_functions(
    *,
    components: Sequence[str] = COMPONENTS,
    ground_truth_key: str = "ground_truth",
    allow_missing_think_open: bool = False,
    profile: str = "paper",
    tokenizer: Any = None,
) -> list[Callable[..., list[float]]]:
    """One TRL reward function per component, named after it (TRL logs ``rewards/<name>/mean``).

    Each function takes ``completions`` (text, or chat messages whose last content is scored) and the
    dataset column ``ground_truth_key`` that TRL forwards as a keyword argument. With a ``tokenizer``
    the completion scored is TRL's ``completion_ids`` decoded without special tokens (verl's decoding),
    so a chat parser that moved tool calls out of the message text loses nothing. ``profile`` is
    :func:`compute_score`'s (``"paper"`` or ``"hardened"``); the hardened one reads the dialogue from
    TRL's ``prompts`` (the last user message).

    >>> fns = trl_reward_functions()
    >>> [f.__name__ for f in fns]
    ['function_name_reward', 'parameter_reward', 'values_reward', 'format_reward']
    """
    unknown = [c for c in components if c not in (*COMPONENTS, "accuracy_reward", "score", "exact_match")]
    if unknown:
        raise ValueError(f"unknown tool-calling components {unknown}; known: {list(COMPONENTS)}")
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")

    def make(component: str) -> Callable[..., list[float]]:
        def reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
            if ground_truth_key not in kwargs:
                raise KeyError(f"the dataset has no {ground_truth_key!r} column for the tool-calling reward")
            truths = kwargs[ground_truth_key]
            ids = kwargs.get("completion_ids")
            if tokenizer is not None and ids is not None:
                texts = [
                    str(t) for t in tokenizer.batch_decode([list(i) for i in ids], skip_special_tokens=True)
                ]
            else:
                texts = [_as_text(c) for c in completions]
            prompts = kwargs.get("prompts") or [""] * len(texts)
            return [
                _cached_score(text, str(t), allow_missing_think_open, profile, _dialogue(p))[component]
                for text, t, p in zip(texts, truths, prompts, strict=True)
            ]

        reward.__name__ = reward.__qualname__ = component
        return reward

    return [make(c) for c in components]
