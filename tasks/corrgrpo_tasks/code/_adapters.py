"""Thin framework shapes of the code reward: TRL reward functions, an OpenRLHF reward function."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._decoding import completion_text, reward_profile
from ._reward import COMPONENTS, score_batch

__all__ = ["make_openrlhf_reward_func", "openrlhf_reward_func", "trl_reward_functions"]


def _completion_text(completion: Any) -> str:
    """TRL passes plain strings or conversational lists of messages; take the last assistant text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        message = completion[-1]
        if isinstance(message, Mapping):
            content = message.get("content", "")
            if isinstance(content, list):  # multimodal-style content parts
                return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
            return str(content)
    return str(completion)


def _digest(texts: Sequence[str], truths: Sequence[Any]) -> str:
    digest = hashlib.sha256()
    for text, truth in zip(texts, truths, strict=False):
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
        digest.update(
            (truth if isinstance(truth, str) else json.dumps(truth, sort_keys=True, default=str)).encode(
                "utf-8", "surrogatepass"
            )
            if not isinstance(truth, bytes)
            else truth
        )
        digest.update(b"\1")
    return digest.hexdigest()


class _BatchCache:
    """Scores of the last few batches, so that K reward functions run each program once."""

    def __init__(self, size: int = 4) -> None:
        self._lock = threading.Lock()
        self._size = size
        self._store: OrderedDict[str, list[dict[str, float]]] = OrderedDict()

    def get(self, texts: list[str], truths: list[Any], options: Mapping[str, Any]) -> list[dict[str, float]]:
        key = _digest(texts, truths)
        with self._lock:
            if key in self._store:
                self._store.move_to_end(key)
                return self._store[key]
            scores = score_batch(texts, truths, **options)
            self._store[key] = scores
            if len(self._store) > self._size:
                self._store.popitem(last=False)
            return scores


def trl_reward_functions(
    *, components: Sequence[str] = COMPONENTS, ground_truth_key: str = "ground_truth", **options: Any
) -> list[Callable[..., list[float | None]]]:
    """One TRL reward function per component (``f(prompts, completions, **kwargs) -> list``).

    The functions share a cache keyed by the batch's completions and ground truths, so each program runs
    once per batch however many components are trained on. The ground truth comes from the dataset
    column ``ground_truth_key`` (TRL passes extra columns as keyword arguments); a row whose ground truth
    is ``None`` gets ``None`` (TRL: not applicable). Each function's ``__name__`` is the component name,
    which TRL uses in its logs. ``options`` are ``CodeRewardConfig`` fields.

    Examples
    --------
    >>> funcs = trl_reward_functions()
    >>> [f.__name__ for f in funcs][:2]
    ['format_reward', 'syntax_reward']
    """
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown or not components:
        raise ValueError(f"components must be a non-empty subset of {COMPONENTS}, got {list(components)}")
    cache = _BatchCache()

    def make(component: str) -> Callable[..., list[float | None]]:
        def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            del prompts
            if ground_truth_key not in kwargs:
                raise KeyError(
                    f"the dataset has no {ground_truth_key!r} column for the code reward; "
                    f"got columns {sorted(k for k in kwargs if not k.startswith('trainer'))}"
                )
            truths = list(kwargs[ground_truth_key])
            texts = [_completion_text(c) for c in completions]
            if len(truths) != len(texts):
                raise ValueError(f"{len(texts)} completions but {len(truths)} ground truths")
            rows = [i for i, truth in enumerate(truths) if truth is not None]
            scores = cache.get([texts[i] for i in rows], [truths[i] for i in rows], options) if rows else []
            out: list[float | None] = [None] * len(texts)
            for i, score in zip(rows, scores, strict=False):
                out[i] = score[component]
            return out

        reward.__name__ = reward.__qualname__ = component
        return reward

    return [make(c) for c in components]


def make_openrlhf_reward_func(**options: Any) -> Callable[..., dict[str, Any]]:
    """An OpenRLHF ``reward_func(queries, prompts, labels, **kwargs)`` with fixed ``CodeRewardConfig``
    options; returns ``{"rewards": (B,) float tensor, "scores": same, "extra_logs": {component: (B,)}}``.

    ``queries`` are prompt + response texts, decoded with special tokens kept; the response is what
    follows the prompt, up to the first end-of-turn marker (``<|im_end|>``, ``<|eot_id|>``, ...), other chat
    markers removed. torch is imported only when the function is called.
    """

    def reward_func(
        queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any
    ) -> dict[str, Any]:
        import torch

        del kwargs
        if not len(queries) == len(prompts) == len(labels):
            raise ValueError(
                f"queries, prompts and labels differ in length: {len(queries)}, {len(prompts)}, {len(labels)}"
            )
        responses = [completion_text(q, p) for q, p in zip(queries, prompts, strict=False)]
        scores = score_batch(responses, list(labels), **options)
        total = torch.tensor([s["score"] for s in scores], dtype=torch.float32)
        logs = {name: torch.tensor([s[name] for s in scores], dtype=torch.float32) for name in COMPONENTS}
        return {"rewards": total, "scores": total.clone(), "extra_logs": logs}

    reward_func.__name__ = "reward_func"
    return reward_func


def openrlhf_reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any
) -> dict[str, Any]:
    """OpenRLHF reward function with default options (see ``make_openrlhf_reward_func``) and the profile
    ``$CORRGRPO_REWARD_PROFILE`` names (``paper`` when unset)."""
    profile = reward_profile()
    return make_openrlhf_reward_func(profile=profile)(queries, prompts, labels, **kwargs)
