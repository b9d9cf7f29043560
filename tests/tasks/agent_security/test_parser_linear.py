"""The hermes tool-call parsers are linear in the text and agree with the pattern they replace."""

from __future__ import annotations

import re
import time

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
MB = 1 << 20
SHAPES = {
    "open_tags": "<tool_call>" * (MB // 11),
    "close_tags": "</tool_call>" * (MB // 12),
    "pairs": "<tool_call></tool_call>" * (MB // 23),
    "newlines": "\n" * MB,
    "spaces": " \n" * (MB // 2),
    "deep_json": "<tool_call>" + "[" * MB + "</tool_call>",
    "deep_objects": "<tool_call>" + '{"a":' * (MB // 5) + "</tool_call>",
    "unclosed": "<tool_call>" + "x" * MB,
    "valid_calls": '<tool_call>{"name": "f", "arguments": {}}</tool_call>' * (MB // 52),
}


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS, max_size=16).map("".join))
def test_blocks_match_the_reference_pattern(text: str) -> None:
    assert _call_blocks(text) == OLD_BLOCK.findall(text)[:MAX_CALLS]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_parsers_are_linear_on_pathological_shapes(shape: str) -> None:
    text = SHAPES[shape]
    start = time.process_time()
    tool_call_format_is_valid(text)
    tool_call_format_is_valid(text, tool_names=["f"], require_arguments=True)
    well_formed_calls(text)
    strip_tool_calls(text)
    assert time.process_time() - start < 1.5, shape


def test_the_format_check_has_no_call_cap_but_the_lenient_reader_does() -> None:
    # The paper's loop parses every block (and runs max_parallel_calls of them): no cap on validity.
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    assert tool_call_format_is_valid(call * (MAX_CALLS + 1))
    assert len(well_formed_calls(call * (MAX_CALLS + 5))) == MAX_CALLS
