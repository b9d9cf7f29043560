"""A task built to test the paper's mechanism (its Figure 2): rewards on very different scales, where the
small-scale, correlated components carry most of what can be learnt.

The policy reverses a short string of letters (``"cabd"`` -> ``"dbac"``). Three components:

* ``match_reward = 0.1 + 0.8 m``, m the share of positions right (over the longer of answer and target);
* ``prefix_reward = 0.1 + 0.8 p``, p the right prefix's share of the target: strongly correlated with
  ``match_reward`` and on the same small scale [0.1, 0.9];
* ``judge_reward = 8 (0.9 u + 0.1 m)`` on [0, 8]: a noisy judge, u a uniform number drawn from a hash of
  (prompt, answer) that no policy can predict, plus a small share of the same signal. It is weakly
  correlated with the other two and its variance is most of the total's, as r3's is in Figure 2
  (var 14.2 of a covariance sum 15.6 there).

So GRPO's group std is mostly the judge's noise, and so is its advantage's ordering within a group; the
learnable signal is mostly in the two small components. Success is the exact reversal. Everything is a
pure function of (prompt, answer): the same completion gets the same reward in every run.

``scales_mirror`` (:func:`score_mirror`) turns the roles round, the case where CorrGRPO's formula predicts
a gain over GRPO: the large component is the informative one, ``judge_reward = 8 (0.9 m + 0.1 u)``, and
the two small ones are mostly noise, ``style_reward = 0.1 + 0.8 (0.9 u' + 0.1 m)`` and a correlated copy
``fluency_reward = 0.1 + 0.8 (0.9 (0.7 u' + 0.3 u'') + 0.1 m)``. In a group whose answers are equally
right only noise varies: GRPO still gives it unit-variance advantages, CorrGRPO's c_q (the total's std
over the root of the correlation sum, about 2.2 there) makes it small.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Any

from ._examples import Example, completion_text, split_examples

__all__ = [
    "COMPONENTS",
    "MIRROR_COMPONENTS",
    "MIRROR_RANGES",
    "RANGES",
    "make_scales_examples",
    "scales_reward_functions",
    "score_mirror",
    "score_reversal",
]

COMPONENTS: tuple[str, ...] = ("match_reward", "prefix_reward", "judge_reward")
RANGES: dict[str, tuple[float, float]] = {
    "match_reward": (0.1, 0.9),
    "prefix_reward": (0.1, 0.9),
    "judge_reward": (0.0, 8.0),
    "exact_match": (0.0, 1.0),
}
_LETTERS = "abcdefgh"
_LENGTHS = (4, 5, 6, 7)
_SALT = b"corrgrpo-scales-judge-v1"
MIRROR_COMPONENTS: tuple[str, ...] = ("style_reward", "fluency_reward", "judge_reward")
MIRROR_RANGES: dict[str, tuple[float, float]] = {
    "style_reward": (0.1, 0.9),
    "fluency_reward": (0.1, 0.9),
    "judge_reward": (0.0, 8.0),
    "exact_match": (0.0, 1.0),
}


def _one(rng: random.Random) -> Example:
    word = "".join(rng.choice(_LETTERS) for _ in range(rng.choice(_LENGTHS)))
    target = word[::-1]
    return Example([{"role": "user", "content": word}], target, target, str(len(word)))


def make_scales_examples(n_train: int, n_eval: int, *, seed: int = 0) -> tuple[list[Example], list[Example]]:
    """``n_train`` training and ``n_eval`` held-out words (no held-out word is in the training set).

    >>> train, held = make_scales_examples(3, 2)
    >>> train[0].completion == train[0].prompt[0]["content"][::-1]
    True
    """
    return split_examples(_one, n_train, n_eval, name="scales", seed=seed)


def _noise(prompt: str, answer: str, salt: bytes = _SALT) -> float:
    digest = hashlib.sha256(salt + prompt.encode() + b"\0" + answer.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _share_right(answer: str, target: str) -> float:
    """The share of positions right, over the longer of answer and target."""
    return sum(a == b for a, b in zip(answer, target, strict=False)) / max(len(answer), len(target), 1)


def score_reversal(answer: str, target: str) -> dict[str, float]:
    """Every component, ``exact_match`` and ``score`` (their sum) of ``answer`` for ``target``.

    >>> s = score_reversal("dbac", "dbac")
    >>> s["match_reward"], s["prefix_reward"], s["exact_match"]
    (0.9, 0.9, 1.0)
    """
    answer = answer.strip()
    right = _share_right(answer, target)
    prefix = 0
    while prefix < min(len(answer), len(target)) and answer[prefix] == target[prefix]:
        prefix += 1
    # The prompt is the reversed target, so (target, answer) identifies (prompt, answer).
    row = {
        "match_reward": 0.1 + 0.8 * right,
        "prefix_reward": 0.1 + 0.8 * prefix / len(target),
        "judge_reward": 8.0 * (0.9 * _noise(target, answer) + 0.1 * right),
        "exact_match": float(answer == target),
    }
    row["score"] = row["match_reward"] + row["prefix_reward"] + row["judge_reward"]
    return row


def score_mirror(answer: str, target: str) -> dict[str, float]:
    """``scales_mirror``: every component, ``exact_match`` and ``score`` of ``answer`` for ``target``; the
    large judge carries the signal, the two small components are mostly noise (see the module docstring).

    >>> s = score_mirror("dbac", "dbac")
    >>> round(s["judge_reward"] - 8 * 0.9, 3) == round(0.8 * _noise("dbac", "dbac", b"mirror-judge"), 3)
    True
    """
    answer = answer.strip()
    right = _share_right(answer, target)
    u1, u2, u3 = (
        _noise(target, answer, salt) for salt in (b"mirror-style", b"mirror-fluency", b"mirror-judge")
    )
    row = {
        "style_reward": 0.1 + 0.8 * (0.9 * u1 + 0.1 * right),
        "fluency_reward": 0.1 + 0.8 * (0.9 * (0.7 * u1 + 0.3 * u2) + 0.1 * right),
        "judge_reward": 8.0 * (0.9 * right + 0.1 * u3),
        "exact_match": float(answer == target),
    }
    row["score"] = row["style_reward"] + row["fluency_reward"] + row["judge_reward"]
    return row


def scales_reward_functions(*, mirror: bool = False) -> list[Callable[..., list[float]]]:
    """One TRL reward function per component (named after it), reading the ``ground_truth`` column;
    ``mirror``: the ``scales_mirror`` components."""
    score = score_mirror if mirror else score_reversal

    def make(component: str) -> Callable[..., list[float]]:
        def reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
            truths = kwargs["ground_truth"]
            return [
                score(completion_text(c), str(t))[component] for c, t in zip(completions, truths, strict=True)
            ]

        reward.__name__ = reward.__qualname__ = component
        return reward

    return [make(c) for c in (MIRROR_COMPONENTS if mirror else COMPONENTS)]
