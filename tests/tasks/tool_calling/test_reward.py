"""Hand-written cases for every branch of the RLLA tool-calling reward."""

from __future__ import annotations

import json

import pytest

from corrgrpo_tasks.tool_calling import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    compute_score,
    extract_prediction,
    format_reward,
    parse_tool_calls,
    trl_reward_functions,
)

GT = (
    '<think>use the news tool</think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": "1"}}\n'
    "</tool_call>"
)
MAXIMA = {"function_name_reward": 0.5, "parameter_reward": 1.0, "values_reward": 1.5}
MINIMA = {"function_name_reward": -0.5, "parameter_reward": -1.0, "values_reward": -1.5}


def tool_parts(result: dict[str, float]) -> dict[str, float]:
    return {k: result[k] for k in MAXIMA}


def test_components_and_weights_match_the_paper_launcher() -> None:
    assert COMPONENTS == ("function_name_reward", "parameter_reward", "values_reward", "format_reward")
    assert DEFAULT_WEIGHTS == (1.0, 1.0, 1.0, 1.0)


def test_exact_prediction_scores_the_maxima() -> None:
    result = compute_score("rlla", GT, GT)
    assert tool_parts(result) == MAXIMA
    assert result["format_reward"] == 1.0
    assert result["accuracy_reward"] == 3.0
    assert result["score"] == 4.0
    assert result["exact_match"] == 1.0


def test_score_is_format_plus_accuracy_and_accuracy_the_component_sum(call_block) -> None:
    pred = call_block(("GetNews", {"page": "2", "extra": 1}))
    r = compute_score("rlla", pred, GT)
    assert r["accuracy_reward"] == pytest.approx(
        r["function_name_reward"] + r["parameter_reward"] + r["values_reward"]
    )
    assert r["score"] == pytest.approx(r["format_reward"] + r["accuracy_reward"])


@pytest.mark.parametrize(
    "pred",
    [
        "",
        "I will just answer.",
        '<think>x</think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": "1"}}',  # no closing tag
        "<think>x</think>\n<tool_call>\n{not json}\n</tool_call>",
        '<think>x</think>\n<tool_call>\n{"parameters": {"page": "1"}}\n</tool_call>',  # no name
        '<think>x</think>\n<tool_call>\n{"name": "GetNews"}\n</tool_call>',  # no parameters
        '<think>x</think>\n<tool_call>\n{"name": "GetNews", "parameters": ["1"]}\n</tool_call>',  # wrong type
        '<think>x</think>\n<tool_call>\n{"name": 7, "parameters": {}}\n</tool_call>',  # non-string name
        '<think>x</think>\n<tool_call>\n["GetNews", {"page": "1"}]\n</tool_call>',  # not an object
        "<think>x</think>\n<tool_call>\n\n</tool_call>",  # no call line
        '<tool_call>\n{"name": "GetNews", "parameters": {"page": "1"}}\nnot json\n</tool_call>',  # one bad line
    ],
)
def test_missing_or_malformed_calls_score_the_minima(pred: str) -> None:
    r = compute_score("rlla", pred, GT)
    assert tool_parts(r) == MINIMA
    assert r["accuracy_reward"] == -3.0
    assert r["exact_match"] == 0.0


def test_wrong_value_keeps_name_and_parameter_credit(call_block) -> None:
    r = compute_score("rlla", call_block(("GetNews", {"page": "2"})), GT)
    assert r["function_name_reward"] == 0.5
    assert r["parameter_reward"] == 1.0
    assert r["values_reward"] == -1.5
    assert r["format_reward"] == 1.0


def test_values_compare_with_python_equality(call_block) -> None:
    # The reference compares with ==: the integer 1 is not the string "1" ...
    r = compute_score("rlla", call_block(("GetNews", {"page": 1})), GT)
    assert r["values_reward"] == -1.5
    assert r["parameter_reward"] == 1.0
    # ... but true, 1 and 1.0 are all equal, in both profiles.
    gt = call_block(("GetNews", {"page": 1}))
    for value in (True, 1.0):
        for profile in ("paper", "hardened"):
            assert (
                compute_score("rlla", call_block(("GetNews", {"page": value})), gt, profile=profile)[
                    "values_reward"
                ]
                == 1.5
            )


def test_extra_parameter_lowers_the_parameter_name_score(call_block) -> None:
    r = compute_score("rlla", call_block(("GetNews", {"page": "1", "lang": "en"})), GT)
    assert r["parameter_reward"] == pytest.approx(2 * 0.5 - 1)  # Jaccard {page} vs {page, lang} = 1/2
    assert r["values_reward"] == 1.5
    assert r["function_name_reward"] == 0.5


