"""Concurrent episodes with batched model calls: order, batch sizes, and failures reach the caller."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from corrgrpo_tasks._batching import map_batched


def test_multi_turn_episodes_are_answered_in_rounds() -> None:
    sizes: list[int] = []

    def generate(conversations: Sequence[Any], tools: Sequence[Any]) -> list[str]:
        sizes.append(len(conversations))
        return [f"{m[-1]['content']}!" for m in conversations]

    def episode(n: int, chat: Any) -> list[str]:
        return [chat([{"role": "user", "content": f"{n}.{turn}"}], None) for turn in range(n)]

    out = map_batched(episode, [1, 2, 3, 3], generate, concurrency=4)
    assert out == [["1.0!"], ["2.0!", "2.1!"], ["3.0!", "3.1!", "3.2!"], ["3.0!", "3.1!", "3.2!"]]
    assert sizes == [4, 3, 2]  # each round answers every episode still running
    sizes.clear()
    assert map_batched(episode, [2, 2], generate, concurrency=2, max_batch=1) == [["2.0!", "2.1!"]] * 2
    assert sizes == [1, 1, 1, 1]


def test_failures_reach_the_caller() -> None:
    def boom(conversations: Sequence[Any], tools: Sequence[Any]) -> list[str]:
        raise MemoryError("out of memory")

    with pytest.raises(RuntimeError, match="generation failed") as info:
        map_batched(lambda x, chat: chat([], None), [1, 2, 3], boom, concurrency=3)
    assert isinstance(info.value.__cause__, MemoryError)

    def bad_episode(x: int, chat: Any) -> int:
        if x == 2:
            raise KeyError("episode bug")
        return x

    with pytest.raises(KeyError, match="episode bug"):
        map_batched(bad_episode, [1, 2, 3], lambda c, t: ["ok"] * len(c), concurrency=2)
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        map_batched(bad_episode, [1], lambda c, t: [], concurrency=0)
