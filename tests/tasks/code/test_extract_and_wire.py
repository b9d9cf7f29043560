"""Parsers of model output and of the candidate's replies: same answers as the reference patterns, linear
time on pathological shapes, and total (a defined result, never an exception other than the documented one).

Time bounds here are generous (10x the 50 ms per megabyte the benchmark reports) so that a loaded CI
machine does not flake; a quadratic parser takes seconds to minutes on these inputs.
"""

from __future__ import annotations

import contextlib
import math
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrgrpo_tasks.code import _wire, extract_code
from corrgrpo_tasks.code._extract import _definition, _fenced_blocks
from corrgrpo_tasks.code._lanes import _records

# The patterns the linear code replaces (quadratic on some inputs, but the reference for the answers).
OLD_FENCE = re.compile(r"```[^\S\n]*(?:python3?|py)?[^\S\n]*\n(.*?)```", re.IGNORECASE | re.DOTALL)
TOKENS = st.sampled_from(
    [
        "```",
        "```python",
        "```py",
        "```Python3",
        "```java",
        "`",
        "``",
        "\n",
        " ",
        "\t",
        "x",
        "def Solution",
        "class Solution:",
        "def ",
        "Solution",
        "</think>",
        "py",
        "\r",
        "\u2028",
    ]
)
MB = 1 << 20
SHAPES = {
    "blank_lines": " \n" * (MB // 2),
    "newlines": "\n" * MB + "Solution",
    "open_fences": "```\n" * (MB // 4),
    "unclosed_fence": "```python\n" + "x" * MB,
    "backticks": "`" * MB,
    "fence_then_spaces": "```" + " " * MB,
    "spaced_fences": "``` " * (MB // 4),
    "repeated_headers": "```python" * (MB // 9),
    "think_tags": "<think>" * (MB // 7),
    "nested": "([{" * (MB // 3),
    "definitions": "\n def Solution" * (MB // 14),
    "fenced_names": "```\nSolution" * (MB // 12),
    "defs_no_name": "def " * (MB // 4),
}


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS, max_size=14).map("".join))
def test_fences_match_the_reference_pattern(text: str) -> None:
    assert _fenced_blocks(text) == OLD_FENCE.findall(text)
    blocks = OLD_FENCE.findall(text)
    if blocks:
        defines = [
            re.search(r"^[ \t\f\v\r]*(?:class|def)[ \t]+Solution(?!\w)", b, re.MULTILINE) is not None
            for b in blocks
        ]
        expected = max(zip(blocks, defines, strict=True), key=lambda pair: (pair[1], len(pair[0])))[0]
        assert extract_code(text) == (expected, True)


@settings(max_examples=200, deadline=None)
@given(st.lists(TOKENS, max_size=14).map("".join))
def test_definition_is_a_line_start_keyword_then_the_name(text: str) -> None:
    pattern = re.compile(r"^[ \t\f\v\r]*(?:class|def)[ \t]+Solution(?!\w)", re.MULTILINE)
    match = pattern.search(text)
    assert _definition(text, "Solution") == (-1 if match is None else match.start())


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_extraction_is_linear_on_pathological_shapes(shape: str) -> None:
    text = SHAPES[shape]
    start = time.process_time()
    extract_code(text)
    extract_code(text, entry_name="Solution")
    extract_code(text, entry_name=None)
    assert time.process_time() - start < 1.5, shape


def test_records_survive_anything() -> None:
    hostile = b"\n".join(
        [
            b"[" * 100_000,
            b"{" * 100_000,
            b'{"stage": "run", "status": "passed"' * 1000,
            b"\xff\xfe",
            b'{"stage": 1}',
            b"null",
            b'"x"',
            b"1e999999",
            b"9" * 10_000,
        ]
    )
    assert _records(hostile) == {}
    assert _records(b'{"stage": "run", "status": "passed"}\n{"stage": "run", "status": "x"}') == {
        "run": {"stage": "run", "status": "passed"}
    }


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.integers(), children, max_size=3)
        | st.frozensets(st.integers() | st.text(max_size=3), max_size=3)
        | st.sets(st.integers() | st.text(max_size=3), max_size=3)
    ),
    max_leaves=20,
)


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)  # type: ignore[attr-defined, index]
    return a == b


@settings(max_examples=300, deadline=None)
@given(plain)
def test_wire_round_trip_builds_builtin_values(value: object) -> None:
    assert same(_wire.decode(_wire.encode(value)), value)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["n", "T", "i", "I", "f", "s", "b", "l", "t", "S", "Z", "d", "o", "r", "x"])
        | st.integers(min_value=-3, max_value=5)
        | st.floats()
        | st.text(max_size=3),
        max_size=20,
    )
)
def test_wire_decoder_raises_only_wire_error(tokens: list[object]) -> None:
    import json

    try:
        data = json.dumps(tokens).encode()
    except ValueError:
        return
    with contextlib.suppress(_wire.WireError):
        _wire.decode(data)


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * 200_000,
        b'["l", 1, ' * 50_000 + b'"n"]',
        b"\x00" * 100,
        b'["I", "' + b"f" * 100_000 + b'"]',
        b'["d", 1, "l", 0, "n"]',
        b'["S", 1, "l", 0]',
        b'["o", "ListNode", 0]',
        b'["i", 1e999]',
        b'["l", 99999999]',
        b'["s", "x", "n"]',
        b'["r", 0]',
        b"[1, [2]]",
        b"1",
    ],
)
def test_wire_decoder_refuses_hostile_payloads(payload: bytes) -> None:
    with pytest.raises(_wire.WireError):
        _wire.decode(payload)


def test_wire_refuses_objects_and_converts_subclasses_by_value() -> None:
    from collections import Counter, OrderedDict

    class Eq(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    decoded = _wire.decode(_wire.encode([Eq("x"), Counter("aa"), OrderedDict(b=1)]))
    assert decoded == ["x", {"a": 2}, {"b": 1}]
    assert [type(v) for v in decoded] == [str, dict, dict]
    assert decoded[0] != "y"
    with pytest.raises(_wire.NotPlain):
        _wire.encode(object())
    with pytest.raises(_wire.NotPlain):
        _wire.encode([iter([])])
