"""The RLLA tool-call parser and format check stay linear on pathological model output."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from corrgrpo_tasks.tool_calling import compute_score
from corrgrpo_tasks.tool_calling._reward import parse_tool_calls

GT = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>\n<response>r</response>'
# Each shape as a function of its size in characters (see the assert_linear fixture).
SHAPES: dict[str, Callable[[int], str]] = {
    "open_tags": lambda n: "<tool_call>" * (n // 11),
    "close_tags": lambda n: "</tool_call>" * (n // 12),
    "think_tags": lambda n: "<think>" * (n // 7),
    "think_closes": lambda n: "</think>" * (n // 8),
    "newlines": lambda n: "\n" * n,
    "spaces": lambda n: " \n" * (n // 2),
    "deep_json": lambda n: "<tool_call>\n" + "[" * n + "\n</tool_call>",
    "repeated_layout": lambda n: "<think></think>\n<tool_call>\n" * (n // 27),
    "trailing_space": lambda n: (
        "<think>x</think>\n<tool_call>\n{}\n</tool_call>\n<response>r</response>" + " " * n + "x"
    ),
    "response_tags": lambda n: "<response>" * (n // 10),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_reward_is_linear_on_pathological_shapes(shape: str, assert_linear: Callable[..., None]) -> None:
    def work(text: str) -> None:
        parse_tool_calls(text)
        assert compute_score("rlla", text, GT)["format_reward"] in (0.0, 1.0)

    assert_linear(work, SHAPES[shape], shape)
