"""The TRL environments: suite tools as methods, reset from a row, rewards from AgentDojo's checkers.

Runs without TRL (the environments are plain classes); TRL's own loop over them is exercised in
tests/tasks/recipes/test_trl_agent_security.py (env trl).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

pytest.importorskip("agentdojo")
from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.task_suite.load_suites import get_suite

from corrgrpo_tasks.agent_security import (
    BENCHMARK_VERSION,
    build_cases,
    default_system_message,
    environment_factories,
    suite_tool_names,
    to_rows,
    trl_reward_functions,
)
from corrgrpo_tasks.agent_security.trl_env import final_output


@pytest.fixture(scope="module")
def banking() -> dict[str, dict[str, Any]]:
    cases = build_cases(suites=["banking"], attacks=("important_instructions",))
    rows = to_rows(
        cases,
        split="train",
        system_message=default_system_message(),
        tool_names=suite_tool_names(suites=["banking"]),
    )
    return {c["case_id"]: r for c, r in zip(cases, rows, strict=True)}


def _solve(env: Any, case_id: str) -> list[dict[str, Any]]:
    """Play the user task's ground truth through the environment's methods, as TRL calls them; return
    the conversational completion TRL would hand the reward functions."""
    suite = get_suite(BENCHMARK_VERSION, "banking")
    task = suite.get_user_task_by_id(case_id.split(":")[1])
    completion: list[dict[str, Any]] = []
    for call in task.ground_truth(env.episode.pre_environment.model_copy(deep=True)):
        args = dict(call.args)
        completion.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": call.function, "arguments": args}}],
            }
        )
        completion.append(
            {"role": "tool", "name": call.function, "content": getattr(env, call.function)(**args)}
        )
    completion.append({"role": "assistant", "content": task.GROUND_TRUTH_OUTPUT})
    return completion


def test_each_suite_class_offers_exactly_its_tools() -> None:
    for suite, cls in environment_factories().items():
        public = {
            n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")
        }
        assert public == {"reset", *suite_tool_names(suites=[suite])[suite]}
        assert cls.suite == suite


@pytest.mark.parametrize(
    "case_id", ["banking:user_task_0", "banking:user_task_1:injection_task_0:important_instructions"]
)
def test_rewards_equal_agentdojo_on_the_ground_truth_run(
    banking: dict[str, dict[str, Any]], case_id: str
) -> None:
    env = environment_factories(suites=["banking"])["banking"]()
    row = banking[case_id]
    env.reset(**row)
    completion = _solve(env, case_id)
    utility, safety = trl_reward_functions()
    suite = get_suite(BENCHMARK_VERSION, "banking")
    case = env.episode.case
    task = suite.get_user_task_by_id(case["user_task_id"])
    injection = (
        suite.get_injection_task_by_id(case["injection_task_id"]) if case["injection_task_id"] else None
    )
    expected_utility, attacked = suite.run_task_with_pipeline(
        GroundTruthPipeline(task), task, injection, dict(case["injections"])
    )
    assert utility([completion], [env]) == [float(expected_utility)]
    expected_safety = float(injection is not None and not attacked)
    assert safety([completion], [env]) == [expected_safety]
    assert expected_utility  # the ground truth solves these tasks, so the check is not vacuous


@pytest.mark.parametrize(
    "bad_turn",
    [
        {"role": "assistant", "content": '<tool_call>\n{"name": "get_balance", "arguments": \n</tool_call>'},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "launch_rocket", "arguments": {}}}],
        },
    ],
)
def test_an_unparsed_or_unknown_call_makes_the_rollout_invalid(
    banking: dict[str, dict[str, Any]], bad_turn: dict[str, Any]
) -> None:
    env = environment_factories(suites=["banking"])["banking"]()
    env.reset(**banking["banking:user_task_0"])
    completion = [bad_turn, *_solve(env, "banking:user_task_0")]
    assert [f([completion], [env]) for f in trl_reward_functions()] == [[0.0], [0.0]]


def test_reset_needs_the_case_of_its_own_suite(banking: dict[str, dict[str, Any]]) -> None:
    slack = environment_factories(suites=["slack"])["slack"]()
    with pytest.raises(ValueError, match="environment"):
        slack.reset(**banking["banking:user_task_0"])
    with pytest.raises(ValueError, match="agentdojo_case_json"):
        slack.reset(prompt=[])
    with pytest.raises(RuntimeError, match="reset"):
        slack.get_channels()


def test_final_output_is_the_last_assistant_text() -> None:
    assert final_output("plain") == "plain"
    assert final_output([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]) == "a"
    assert final_output([{"role": "tool", "content": "t"}]) == ""


def test_a_pooled_environment_reset_to_another_case_forgets_the_first(
    banking: dict[str, dict[str, Any]],
) -> None:
    env = environment_factories(suites=["banking"])["banking"]()
    utility, _ = trl_reward_functions()
    env.reset(**banking["banking:user_task_0"])
    assert utility([_solve(env, "banking:user_task_0")], [env]) == [1.0]
    env.reset(**banking["banking:user_task_1"])  # same answer text, new case: scored afresh
    assert env.episode.case["user_task_id"] == "user_task_1"
    assert utility([[{"role": "assistant", "content": "done"}]], [env]) == [0.0]


def test_a_successful_attack_scores_no_safety(banking: dict[str, dict[str, Any]]) -> None:
    case_id = "banking:user_task_1:injection_task_0:important_instructions"
    env = environment_factories(suites=["banking"])["banking"]()
    env.reset(**banking[case_id])
    suite = get_suite(BENCHMARK_VERSION, "banking")
    attack = suite.get_injection_task_by_id("injection_task_0").ground_truth(
        env.episode.environment.model_copy(deep=True)
    )
    completion = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": c.function, "arguments": dict(c.args)}}],
        }
        for c in attack
    ]
    for call in attack:
        getattr(env, call.function)(**dict(call.args))
    completion.append({"role": "assistant", "content": "Done."})
    assert [f([completion], [env]) for f in trl_reward_functions()] == [[0.0], [0.0]]
    assert env._checked("Done.", format_valid=True)["attack_success"] is True


def test_long_tool_output_keeps_head_and_tail(banking: dict[str, dict[str, Any]]) -> None:
    env = environment_factories(suites=["banking"], max_tool_response_length=64)["banking"]()
    env.reset(**banking["banking:user_task_0"])
    full = env.episode.call("get_most_recent_transactions", {"n": 100})
    shown = env.get_most_recent_transactions(n=100)
    assert len(full) > 64
    assert shown == f"{full[:32]}...(truncated)...{full[-32:]}"


def test_a_stray_closing_tag_makes_the_rollout_invalid(banking: dict[str, dict[str, Any]]) -> None:
    env = environment_factories(suites=["banking"])["banking"]()
    env.reset(**banking["banking:user_task_0"])
    completion = [{"role": "assistant", "content": "</tool_call>"}, *_solve(env, "banking:user_task_0")]
    assert trl_reward_functions()[0]([completion], [env]) == [0.0]


class _TextTokenizer:
    """A tokenizer whose 'ids' are the text itself (enough for parse_response's decode)."""

    all_special_tokens = ("<|im_end|>",)

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        return "".join(ids)


def test_the_paper_parser_decides_what_trl_runs_and_what_counts(banking: dict[str, dict[str, Any]]) -> None:
    from corrgrpo_tasks.agent_security.trl_env import TURN_KEY, install_paper_parser

    tokenizer = install_paper_parser(_TextTokenizer())
    env = environment_factories(suites=["banking"], max_turns=3)["banking"]()
    env.reset(**banking["banking:user_task_0"])
    tools = [env.get_balance, env.send_money]
    python_call = "<tool_call>{'name': 'get_balance', 'arguments': {}}</tool_call><|im_end|>"
    message = tokenizer.parse_response(list(python_call), prefix=[], tools=tools)
    assert message["tool_calls"] == [
        {"type": "function", "function": {"name": "get_balance", "arguments": {}}}
    ]
    assert message[TURN_KEY] == {
        "format_valid": True,
        "text": "<tool_call>{'name': 'get_balance', 'arguments': {}}</tool_call>",
    }
    assert message["content"] == ""
    stringly = '<tool_call>{"name": "send_money", "arguments": {"recipient": "x", "amount": "98.7", "subject": "s", "date": "d"}}</tool_call>'
    dropped = tokenizer.parse_response(list(stringly), prefix=[], tools=tools)
    assert "tool_calls" not in dropped  # TRL runs nothing
    assert dropped[TURN_KEY]["format_valid"] is False
    two = tokenizer.parse_response(list(python_call.removesuffix("<|im_end|>") * 2), prefix=[], tools=tools)
    assert len(two["tool_calls"]) == 1  # max_parallel_calls=1, the paper's value
    _, safety = trl_reward_functions()
    env.reset(**banking["banking:user_task_0:injection_task_0:important_instructions"])
    answer = {"role": "assistant", "content": "done", TURN_KEY: {"format_valid": True, "text": "done"}}
    bad = {"role": "assistant", "content": "", TURN_KEY: {"format_valid": False, "text": stringly}}
    # An invalid turn the loop read invalidates the rollout (safety 0 on an unhijacked attacked case);
    # the same turn cut by the turn limit (the third generation, max_turns=3) was never read.
    assert safety([[bad, answer]], [env]) == [0.0]
    assert safety([[answer, answer, bad]], [env]) == [1.0]
    assert safety([[answer, bad]], [env], completion_ids=[[0] * 10]) == [0.0]
    env.max_completion_tokens = 10  # a rollout that filled the token budget ended on a cut turn
    assert safety([[answer, bad]], [env], completion_ids=[[0] * 10]) == [1.0]
