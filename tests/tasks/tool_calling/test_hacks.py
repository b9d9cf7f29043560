"""Each way the paper's tool-calling reward can be gamed, scored under both profiles beside an honest
completion (the figures in docs/tasks.md, "Hardened profiles")."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from corrgrpo_tasks.tool_calling import compute_score

GT = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1, "b": 2}}\n</tool_call>'
GT_RESPONSE = "<think>t</think>\n<response>The museum opens at 09:30.</response>"


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
        "<response>The museum opens at 09:30.</response>"
    )
    answer = "<think>plan</think>\n<response>The museum opens at 09:30.</response>"
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


def test_response_text_is_judged_on_its_facts_only_under_the_hardened_profile() -> None:
    wrong = "<think>plan</think>\n<response>Bananas are yellow.</response>"
    right = "<think>plan</think>\n<response>the museum opens at 09:30</response>"
    assert scores(wrong, GT_RESPONSE) == (1.0, 1.0)
    assert scores(right, GT_RESPONSE) == (1.0, 4.0)
    exact = {
        p: compute_score("rlla", wrong, GT_RESPONSE, profile=p)["exact_match"] for p in ("paper", "hardened")
    }
    assert exact == {"paper": 1.0, "hardened": 0.0}
    assert compute_score("rlla", right, GT_RESPONSE, profile="hardened")["exact_match"] == 1.0
    # The target's own words with another time earn nothing; so does a hedge between the two.
    for reply in ("The museum opens at 09:45.", "The museum opens at 09:30 or 09:45."):
        assert scores(f"<think>plan</think>\n<response>{reply}</response>", GT_RESPONSE) == (1.0, 1.0)


PARIS = "User: What time is it in Paris?"
PARIS_GT = "<think>The tool answered.</think>\n<response>It is 14:05 in Paris.</response>"


def paris(reply: str, *, dialogue: str = PARIS) -> tuple[float, float]:
    completion = f"<think>plan</think>\n<response>{reply}</response>"
    return tuple(  # type: ignore[return-value]
        compute_score("rlla", completion, PARIS_GT, {"dialogue": dialogue}, profile=p)["score"]
        for p in ("paper", "hardened")
    )


def test_the_second_adversarys_response_hacks_on_the_fixture_dialogue() -> None:
    # Issue 35: echo 2.53 and a wrong time in the target's words 3.63 against 1.81 for the right time
    # in other words, under the F1 rule this replaced.
    own_words = paris("Right now the clock there shows 14:05.")
    assert own_words == (1.0, 4.0)
    assert paris("What time is it in Paris?") == (1.0, 1.0)  # the user's message echoed
    assert paris("It is 15:05 in Paris.") == (1.0, 1.0)  # a wrong fact in the target's words
    assert paris("It is 13:05, 14:05 or 15:05 in Paris.") == (1.0, 1.0)  # hedged
    assert paris("14:05 " + "and so on " * 40) == (1.0, 1.0)  # padded past four times the target's length
    # The whole dialogue pasted, tool output included, carries other numbers: nothing.
    assert paris(PARIS + ' {"time": "14:05", "utc_offset": 1}') == (1.0, 1.0)


def test_a_target_without_a_checkable_fact_keeps_the_papers_constant() -> None:
    gt = "<think>done</think>\n<response>You're welcome, have a nice day!</response>"
    for reply in ("You're welcome, have a nice day!", "Goodbye.", "Thanks, that's all!"):
        completion = f"<think>plan</think>\n<response>{reply}</response>"
        assert scores(completion, gt) == (1.0, 1.0)
    # Facts the dialogue already holds are not checkable either.
    assert paris("It is in Paris.", dialogue=PARIS + " I read 14:05 on my phone.") == (1.0, 1.0)


def _controls(example: object) -> dict[str, str]:
    output, paraphrase, wrong = example.output, example.paraphrase, example.wrong_fact  # type: ignore[attr-defined]
    head = output.split("<response>")[0]
    user = example.input.split("\n")[0].removeprefix("User: ")  # type: ignore[attr-defined]
    wrong_text = wrong.split("<response>")[1].split("</response>")[0]
    return {
        "right, other words": paraphrase,
        "user's message echoed": f"{head}<response>{user}</response>",
        "wrong fact, target's words": wrong,
        "hedge: right then wrong": output.replace("</response>", f" Or maybe {wrong_text}</response>"),
        "unrelated text": f"{head}<response>Bananas are yellow.</response>",
    }


CONTROLS = (
    "right, other words",
    "user's message echoed",
    "wrong fact, target's words",
    "hedge: right then wrong",
    "unrelated text",
)


@pytest.mark.parametrize(
    ("kind", "paper", "hardened"),
    [
        # means over 300 held-out examples: the controls' figures in docs/tasks.md
        (
            "response",
            dict.fromkeys(CONTROLS, 1.0),
            {
                "right, other words": 4.0,
                "user's message echoed": 1.0,
                "wrong fact, target's words": 1.02,
                "hedge: right then wrong": 1.02,
                "unrelated text": 1.0,
            },
        ),
        (
            "call_response",
            dict.fromkeys(CONTROLS, 4.0),
            {
                "right, other words": 4.0,
                "user's message echoed": 2.71,
                "wrong fact, target's words": 2.71,
                "hedge: right then wrong": 2.71,
                "unrelated text": 2.71,
            },
        ),
    ],
)
def test_response_hacks_over_held_out_generated_examples(
    kind: str, paper: dict[str, float], hardened: dict[str, float]
) -> None:
    from corrgrpo_tasks.tool_calling._responses import make_response_examples

    examples = make_response_examples(300, split="test", kind=kind)
    means: dict[str, dict[str, float]] = {"paper": {}, "hardened": {}}
    for profile, table in means.items():
        for name in paper:
            table[name] = statistics.mean(
                compute_score("rlla", _controls(e)[name], e.output, {"dialogue": e.input}, profile=profile)[
                    "score"
                ]
                for e in examples
            )
    assert means["paper"] == pytest.approx(paper)
    assert means["hardened"] == pytest.approx(hardened, abs=0.01)
    right = means["hardened"]["right, other words"]
    assert all(v < right for k, v in means["hardened"].items() if k != "right, other words")


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
