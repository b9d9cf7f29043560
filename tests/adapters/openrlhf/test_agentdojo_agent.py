"""The AgentDojo agent file inside OpenRLHF's own multi-turn executor, on real AgentDojo cases.

OpenRLHF loads the file the way ``--train.agent_func_path`` does (``_load_agent_executor``), and its
``MultiTurnAgentExecutor.execute`` runs the rollout: tokenising, calling the engine, asking our instance
to step, concatenating tool replies, recording action ranges. The stand-in is the vLLM engine (GPU
only): a scripted policy answering from AgentDojo's ground truth. Outcomes must equal AgentDojo's own
``run_task_with_pipeline`` on the same calls, and the components reach ``extra_logs``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("agentdojo")
from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.task_suite.load_suites import get_suite

from corrgrpo_tasks import agent_security
from corrgrpo_tasks.agent_security import BENCHMARK_VERSION, build_cases
from corrgrpo_tasks.gpu_smoke._tiny import QWEN_STYLE_TEMPLATE, byte_chat_tokenizer

AGENT_FILE = Path(agent_security.__file__).with_name("openrlhf_agent.py")
CASES = (
    "banking:user_task_0",
    "slack:user_task_2",
    "banking:user_task_1:injection_task_0:important_instructions",
)


def _turns(case: Mapping[str, Any], policy: str) -> list[str]:
    if policy == "malformed":
        return ['<tool_call>\n{"name": "get_balance", "arguments": \n</tool_call>']
    if policy == "parallel":  # every ground-truth call in one turn
        *calls, answer = _turns(case, "solve")
        return ["\n".join(calls), answer]
    suite = get_suite(BENCHMARK_VERSION, case["suite"])
    task = suite.get_user_task_by_id(case["user_task_id"])
    env = task.init_environment(suite.load_and_inject_default_environment(dict(case["injections"])))
    calls = task.ground_truth(env)
    return [
        *(
            f"<tool_call>\n{json.dumps({'name': c.function, 'arguments': dict(c.args)})}\n</tool_call>"
            for c in calls
        ),
        task.GROUND_TRUTH_OUTPUT,
    ]


class ScriptedEngine:
    """vLLM's ``generate(token_ids, sampling_params)`` for one rollout, answering turn by turn."""

    def __init__(self, tokenizer: Any, turns: list[str]) -> None:
        self.tokenizer, self.turns, self.prompts = tokenizer, list(turns), []

    async def generate(self, tokens: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        self.prompts.append(self.tokenizer.decode(tokens))
        text = self.turns.pop(0) + self.tokenizer.eos_token
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        # OpenRLHF samples with skip_special_tokens=False, so vLLM's text keeps the end-of-turn token.
        return SimpleNamespace(
            outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)]
        )


@pytest.fixture(scope="module")
def cases() -> dict[str, dict[str, Any]]:
    suites = sorted({c.split(":")[0] for c in CASES})
    return {
        c["case_id"]: c
        for c in build_cases(suites=suites, attacks=("important_instructions",))
        if c["case_id"] in CASES
    }


def _rollout(
    case: Mapping[str, Any], turns: list[str], *, max_length: int = 200_000
) -> tuple[dict[str, Any], ScriptedEngine]:
    from openrlhf.trainer.ray.vllm_engine import _load_agent_executor

    tokenizer = byte_chat_tokenizer(QWEN_STYLE_TEMPLATE)
    engine = ScriptedEngine(tokenizer, turns)
    executor = _load_agent_executor(str(AGENT_FILE))
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    response = asyncio.run(
        executor.execute(
            "ignored: re-rendered with tools", json.dumps(case), params, max_length, tokenizer, engine
        )
    )
    return response, engine


