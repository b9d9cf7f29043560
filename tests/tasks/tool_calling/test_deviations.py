"""One test per tool-calling row of the deviation table in docs/tasks.md ("Fidelity to the reference"):
the reference's value, worked out from its documented rule, beside ours."""

from __future__ import annotations

import pytest

from corrgrpo_tasks.tool_calling import compute_score

GT = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>'


def test_missing_extra_info() -> None:
    reference = "AttributeError"  # it calls extra_info.get(...) on None
    assert reference == "AttributeError"
    assert compute_score("rlla", GT, GT, None)["score"] == 4.0  # ours: no experiment or model name


def test_a_chat_message_list_as_the_solution() -> None:
    reference = "AttributeError"  # it calls solution_str.split(...)
    assert reference == "AttributeError"
    assert compute_score("rlla", [{"role": "assistant", "content": GT}], GT, {})["score"] == 4.0


def test_a_malformed_ground_truth() -> None:
    bad = '<think>t</think>\n<tool_call>\n{"name": "f"}\n</tool_call>'
    # The reference compares the call lists before reading any key: an identical prediction scores the
    # maxima (score 4), any other raises KeyError on the missing "parameters".
    reference = {"identical prediction": 4.0, "other prediction": "KeyError"}
    assert reference["identical prediction"] == 1.0 + 0.5 + 1.0 + 1.5
    for prediction in (bad, GT):
        with pytest.raises(ValueError, match="ground truth"):  # ours: always a data error naming the row
            compute_score("rlla", prediction, bad, {})


def test_exact_match_is_an_extra_key() -> None:
    reference_keys = {
        "score",
        "format_reward",
        "accuracy_reward",
        "function_name_reward",
        "parameter_reward",
        "values_reward",
    }
    ours = compute_score("rlla", GT, GT, {})
    assert set(ours) - reference_keys == {"exact_match"}
    assert {k: ours[k] for k in reference_keys} == {
        "score": 4.0,
        "format_reward": 1.0,
        "accuracy_reward": 3.0,
        "function_name_reward": 0.5,
        "parameter_reward": 1.0,
        "values_reward": 1.5,
    }
