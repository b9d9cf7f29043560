"""RLLA / API-Bank loading: the reference split, row layout, validation, parquet round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from corrgrpo_tasks.tool_calling import (
    RLLA_SPLIT_SEED,
    TOOL_SYSTEM_PROMPT,
    compute_score,
    from_api_bank,
    is_api_bank_record,
    load_api_bank,
    load_rlla,
    prepare,
    read_records,
    split_rlla,
    to_rows,
    validate_records,
)
from corrgrpo_tasks.tool_calling.__main__ import main

FIXTURE = (
    Path(__file__).resolve().parents[3]
    / "tasks"
    / "corrgrpo_tasks"
    / "tool_calling"
    / "fixtures"
    / "rlla_tiny.json"
)


def test_fixture_records_are_valid_and_their_targets_score_full_marks() -> None:
    records = read_records(FIXTURE)
    validate_records(records)
    for record in records:
        result = compute_score("rlla", record["output"], record["output"])
        assert result["format_reward"] == 1.0
        assert result["exact_match"] == 1.0


def test_split_matches_the_reference_shuffle_and_sizes() -> None:
    records = [{"i": i} for i in range(4000)]
    train, test = split_rlla(records)
    assert (len(train), len(test)) == (3920, 80)
    # The reference seeds numpy's global generator and shuffles the list of records itself.
    np.random.seed(RLLA_SPLIT_SEED)  # noqa: NPY002 -- the reference's legacy global generator
    expected = list(records)
    np.random.shuffle(expected)  # noqa: NPY002
    assert train + test == expected
    assert records == [{"i": i} for i in range(4000)]  # input untouched


def test_rows_have_the_verl_layout_and_a_top_level_target() -> None:
    rows = to_rows(read_records(FIXTURE)[:2], split="train")
    row = rows[1]
    assert row["data_source"] == "rlla"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["reward_model"] == {"style": "rule", "ground_truth": row["ground_truth"]}
    assert row["extra_info"] == {"split": "train", "index": 1, "dialogue": row["prompt"][1]["content"]}


@pytest.mark.parametrize(
    ("record", "error", "message"),
    [
        ({"instruction": "s", "input": "u"}, TypeError, "'output'"),
        ({"instruction": 1, "input": "u", "output": "<think>a</think>"}, TypeError, "'instruction'"),
        (
            {"instruction": "s", "input": "u", "output": "<think>a</think>\n<tool_call>\nbad\n</tool_call>"},
            ValueError,
            "ground truth",
        ),
    ],
)
def test_bad_records_are_named(record: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        validate_records([record], source="data.json")


def test_raw_json_to_parquet_and_back(tmp_path: Path) -> None:
    written = prepare(FIXTURE, tmp_path, test_fraction=0.25)
    loaded = load_rlla(tmp_path)
    assert (loaded["train"].num_rows, loaded["test"].num_rows) == (11, 3)
    assert set(written) == {"train", "test"}
    direct = load_rlla(FIXTURE, test_fraction=0.25)
    assert direct["test"]["ground_truth"] == loaded["test"]["ground_truth"]


def test_empty_split_and_missing_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        load_rlla(FIXTURE)  # 14 records x 2% = no test record
    with pytest.raises(FileNotFoundError, match=r"test\.parquet"):
        load_rlla(tmp_path)


def test_jsonl_and_non_list_inputs(tmp_path: Path) -> None:
    records = read_records(FIXTURE)
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_records(path) == records
    bad = tmp_path / "bad.json"
    bad.write_text('{"instruction": "x"}')
    with pytest.raises(TypeError, match="JSON list"):
        read_records(bad)


def test_api_bank_levels(tmp_path: Path) -> None:
    records = read_records(FIXTURE)
    files = {}
    for level in (1, 2, 3):
        files[level] = tmp_path / f"level-{level}.json"
        files[level].write_text(json.dumps(records[level : level + 2]))
    data = load_api_bank(files)
    assert list(data) == ["level_1", "level_2", "level_3"]
    assert data["level_2"][0]["data_source"] == "api_bank"
    assert data["level_3"][0]["extra_info"]["level"] == 3


def test_cli_writes_the_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(FIXTURE), str(tmp_path), "--test-fraction", "0.5"]) == 0
    assert "train.parquet" in capsys.readouterr().out
    assert load_rlla(tmp_path)["test"].num_rows == 7


API_BANK = FIXTURE.with_name("api_bank_tiny.json")  # project-made, in API-Bank's test-data layout


def _converted(rows: Any, index: int, call: dict[str, Any]) -> tuple[str, str]:
    """Row ``index``'s system and user text, after checking its target is ``call`` and that every
    converted target is a valid RLLA target (a model writing it after a thought gets full marks)."""
    assert json.loads(rows[index]["ground_truth"].split("\n")[1]) == call
    for row in rows:
        scores = compute_score("api_bank", "<think>ok</think>\n" + row["ground_truth"], row["ground_truth"])
        assert scores["score"] == pytest.approx(4.0)
    return rows[index]["prompt"][0]["content"], rows[index]["prompt"][1]["content"]


def test_api_bank_files_in_their_own_layout_convert_to_rlla_rows(tmp_path: Path) -> None:
    rows = load_api_bank({1: API_BANK})["level_1"]
    assert rows.num_rows == 4
    system, user = _converted(
        rows,
        1,
        {"name": "AddAlarm", "parameters": {"token": "a9s8d7f6g5h4j3k2l1", "time": "2023-03-24 07:00:00"}},
    )
    assert system.startswith(TOOL_SYSTEM_PROMPT)
    assert "Name: AddAlarm" in system
    assert "Name: GetUserToken" in system
    assert '"time": {"type": "str"' in system
    assert not user.endswith("Generate API Request:")
    assert user.endswith("->{'token': 'a9s8d7f6g5h4j3k2l1'}")


@pytest.mark.parametrize(
    "expected",
    [
        "API-Request: [Calc('2+2')]",  # positional argument
        "API-Request: [Calc(formula=x)]",  # not a literal
        "API-Request: Calc(formula='2')",  # no brackets
        "API-Request: [os.system(cmd='ls')]",  # not a plain name
        "API-Request: [Calc(formula='2'",  # truncated
    ],
)
def test_a_malformed_api_bank_request_names_the_file(tmp_path: Path, expected: str) -> None:
    record = {**read_records(API_BANK)[2], "expected_output": expected}
    path = tmp_path / "level-1-api.json"
    path.write_text(json.dumps([record]))
    with pytest.raises(ValueError, match=r"level-1-api\.json: .*API-Bank request"):
        load_api_bank({1: path})


def test_from_api_bank_keeps_literal_types_and_a_custom_system_prompt() -> None:
    record = {
        **read_records(API_BANK)[2],
        "expected_output": "API-Request: [Calc(n=3, x=0.5, on=True, tags=['a'])]",
    }
    converted = from_api_bank(record, system_prompt="SYSTEM")
    assert converted["instruction"].startswith("SYSTEM\n\nAvailable tools:\nName: Calculator")
    assert json.loads(converted["output"].split("\n")[1])["parameters"] == {
        "n": 3,
        "x": 0.5,
        "on": True,
        "tags": ["a"],
    }


def test_api_bank_level_3_keeps_target_in_output_and_tools_in_input() -> None:
    path = API_BANK.with_name("api_bank_level3_tiny.json")
    assert all(is_api_bank_record(r) for r in read_records(path))
    rows = load_api_bank({3: path})["level_3"]
    system, user = _converted(
        rows, 1, {"name": "QueryMeeting", "parameters": {"user_name": "Alice", "date": "2023-04-01"}}
    )
    assert "Name: QueryMeeting" in system
    assert '"user_name": {"type": "str"' in system
    assert "apiCode" not in user  # the tool line left the dialogue
    assert user.startswith("User: Can you check my meetings")


def test_a_target_that_nothing_can_match_is_rejected() -> None:
    record = {"instruction": "sys", "input": "User: hi", "output": "API-Request; [Calc()]"}
    with pytest.raises(ValueError, match=r"records\[0\]: target has neither"):
        validate_records([record])


def test_the_response_generator_writes_valid_records_with_held_out_questions() -> None:
    from corrgrpo_tasks.tool_calling import response_facts
    from corrgrpo_tasks.tool_calling._responses import make_response_examples

    for kind in ("response", "call_response"):
        train = make_response_examples(400, seed=1, kind=kind)
        test = make_response_examples(300, seed=1, split="test", kind=kind)
        validate_records([e.record() for e in train + test])
        questions = {e.input.split("\n")[0] for e in train}
        assert not questions & {e.input.split("\n")[0] for e in test}
        assert all(response_facts(e.output, e.input) for e in train + test)  # every target is checkable
        assert make_response_examples(5, seed=1, kind=kind) == train[:5]  # seeded
    with pytest.raises(ValueError, match="split"):
        make_response_examples(1, split="dev")
