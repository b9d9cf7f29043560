"""The RLLA tool-call parser and format check stay linear on pathological model output."""

from __future__ import annotations

import time

import pytest

from corrgrpo_tasks.tool_calling import compute_score
from corrgrpo_tasks.tool_calling._reward import parse_tool_calls

GT = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>\n<response>r</response>'
MB = 1 << 20
SHAPES = {
    "open_tags": "<tool_call>" * (MB // 11),
    "close_tags": "</tool_call>" * (MB // 12),
    "think_tags": "<think>" * (MB // 7),
    "think_closes": "</think>" * (MB // 8),
    "newlines": "\n" * MB,
    "spaces": " \n" * (MB // 2),
    "deep_json": "<tool_call>\n" + "[" * MB + "\n</tool_call>",
    "repeated_layout": "<think></think>\n<tool_call>\n" * (MB // 27),
    "trailing_space": "<think>x</think>\n<tool_call>\n{}\n</tool_call>\n<response>r</response>"
    + " " * MB
    + "x",
    "response_tags": "<response>" * (MB // 10),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_reward_is_linear_on_pathological_shapes(shape: str) -> None:
    text = SHAPES[shape]
    start = time.process_time()
    parse_tool_calls(text)
    result = compute_score("rlla", text, GT)
    assert time.process_time() - start < 1.5, shape
    assert result["format_reward"] in (0.0, 1.0)
