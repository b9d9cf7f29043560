"""The synthetic training data of ``corrgrpo train``: targets earn the reward's maxima, held-out
prompts are unseen, the code task's reference solutions pass their own tests. No TRL needed."""

from __future__ import annotations

import json

import pytest

from corrgrpo_tasks.tool_calling import RANGES, compute_score
from corrgrpo_tasks.training._code_data import FAMILIES, code_pieces, make_code_examples
from corrgrpo_tasks.training._examples import Example
from corrgrpo_tasks.training._tool_data import CATALOGUE, make_tool_examples, tool_pieces


def test_tool_targets_score_the_maximum_of_every_component() -> None:
    train, held = make_tool_examples(300, 60, seed=3)
    for example in (*train, *held):
        scores = compute_score("synthetic", example.completion, example.ground_truth)
        for name in ("function_name_reward", "parameter_reward", "values_reward", "format_reward"):
            assert scores[name] == RANGES[name][1]
        assert scores["exact_match"] == 1.0


def test_held_out_prompts_are_not_in_the_training_set_and_data_is_reproducible() -> None:
    train, held = make_tool_examples(500, 100, seed=1)
    assert not {e.prompt[0]["content"] for e in held} & {e.prompt[0]["content"] for e in train}
    again, _ = make_tool_examples(500, 100, seed=1)
    assert [e.ground_truth for e in again] == [e.ground_truth for e in train]
    other, _ = make_tool_examples(500, 100, seed=2)
    assert [e.ground_truth for e in other] != [e.ground_truth for e in train]


def test_every_tool_is_used_and_the_right_tool_is_among_the_listed_ones() -> None:
    train, _ = make_tool_examples(600, 1)
    assert {e.label for e in train} == {t.name for t in CATALOGUE}
    for example in train[:100]:
        listed = example.prompt[0]["content"].split("\n")[0]
        assert f"{example.label}(" in listed


def test_some_values_need_a_rewrite_not_a_copy() -> None:
    # "in F" -> "fahrenheit", "six" -> 6: the values component is more than copying characters.
    train, _ = make_tool_examples(400, 1)
    rewritten = 0
    for example in train:
        call = json.loads(example.ground_truth.split("\n")[2])
        request = example.prompt[0]["content"].split("User: ")[1]
        rewritten += any(str(v) not in request for v in call["parameters"].values())
    assert rewritten > 40


def _parameters(text: str) -> dict[str, object]:
    parameters: dict[str, object] = json.loads(text.split("\n")[2])["parameters"]
    return parameters


def _wrong_values(examples: list[Example]) -> int:
    return sum(
        value != _parameters(e.ground_truth)[name]
        for e in examples
        for name, value in _parameters(e.completion).items()
    )


@pytest.mark.parametrize("normalise", [0.0, 0.5])
def test_demonstrations_copy_as_said_the_values_they_do_not_normalise(normalise: float) -> None:
    # The warm start's targets: a value the request says its own way ("dollars", "Paris", "six") is
    # copied as said with probability 1 - normalise; the reward's ground truth is always the right call.
    right, _ = make_tool_examples(400, 1)
    train, _ = make_tool_examples(400, 1, normalise=normalise)
    assert [e.prompt for e in train] == [e.prompt for e in right]
    assert [e.ground_truth for e in train] == [e.ground_truth for e in right]
    for example in train:
        request = example.prompt[0]["content"].split("User: ")[1]
        truth, shown = _parameters(example.ground_truth), _parameters(example.completion)
        assert shown.keys() == truth.keys()
        assert all(str(value) in request for name, value in shown.items() if value != truth[name])
        scores = compute_score("synthetic", example.completion, example.ground_truth)
        assert (scores["exact_match"] == 1.0) == (shown == truth)
        assert (scores["values_reward"] < RANGES["values_reward"][1]) == (shown != truth)
    said = _wrong_values(make_tool_examples(400, 1, normalise=0.0)[0])
    assert said > 200  # most requests say at least one value their own way
    assert _wrong_values(right) == 0
    assert 0.7 * (1 - normalise) * said <= _wrong_values(train) <= 1.3 * (1 - normalise) * said


def test_normalise_outside_zero_one_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"normalise must be in \[0, 1\]"):
        make_tool_examples(4, 1, normalise=1.5)


def test_pieces_are_distinct() -> None:
    for pieces in (tool_pieces(), code_pieces()):
        assert len(pieces) == len(set(pieces))


@pytest.mark.parametrize("seed", [0, 1])
def test_code_references_pass_their_hidden_tests_and_prompts_show_two_examples(seed: int) -> None:
    train, held = make_code_examples(200, 40, seed=seed)
    assert not {e.prompt[0]["content"] for e in held} & {e.prompt[0]["content"] for e in train}
    assert {int(e.label) for e in train} == set(range(len(FAMILIES)))
    for example in (*train, *held):
        verifier = json.loads(example.ground_truth)
        assert example.completion == f"```python\n{verifier['reference_solution']}```"
        assert example.prompt[0]["content"].count(">>> ") == 2
        assert verifier["test"].count("assert ") == 4
        namespace: dict[str, object] = {}
        exec(verifier["reference_solution"] + verifier["test"], namespace)  # noqa: S102 - our own generated code
        namespace["check"](namespace[verifier["entry_point"]])  # type: ignore[operator]


def test_shots_are_worked_exchanges_before_the_request() -> None:
    from corrgrpo_tasks.training._run import with_shots, with_system_turn

    train, held = make_tool_examples(3, 1)
    [shown] = with_system_turn(with_shots(held, train[:2]), "SYSTEM")
    roles = [turn["role"] for turn in shown.prompt]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert shown.prompt[2]["content"] == train[0].ground_truth
    assert shown.prompt[-1] == held[0].prompt[-1]
    assert with_shots(held, []) == held
