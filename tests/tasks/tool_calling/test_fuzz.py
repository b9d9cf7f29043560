"""Property tests: the reward never raises on any model output and stays within its documented ranges."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from corrgrpo_tasks.tool_calling import RANGES, compute_score

GT_CALLS = (
    '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1, "b": "x"}}\n'
    '{"name": "g", "parameters": {}}\n</tool_call>'
)
GT_RESPONSE = "<think>t</think>\n<response>hello</response>"
GT_BOTH = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>\n<response>r</response>'
TARGETS = st.sampled_from([GT_CALLS, GT_RESPONSE, GT_BOTH])

TOKENS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<response>",
        "</response>",
        "\n",
        " ",
        "{",
        "}",
        "[",
        "]",
        '"name"',
        '"parameters"',
        ":",
        ",",
        '"f"',
        '"g"',
        '"a"',
        "1",
        "null",
        "true",
        "NaN",
        "1e999",
        "<|im_start|>assistant",
        "<|im_end|>",
        "\\u0000",
        '"',
    ]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)
calls = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["f", "g", "h"]),
            "parameters": st.dictionaries(st.sampled_from(["a", "b", "c"]), json_values, max_size=3),
        }
    ),
    max_size=3,
)


def check_ranges(result: dict[str, float]) -> None:
    for key, (low, high) in RANGES.items():
        assert low <= result[key] <= high, (key, result[key])
    assert result["format_reward"] in (0.0, 1.0)
    assert result["exact_match"] in (0.0, 1.0)


PROFILES = st.sampled_from(["paper", "hardened"])


@given(text=st.text(max_size=300), gt=TARGETS, profile=PROFILES)
def test_arbitrary_text_never_raises(text: str, gt: str, profile: str) -> None:
    check_ranges(compute_score("rlla", text, gt, profile=profile))


@given(parts=st.lists(TOKENS | st.text(max_size=8), max_size=40), gt=TARGETS)
def test_tag_soup_never_raises(parts: list[str], gt: str) -> None:
    paper = compute_score("rlla", "".join(parts), gt)
    hardened = compute_score("rlla", "".join(parts), gt, profile="hardened")
    check_ranges(paper)
    check_ranges(hardened)
    assert hardened["format_reward"] == paper["format_reward"]  # the profiles differ in tool components only


@given(
    called=calls,
    think=st.text(max_size=20),
    gt=TARGETS,
    junk=st.sampled_from(["", "x", "\n{", "</tool_call>"]),
    profile=PROFILES,
)
def test_structured_calls_stay_in_range(
    called: list[dict[str, object]], think: str, gt: str, junk: str, profile: str
) -> None:
    body = "\n".join(json.dumps(c) for c in called)
    text = f"<think>{think}</think>\n<tool_call>\n{body}{junk}\n</tool_call>"
    check_ranges(compute_score("rlla", text, gt, profile=profile))


@given(called=calls)
def test_full_tool_marks_only_for_the_ground_truth_calls(called: list[dict[str, object]]) -> None:
    gt_calls = [{"name": "f", "parameters": {"a": 1, "b": "x"}}, {"name": "g", "parameters": {}}]
    body = "\n".join(json.dumps(c) for c in called)
    r = compute_score("rlla", f"<think>t</think>\n<tool_call>\n{body}\n</tool_call>", GT_CALLS)
    # Every ground-truth call found once (in any order) and nothing else called: full marks.
    permutation = len(called) == len(gt_calls) and all(called.count(c) == gt_calls.count(c) for c in gt_calls)
    assert (r["accuracy_reward"] == 3.0) == permutation