def test_wrong_function_name_matches_nothing(call_block) -> None:
    r = compute_score("rlla", call_block(("GetWeather", {"page": "1"})), GT)
    assert tool_parts(r) == MINIMA
    assert r["format_reward"] == 1.0  # well formed, just wrong


def test_partial_multi_call_scores_are_fractions(call_block) -> None:
    gt = call_block(("a", {"x": 1, "y": 2}), ("b", {"z": 3}))
    pred = call_block(("a", {"x": 1, "y": 0}), ("c", {"z": 3}))
    r = compute_score("rlla", pred, gt)
    # names {a, b} vs {a, c}: Jaccard 1/3; matched call a: param Jaccard 1, 1 value right of 3 in total.
    assert r["function_name_reward"] == pytest.approx(1 / 3 - 0.5)
    assert r["parameter_reward"] == pytest.approx(2 * (1 / 2) - 1)
    assert r["values_reward"] == pytest.approx(3 * (1 / 3) - 1.5)


def test_greedy_matching_pairs_each_prediction_once(call_block) -> None:
    gt = call_block(("w", {"city": "Rome"}), ("w", {"city": "Milan"}))
    swapped = compute_score("rlla", call_block(("w", {"city": "Milan"}), ("w", {"city": "Rome"})), gt)
    assert tool_parts(swapped) == MAXIMA  # best pairing found despite the order
    assert swapped["exact_match"] == 0.0  # but the list is not identical
    once = compute_score("rlla", call_block(("w", {"city": "Rome"})), gt)
    assert once["function_name_reward"] == pytest.approx(0.5 - 0.5)  # Jaccard {w} vs {w, w} = 1/2
    assert once["parameter_reward"] == pytest.approx(0.0)  # one of two calls matched
    assert once["values_reward"] == pytest.approx(0.0)


def test_calls_without_parameters_make_the_values_component_vacuous(call_block) -> None:
    gt = call_block(("ping", {}))
    r = compute_score("rlla", call_block(("ping", {}), ("ping", {})), gt)
    assert r["values_reward"] == 1.5
    assert r["parameter_reward"] == 1.0
    assert r["function_name_reward"] == pytest.approx(0.5 - 0.5)


def test_ground_truth_without_tool_call_gives_zero_tool_components() -> None:
    gt = "<think>done</think>\n<response>Bye!</response>"
    good = compute_score("rlla", "<think>ok</think> <response>See you</response>", gt)
    assert tool_parts(good) == dict.fromkeys(MAXIMA, 0.0)
    assert good["format_reward"] == 1.0
    assert good["exact_match"] == 1.0
    calling = compute_score("rlla", GT, gt)
    assert tool_parts(calling) == dict.fromkeys(MAXIMA, 0.0)
    assert calling["format_reward"] == 0.0
    assert calling["exact_match"] == 0.0


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        (GT, 1.0),
        ("  " + GT + "\n\n", 1.0),  # surrounding whitespace is stripped
        (GT.replace("</think>\n", "</think>   \n\n"), 1.0),  # any whitespace between blocks
        (GT.replace("<think>", ""), 0.0),  # opening think tag missing
        (GT + " trailing", 0.0),
        (GT + "\n<tool_call>\n{}\n</tool_call>", 0.0),  # two blocks
        (GT.replace("<tool_call>\n", "<tool_call>"), 0.0),  # tag not on its own line
        ("<think>a</think>", 0.0),
    ],
)
def test_format_reward_for_tool_call_targets(pred: str, expected: float) -> None:
    assert format_reward(pred.strip(), GT) == expected


@pytest.mark.parametrize(
    ("gt", "pred", "expected"),
    [
        ("<think>a</think>\n<response>b</response>", "<think>c</think><response>d</response>", 1.0),
        ("<think>a</think>\n<response>b</response>", "<think>c</think><response>d</response><response>", 0.0),
        ("<think>a</think>\n<response>b</response>", "<response>d</response>", 0.0),
        ("<think>a</think>", "<think>anything at all</think>", 1.0),
        ("<think>a</think>", "<think>x</think> more", 0.0),
        (GT + "\n<response>r</response>", GT + "<response>ok</response>", 1.0),
        (GT + "\n<response>r</response>", GT, 0.0),
        (GT + "\n<response>r</response>", "<think>a</think><response>ok</response>", 0.0),
    ],
)
def test_format_reward_layouts(gt: str, pred: str, expected: float) -> None:
    assert format_reward(pred, gt) == expected


