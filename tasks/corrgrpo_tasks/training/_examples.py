"""One example type and one train/held-out split for every synthetic task."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Example", "completion_text", "split_examples"]


@dataclass(frozen=True)
class Example:
    """One prompt (chat messages), the reward's ground truth, the ideal completion and a label
    (the tool, or the code family) for breakdowns."""

    prompt: list[dict[str, str]]
    ground_truth: str
    completion: str
    label: str


def split_examples(
    draw: Callable[[random.Random], Example], n_train: int, n_eval: int, *, name: str, seed: int
) -> tuple[list[Example], list[Example]]:
    """``n_train`` training and ``n_eval`` held-out examples from separate random streams; no held-out
    prompt text occurs in the training set (nor twice among the held-out ones)."""
    train_rng, eval_rng = random.Random(f"{name}-train-{seed}"), random.Random(f"{name}-eval-{seed}")
    train = [draw(train_rng) for _ in range(n_train)]
    seen = {e.prompt[0]["content"] for e in train}
    held: list[Example] = []
    for _ in range(50 * max(n_eval, 1)):
        if len(held) == n_eval:
            break
        example = draw(eval_rng)
        if example.prompt[0]["content"] not in seen:
            seen.add(example.prompt[0]["content"])
            held.append(example)
    if len(held) < n_eval:
        raise ValueError(f"could not draw {n_eval} held-out {name} prompts distinct from the training set")
    return train, held


def completion_text(completion: Any) -> str:
    """The text TRL hands a reward function: a string, or chat messages whose last content is the answer."""
    if isinstance(completion, Sequence) and not isinstance(completion, str):
        last = completion[-1] if completion else {}
        return str(last.get("content", "")) if isinstance(last, dict) else str(last)
    return str(completion)
