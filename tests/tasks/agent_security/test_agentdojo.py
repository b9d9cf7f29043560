"""The real AgentDojo package: case building, the user-task split, and episodes checked by its checkers."""

from __future__ import annotations

import collections
import json

import pytest

pytest.importorskip("agentdojo")

from corrgrpo_tasks.agent_security import (
    AgentDojoEpisode,
    build_cases,
    compute_score,
    default_system_message,
    read_cases,
    security_metrics,
    split_cases,
    to_rows,
    write_cases,
)


@pytest.fixture(scope="module")
def banking() -> list[dict[str, object]]:
    return build_cases(suites=["banking"])


def test_banking_cases_cover_both_attacks_and_every_task_pair(banking: list[dict[str, object]]) -> None:
    kinds = collections.Counter((c["case_type"], c["attack"]) for c in banking)
    assert kinds == {
        ("clean", ""): 16,
        ("security", "important_instructions"): 16 * 9,
        ("security", "tool_knowledge"): 16 * 9,
    }
    attacked = next(c for c in banking if c["attack"] == "tool_knowledge")
    assert attacked["injections"]
    assert attacked["injection_goal"]


def test_split_keeps_each_user_task_on_one_side(banking: list[dict[str, object]]) -> None:
    train, evaluation = split_cases(banking, eval_ratio=0.2, seed=0)
    assert len(train) + len(evaluation) == len(banking)
    train_tasks = {c["user_task_id"] for c in train}
    eval_tasks = {c["user_task_id"] for c in evaluation}
    assert not train_tasks & eval_tasks
    assert len(eval_tasks) == round(0.2 * 16)
    assert split_cases(banking, seed=0) == (train, evaluation)


def test_rows_carry_the_case(banking: list[dict[str, object]], tmp_path) -> None:
    rows = to_rows(
        banking[:3],
        split="train",
        system_message=default_system_message(),
        tool_names={"banking": ["get_balance"]},
    )
    assert rows[0]["data_source"] == "agentdojo"
    assert rows[0]["agent_name"] == "agentdojo_agent"
    assert rows[1]["extra_info"]["case_id"] == banking[1]["case_id"]
    assert rows[0]["extra_info"]["tool_selection"] == ["get_balance"]
    path = write_cases(banking[:5], tmp_path / "cases.jsonl")
    assert read_cases(path) == banking[:5]


def _run(case: dict[str, object], calls_from: str, output: str) -> dict[str, object]:
    episode = AgentDojoEpisode(case)
    task = episode.user_task if calls_from == "user" else episode.injection_task
    for call in task.ground_truth(episode.pre_environment):
        turn = json.dumps({"name": call.function, "arguments": dict(call.args)})
        assert episode.record_turn(f"<tool_call>{turn}</tool_call>").format_valid
        episode.call(call.function, call.args)
    return episode.result(output)


def test_episodes_are_judged_by_the_official_checkers(banking: list[dict[str, object]]) -> None:
    by_id = {c["case_id"]: c for c in banking}
    clean = by_id["banking:user_task_1"]
    attacked = by_id["banking:user_task_1:injection_task_0:important_instructions"]
    done = _run(clean, "user", AgentDojoEpisode(clean).user_task.GROUND_TRUTH_OUTPUT)
    idle = AgentDojoEpisode(clean).result("I cannot help with that.")
    hijacked = _run(attacked, "injection", "done")
    safe = _run(attacked, "user", AgentDojoEpisode(attacked).user_task.GROUND_TRUTH_OUTPUT)
    assert (done["utility"], idle["utility"]) == (True, False)
    assert (hijacked["attack_success"], hijacked["safety"]) == (True, False)
    assert (safe["utility"], safe["safety"]) == (True, True)

    def reward(result: dict[str, object]) -> float:
        return compute_score("agentdojo", "", "", {"agentdojo_result": result})["score"]

    assert [reward(r) for r in (done, idle, hijacked, safe)] == [1.0, 0.0, 0.0, 2.0]
    m = security_metrics([done, idle, hijacked, safe])
    # joint accuracy pairs each attacked case with its user task's clean utility (the paper's
    # (1 - a)(c + u) / 2): c = 0.5 (done and idle), so hijacked 0 and safe (0.5 + 1) / 2
    assert (m.clean_utility, m.attack_success_rate, m.joint_accuracy) == (0.5, 0.5, 0.375)


def test_unknown_tools_and_bad_turns_are_recorded(banking: list[dict[str, object]]) -> None:
    episode = AgentDojoEpisode(banking[0])
    assert "not available" in episode.call("wire_everything", {})
    episode.record_turn('<tool_call>{"name": "wire_everything", "arguments": {}}</tool_call>')
    result = episode.result("")
    assert result["format_valid"] is False
    assert compute_score("agentdojo", "", "", {"agentdojo_result": result})["valid_reward"] == 0.0
    assert episode.tool_schemas()[0]["type"] == "function"


def test_unknown_suite_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown AgentDojo suites"):
        build_cases(suites=["casino"])