def test_missing_think_open_is_accepted_only_when_asked() -> None:
    pred = GT.replace("<think>", "")
    assert compute_score("rlla", pred, GT)["format_reward"] == 0.0
    assert compute_score("rlla", pred, GT, allow_missing_think_open=True)["format_reward"] == 1.0
    assert compute_score("rlla", pred, GT, {"model_name": "Qwen3-4B-Thinking"})["format_reward"] == 1.0
    assert (
        compute_score("rlla", pred, GT, {"model_name": "Qwen3-4B-Thinking"}, allow_missing_think_open=False)[
            "format_reward"
        ]
        == 0.0
    )


def test_chat_markers_are_removed_before_scoring() -> None:
    text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" + GT + "<|im_end|>"
    assert extract_prediction(text) == GT
    assert compute_score("rlla", text, GT)["score"] == 4.0
    llama = "<|start_header_id|>assistant<|end_header_id|>\n\n" + GT + "<|eot_id|>"
    # Llama's markers only when the experiment name says so (the reference's switch).
    assert compute_score("rlla", llama, GT, {"experiment_name": "rlla-llama3"})["score"] == 4.0
    assert compute_score("rlla", llama, GT)["format_reward"] == 0.0


@pytest.mark.parametrize("solution", [None, 3, {"a": 1}, [], b"\xff\xfe"])
def test_non_text_outputs_get_defined_minimum_scores(solution: object) -> None:
    r = compute_score("rlla", solution, GT)
    assert r["accuracy_reward"] == -3.0
    assert r["format_reward"] == 0.0


def test_chat_message_list_scores_the_last_message() -> None:
    assert compute_score("rlla", [{"role": "assistant", "content": GT}], GT)["score"] == 4.0


def test_huge_and_deeply_nested_outputs_get_defined_scores() -> None:
    deep = (
        '<think>x</think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": '
        + "[" * 200_000
        + "]" * 200_000
        + "}}\n</tool_call>"
    )
    assert tool_parts(compute_score("rlla", deep, GT)) == MINIMA
    nested = {"page": "1"}
    value: object = "1"
    for _ in range(300):
        value = [value]
    nested["deep"] = value  # type: ignore[assignment]
    moderately = (
        "<think>x</think>\n<tool_call>\n"
        + json.dumps({"name": "GetNews", "parameters": nested})
        + "\n</tool_call>"
    )
    r = compute_score("rlla", moderately, GT)
    assert r["values_reward"] == 1.5
    assert r["parameter_reward"] == pytest.approx(0.0)
    big_int = (
        '<think>x</think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": '
        + "9" * 100_000
        + "}}\n</tool_call>"
    )
    assert tool_parts(compute_score("rlla", big_int, GT)) == MINIMA
    long_text = "<think>" + "a" * 2_000_000 + "</think>" * 1000
    assert compute_score("rlla", long_text, GT)["format_reward"] == 0.0


def test_malformed_ground_truth_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ground truth"):
        compute_score("rlla", GT, "<think>x</think>\n<tool_call>\nnope\n</tool_call>")
    with pytest.raises(TypeError, match="ground_truth"):
        compute_score("rlla", GT, None)  # type: ignore[arg-type]


def test_parse_tool_calls_reports_presence_and_validity() -> None:
    assert parse_tool_calls("plain").present is False
    assert parse_tool_calls("<tool_call>\n{}\n</tool_call>").calls == ({},)  # read; not a call when scored
    assert parse_tool_calls("<tool_call>\nnope\n</tool_call>").calls is None
    assert parse_tool_calls("<tool_call>\n{}").calls is None
    parsed = parse_tool_calls(GT)
    assert parsed.present
    assert parsed.calls == ({"name": "GetNews", "parameters": {"page": "1"}},)


def test_inputs_are_not_mutated(call_block) -> None:
    extra = {"model_name": "x"}
    compute_score("rlla", GT, GT, extra)
    assert extra == {"model_name": "x"}


def test_trl_reward_functions_return_one_column_per_component(call_block) -> None:
    fns = trl_reward_functions()
    assert [f.__name__ for f in fns] == list(COMPONENTS)
    completions = [GT, "garbage", [{"role": "assistant", "content": GT}]]
    columns = [
        f(prompts=["p"] * 3, completions=completions, ground_truth=[GT] * 3, trainer_state=None) for f in fns
    ]
    assert columns[0] == [0.5, -0.5, 0.5]
    assert columns[3] == [1.0, 0.0, 1.0]
    with pytest.raises(KeyError, match="ground_truth"):
        fns[0](prompts=["p"], completions=[GT])
    with pytest.raises(ValueError, match="unknown"):
        trl_reward_functions(components=["nope"])