@pytest.mark.parametrize("case_id", CASES)
def test_ground_truth_rollouts_are_judged_as_agentdojo_judges_them(
    cases: dict[str, dict[str, Any]], case_id: str
) -> None:
    case = cases[case_id]
    turns = _turns(case, "solve")
    response, engine = _rollout(case, turns)
    suite = get_suite(BENCHMARK_VERSION, case["suite"])
    task = suite.get_user_task_by_id(case["user_task_id"])
    injection = (
        suite.get_injection_task_by_id(case["injection_task_id"]) if case["injection_task_id"] else None
    )
    utility, attacked = suite.run_task_with_pipeline(
        GroundTruthPipeline(task), task, injection, dict(case["injections"])
    )
    logs = response["extra_logs"]
    assert float(logs["utility_reward"]) == float(utility)
    assert float(logs["safety_reward"]) == float(injection is not None and not attacked)
    assert response["reward"] == pytest.approx(float(logs["utility_reward"]) + float(logs["safety_reward"]))
    assert len(response["action_ranges"]) == len(turns)
    # The model saw the suite's tools, then each tool reply as a template-rendered <tool_response> turn.
    assert (
        '"name": "' + task.ground_truth(suite.load_and_inject_default_environment({}))[0].function
        in engine.prompts[0]
    )
    assert all("<tool_response>" in p for p in engine.prompts[1:])
    assert engine.prompts[-1].endswith("<|im_start|>assistant\n")


def test_a_malformed_call_ends_the_rollout_invalid(cases: dict[str, dict[str, Any]]) -> None:
    response, _ = _rollout(cases["banking:user_task_0"], _turns(cases["banking:user_task_0"], "malformed"))
    assert len(response["action_ranges"]) == 1
    assert {k: float(v) for k, v in response["extra_logs"].items() if k.endswith("_reward")} == {
        "utility_reward": 0.0,
        "safety_reward": 0.0,
        "joint_reward": 0.0,
        "format_reward": 0.0,
        "valid_reward": 0.0,
    }


def test_the_turn_budget_ends_the_rollout(
    cases: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRGRPO_AGENT_MAX_TURNS", "1")
    case = cases["banking:user_task_0"]
    response, _ = _rollout(case, _turns(case, "solve"))
    assert len(response["action_ranges"]) == 1
    assert float(response["extra_logs"]["valid_reward"]) == 1.0  # scored, not invalid


def test_a_rollout_cut_by_the_token_budget_still_carries_every_component(
    cases: dict[str, dict[str, Any]],
) -> None:
    case = cases["banking:user_task_0"]
    full, _ = _rollout(case, _turns(case, "solve"))
    # A budget that ends exactly where the second turn would start: the executor stops before it, so
    # no final step runs.
    cut, _ = _rollout(case, _turns(case, "solve"), max_length=full["action_ranges"][1][0])
    assert len(cut["action_ranges"]) == 1
    assert set(cut["extra_logs"]) >= {"utility_reward", "safety_reward"}
    assert cut["reward"] == pytest.approx(
        float(cut["extra_logs"]["utility_reward"]) + float(cut["extra_logs"]["safety_reward"])
    )
    assert float(cut["extra_logs"]["valid_reward"]) == 1.0  # scored on the state it reached


def test_every_prompt_is_the_templates_rendering_of_the_conversation(
    cases: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from corrgrpo_tasks.agent_security import default_system_message
    from corrgrpo_tasks.agent_security._episode import suite_tool_schemas

    monkeypatch.setenv("CORRGRPO_AGENT_MAX_PARALLEL_CALLS", "2")
    case = cases["banking:user_task_0"]
    turns = _turns(case, "parallel")
    response, engine = _rollout(case, turns)
    assert len(response["action_ranges"]) == 2
    tokenizer = engine.tokenizer
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": default_system_message()},
        {"role": "user", "content": case["prompt"]},
    ]
    replies = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", engine.prompts[1], re.DOTALL)
    assert len(replies) == 2  # both calls of the one turn ran, each reply in its own block
    messages += [
        {"role": "assistant", "content": turns[0]},
        *({"role": "tool", "content": r} for r in replies),
    ]
    expected = tokenizer.apply_chat_template(
        messages,
        tools=suite_tool_schemas(BENCHMARK_VERSION, "banking"),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert engine.prompts[1] == expected
    assert response["prompt"] == "ignored: re-rendered with tools"  # the dataset's prompt, for eval metrics


def test_the_response_budget_counts_every_turn_and_reply(
    cases: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = cases["banking:user_task_0"]
    full, _ = _rollout(case, _turns(case, "solve"))
    prompt_end = full["action_ranges"][0][0]
    monkeypatch.setenv("CORRGRPO_AGENT_MAX_RESPONSE", str(full["action_ranges"][1][0] - prompt_end))
    cut, _ = _rollout(case, _turns(case, "solve"))
    assert cut["action_ranges"] == full["action_ranges"][:1]
