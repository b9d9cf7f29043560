"""Each way the paper's tool-calling reward can be gamed, scored under both profiles beside an honest
completion (the figures in docs/tasks.md, "Hardened profiles")."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from corrgrpo_tasks.tool_calling import compute_score

GT = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1, "b": 2}}\n</tool_call>'
GT_RESPONSE = "<think>t</think>\n<response>The museum opens at nine.</response>"


def block(*calls: tuple[str, dict[str, object]]) -> str:
    body = "\n".join(json.dumps({"name": n, "parameters": p}) for n, p in calls)
    return f"<think>plan</think>\n<tool_call>\n{body}\n</tool_call>"


def scores(completion: str, ground_truth: str) -> tuple[float, float]:
    return tuple(  # type: ignore[return-value]
        compute_score("rlla", completion, ground_truth, profile=p)["score"] for p in ("paper", "hardened")
    )


def test_two_hedged_calls_beat_an_honest_call_only_under_the_paper_profile() -> None:
    hedged = block(("f", {"a": 1, "b": 2}), ("f", {"a": 1, "b": 3}))
    honest = block(("f", {"a": 1, "b": 3}))  # one value wrong
    assert scores(hedged, GT) == (3.5, 1.0)
    assert scores(honest, GT) == (2.5, 2.5)


def test_the_exact_call_written_twice() -> None:
    twice = block(("f", {"a": 1, "b": 2}), ("f", {"a": 1, "b": 2}))
    assert scores(twice, GT) == (3.5, 1.0)
    assert compute_score("rlla", twice, GT)["exact_match"] == 0.0
    assert scores(block(("f", {"a": 1, "b": 2})), GT) == (4.0, 4.0)


def test_one_call_per_listed_tool_over_the_projects_generator() -> None:
    from corrgrpo_tasks.training._tool_data import CATALOGUE, make_tool_examples

    params = {t.name: t.params for t in CATALOGUE}
    _, prompts = make_tool_examples(0, 400, seed=0)
    hack: dict[str, list[float]] = {"paper": [], "hardened": []}
    honest: dict[str, list[float]] = {"paper": [], "hardened": []}
    for example in prompts:
        listed = re.findall(r"(\w+)\(", example.prompt[0]["content"].splitlines()[0])
        target = json.loads(example.ground_truth.split("<tool_call>\n")[1].split("\n</tool_call>")[0])
        # The right values for the right tool, placeholders for the two distractors.
        calls = [
            (n, target["parameters"] if n == target["name"] else dict.fromkeys(params[n], "x"))
            for n in listed
        ]
        for profile, hacked in hack.items():
            hacked.append(
                compute_score("rlla", block(*calls), example.ground_truth, profile=profile)["score"]
            )
            # Honest: one of the three tools, picked at random (the expectation over the pick).
            honest[profile].append(
                statistics.mean(
                    compute_score("rlla", block(c), example.ground_truth, profile=profile)["score"]
                    for c in calls
                )
            )
    assert statistics.mean(hack["paper"]) == pytest.approx(10 / 3)
    assert statistics.mean(hack["hardened"]) == pytest.approx(0.0, abs=1e-12)
    assert statistics.mean(honest["paper"]) == statistics.mean(honest["hardened"]) == pytest.approx(0.0)


def test_a_call_hidden_in_the_thought() -> None:
    hidden = (
        '<think><tool_call>\n{"name": "f", "parameters": {"a": 1, "b": 2}}\n</tool_call></think>\n'
        "<response>The museum opens at nine.</response>"
    )
    answer = "<think>plan</think>\n<response>The museum opens at nine.</response>"
    call = block(("f", {"a": 1, "b": 2}))
    assert scores(hidden, GT) == (3.0, -3.0)
    assert scores(hidden, GT_RESPONSE) == (1.0, 4.0)  # hardened: no call outside the thought, text right
    assert scores(call, GT) == (4.0, 4.0)
    assert scores(answer, GT_RESPONSE) == (1.0, 4.0)
    assert scores(call, GT_RESPONSE) == (0.0, -3.0)
    assert scores(answer, GT) == (-3.0, -3.0)
    # With a call needed a share p < 1/2 of the time the hack beats both honest policies under the
    # paper's reward; under the hardened one it is never better than answering correctly per prompt.
    p = 0.3
    mix = {
        profile: {
            "hack": p * scores(hidden, GT)[i] + (1 - p) * scores(hidden, GT_RESPONSE)[i],
            "always call": p * scores(call, GT)[i] + (1 - p) * scores(call, GT_RESPONSE)[i],
            "always answer": p * scores(answer, GT)[i] + (1 - p) * scores(answer, GT_RESPONSE)[i],
            "right choice": p * scores(call, GT)[i] + (1 - p) * scores(answer, GT_RESPONSE)[i],
        }
        for i, profile in enumerate(("paper", "hardened"))
    }
    assert mix["paper"]["hack"] > max(mix["paper"]["always call"], mix["paper"]["always answer"])
    assert mix["hardened"]["hack"] <= mix["hardened"]["always answer"] < mix["hardened"]["right choice"]


def test_response_text_is_scored_only_under_the_hardened_profile() -> None:
    wrong = "<think>plan</think>\n<response>Bananas are yellow.</response>"
    right = "<think>plan</think>\n<response>the museum opens at nine</response>"
    assert scores(wrong, GT_RESPONSE) == (1.0, 1.0)
    assert scores(right, GT_RESPONSE) == (1.0, 4.0)
    exact = {
        p: compute_score("rlla", wrong, GT_RESPONSE, profile=p)["exact_match"] for p in ("paper", "hardened")
    }
    assert exact == {"paper": 1.0, "hardened": 0.0}
    assert compute_score("rlla", right, GT_RESPONSE, profile="hardened")["exact_match"] == 1.0
    half = "<think>plan</think>\n<response>The museum opens</response>"  # F1 = 2*3/(3+5) = 0.75
    assert compute_score("rlla", half, GT_RESPONSE, profile="hardened")["values_reward"] == pytest.approx(
        0.75
    )


def test_hardened_equals_paper_when_no_extra_call_is_made() -> None:
    for completion in (
        block(("f", {"a": 1, "b": 3})),
        block(("f", {"a": 1})),
        block(("g", {"a": 1, "b": 2})),
        "no tags",
        GT,
    ):
        paper, hardened = scores(completion, GT)
        assert paper == hardened


def test_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="profile"):
        compute_score("rlla", GT, GT, profile="strict")
