"""The paper profile reproduces the authors' reward on the inputs where a stricter or more lenient
parser would differ (docs/tasks.md, "Fidelity to the reference").

Each expected value is the reference's, worked out by hand from its documented rule (corrgrpo-reference
notes, section 3.1): the text is cut at ``<|im_end|>``; the prediction's block is what follows the first
``<tool_call>``, cut at the next ``<tool_call>`` and then at the first ``</tool_call>``, read only when
both tags occur somewhere; every line of the stripped block goes through ``json.loads``; any exception
while scoring the calls gives the minima.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from corrgrpo_tasks.tool_calling import compute_score

CALL_F = json.dumps({"name": "f", "parameters": {"a": 1}})
CALL_G = json.dumps({"name": "g", "parameters": {"b": "x"}})
GT_F = f"<think>t</think>\n<tool_call>\n{CALL_F}\n</tool_call>"
GT_FG = f"<think>t</think>\n<tool_call>\n{CALL_F}\n{CALL_G}\n</tool_call>"
TOOLS = ("function_name_reward", "parameter_reward", "values_reward")
MIN = (-0.5, -1.0, -1.5)
MAX = (0.5, 1.0, 1.5)

# (case, completion, ground truth, extra_info, reference's (fn, pn, pv), reference's format)
CASES: list[tuple[str, str, str, dict[str, Any] | None, tuple[float, float, float], float]] = [
    (
        "end-of-turn marker without a header: the text is cut there",
        GT_F + "<|im_end|>\n<|im_start|>user\nmore",
        GT_F,
        None,
        MAX,
        1.0,
    ),
    (
        "Llama markers when the experiment name does not say llama: kept, so the layout fails",
        "<|start_header_id|>assistant<|end_header_id|>\n\n" + GT_F + "<|eot_id|>",
        GT_F,
        {"experiment_name": "qwen-rlla"},
        MAX,
        0.0,
    ),
    (
        "Llama markers with a llama experiment: cut",
        "<|start_header_id|>assistant<|end_header_id|>\n\n" + GT_F + "<|eot_id|>",
        GT_F,
        {"experiment_name": "llama3-rlla"},
        MAX,
        1.0,
    ),
    (
        "a stray closing tag before an unclosed block: the block runs to the end",
        f"<think>t</think>\n</tool_call>\n<tool_call>\n{CALL_F}",
        GT_F,
        None,
        MAX,
        0.0,
    ),
    (
        "a blank line between call lines: json.loads('') fails",
        f"<think>t</think>\n<tool_call>\n{CALL_F}\n\n{CALL_G}\n</tool_call>",
        GT_FG,
        None,
        MIN,
        1.0,
    ),
    (
        "a whitespace-only line between call lines fails the same way",
        f"<think>t</think>\n<tool_call>\n{CALL_F}\n  \n{CALL_G}\n</tool_call>",
        GT_FG,
        None,
        MIN,
        1.0,
    ),
    (
        "a repeated opening tag: the block ends at the second opening tag",
        f"<think>t</think>\n<tool_call>\n{CALL_F}\n<tool_call>\n{CALL_G}\n</tool_call>",
        GT_F,
        None,
        MAX,
        0.0,
    ),
    (
        "a non-string name on an extra line is just another name (Jaccard 1/2)",
        f'<think>t</think>\n<tool_call>\n{CALL_F}\n{{"name": 7, "parameters": {{}}}}\n</tool_call>',
        GT_F,
        None,
        (0.0, 1.0, 1.5),
        1.0,
    ),
    (
        "an extra call of another name needs no parameters (it is never compared)",
        f'<think>t</think>\n<tool_call>\n{CALL_F}\n{{"name": "g"}}\n</tool_call>',
        GT_F,
        None,
        (0.0, 1.0, 1.5),  # names {f} vs {f, g}: Jaccard 1/2
        1.0,
    ),
    (
        "an extra line without a name raises (KeyError): the minima",
        f'<think>t</think>\n<tool_call>\n{CALL_F}\n{{"parameters": {{}}}}\n</tool_call>',
        GT_F,
        None,
        MIN,
        1.0,
    ),
    (
        "an unhashable name raises in the name Jaccard (TypeError): the minima",
        f'<think>t</think>\n<tool_call>\n{CALL_F}\n{{"name": ["f"], "parameters": {{}}}}\n</tool_call>',
        GT_F,
        None,
        MIN,
        1.0,
    ),
    (
        "a same-named call with list parameters raises (no .keys()): the minima",
        '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": [1]}\n</tool_call>',
        GT_F,
        None,
        MIN,
        1.0,
    ),
    (
        "true equals 1 under Python's ==",
        '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": true}}\n</tool_call>',
        GT_F,
        None,
        MAX,
        1.0,
    ),
    (
        "the model name, when given, decides the missing-<think> allowance, not the experiment name",
        GT_F.removeprefix("<think>"),
        GT_F,
        {"model_name": "Qwen2.5-7B", "experiment_name": "think-run"},
        MAX,
        0.0,
    ),
    (
        "without a model name the experiment name decides it",
        GT_F.removeprefix("<think>"),
        GT_F,
        {"experiment_name": "qwen3-think-run"},
        MAX,
        1.0,
    ),
]


@pytest.mark.parametrize(
    ("completion", "ground_truth", "extra_info", "tools", "fmt"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_paper_profile_equals_the_reference(
    completion: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None,
    tools: tuple[float, float, float],
    fmt: float,
) -> None:
    result = compute_score("rlla", completion, ground_truth, extra_info)
    assert tuple(result[k] for k in TOOLS) == pytest.approx(tools)
    assert result["format_reward"] == fmt
    assert result["score"] == pytest.approx(fmt + sum(tools))


def test_end_of_turn_marker_case_scores_four_not_three() -> None:
    # The example: the project used to keep the marker (format 0, score 3); the reference cuts.
    assert compute_score("rlla", GT_F + "<|im_end|>", GT_F)["score"] == 4.0
