"""The hermes tool-call parsers are linear in the text and agree with the pattern they replace."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrgrpo_tasks.agent_security._reward import (
    MAX_CALLS,
    _call_blocks,
    strip_tool_calls,
    tool_call_format_is_valid,
    well_formed_calls,
)

OLD_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
TOKENS = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<tool_call",
        "tool_call>",
        "\n",
        " ",
        "{",
        "}",
        '{"name": "f", "arguments": {}}',
        '"name"',
        ":",
        "x",
    ]
)
# Each shape as a function of its size in characters (see the assert_linear fixture).
SHAPES: dict[str, Callable[[int], str]] = {
    "open_tags": lambda n: "<tool_call>" * (n // 11),
    "close_tags": lambda n: "</tool_call>" * (n // 12),
    "pairs": lambda n: "<tool_call></tool_call>" * (n // 23),
    "newlines": lambda n: "\n" * n,
    "spaces": lambda n: " \n" * (n // 2),
    "deep_json": lambda n: "<tool_call>" + "[" * n + "</tool_call>",
    "deep_objects": lambda n: "<tool_call>" + '{"a":' * (n // 5) + "</tool_call>",
    "unclosed": lambda n: "<tool_call>" + "x" * n,
    "valid_calls": lambda n: '<tool_call>{"name": "f", "arguments": {}}</tool_call>' * (n // 52),
}


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS, max_size=16).map("".join))
def test_blocks_match_the_reference_pattern(text: str) -> None:
    assert _call_blocks(text) == OLD_BLOCK.findall(text)[:MAX_CALLS]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_parsers_are_linear_on_pathological_shapes(shape: str, assert_linear: Callable[..., None]) -> None:
    def work(text: str) -> None:
        tool_call_format_is_valid(text)
        tool_call_format_is_valid(text, tool_names=["f"], require_arguments=True)
        well_formed_calls(text)
        strip_tool_calls(text)

    assert_linear(work, SHAPES[shape], shape)


def test_the_format_check_has_no_call_cap_but_the_lenient_reader_does() -> None:
    # The paper's loop parses every block (and runs max_parallel_calls of them): no cap on validity.
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    assert tool_call_format_is_valid(call * (MAX_CALLS + 1))
    assert len(well_formed_calls(call * (MAX_CALLS + 5))) == MAX_CALLS
