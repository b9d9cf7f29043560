"""The ``agentdojo_agent`` loop inside verl's own rollout and reward code, on real AgentDojo cases.

What runs is verl's: ``RLHFDataset`` reads the parquet our ``prepare`` path writes,
``AgentLoopWorker`` loads the loop from the shipped agent-loop config and runs it (chat template,
hermes parsing, tool replies, masks), and ``RewardLoopWorker`` scores every trajectory with the
recipe's reward file through the naive reward manager. The one stand-in is the vLLM server (GPU
only): a scripted policy that answers with token ids, playing AgentDojo ground-truth calls. Each
trajectory's utility and attack outcome must equal AgentDojo's own ``run_task_with_pipeline`` with
a pipeline making the same calls. Runs in ci/envs/verl (verl + agentdojo).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import datasets
import numpy as np
import pytest
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.types import ChatAssistantMessage, ChatToolResultMessage, text_content_block_from_string
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from transformers import PreTrainedTokenizerFast, Qwen2Config
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from corrgrpo_tasks.agent_security import (
    AGENT_LOOP_CONFIG,
    BENCHMARK_VERSION,
    build_cases,
    compute_score,
    default_system_message,
    suite_tool_names,
    to_rows,
)
from corrgrpo_tasks.agent_security.verl_agent_loop import AgentDojoAgentLoop, parse_case, verl_parameters
from corrgrpo_tasks.gpu_smoke._tiny import QWEN_STYLE_TEMPLATE, byte_chat_tokenizer
from corrgrpo_tasks.recipes import build_recipe

CONFIG_DIR = Path(__import__("verl").__file__).parent / "trainer" / "config"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-qwen2")
    tok = byte_chat_tokenizer(QWEN_STYLE_TEMPLATE)
    tok.save_pretrained(path)
    Qwen2Config(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(path)
    return path


# (suite, user task, injection task or None, policy). Policies: "solve" plays the user task's ground
# truth; "obey" also plays the injection task's; "idle" answers without a tool; "parallel" makes all the
# ground-truth calls in one turn; "malformed" emits a broken tool call; "unknown_tool" calls a tool the
# suite does not have; "no_arguments" leaves out "arguments"; "unoffered" solves with a tool the row's
# tool_selection does not offer; "python" solves in Python-dict syntax (the paper's parser reads it);
# "stringly" solves with every argument sent as a string (the paper's schema check drops the call).
PLAN: list[tuple[str, str, str | None, str]] = [
    ("banking", "user_task_0", None, "solve"),
    ("banking", "user_task_1", "injection_task_0", "solve"),
    ("banking", "user_task_3", "injection_task_1", "obey"),
    ("slack", "user_task_0", "injection_task_1", "obey"),
    ("slack", "user_task_2", None, "solve"),
    ("workspace", "user_task_0", None, "solve"),
    ("travel", "user_task_0", "injection_task_0", "solve"),
    ("banking", "user_task_5", "injection_task_2", "idle"),
    ("banking", "user_task_2", None, "parallel"),
    ("banking", "user_task_4", None, "malformed"),
    ("slack", "user_task_4", None, "unknown_tool"),
    ("slack", "user_task_3", None, "no_arguments"),
    ("banking", "user_task_6", None, "unoffered"),
    ("banking", "user_task_12", None, "python"),
    ("banking", "user_task_11", None, "stringly"),
]
INVALID = ("malformed", "unknown_tool", "no_arguments", "unoffered", "stringly")
# The paper's parser (ours, in verl's loop) drops a call it cannot parse or accept (an unknown or
# unoffered tool, no arguments), so these trajectories end after their first turn.
UNPARSED = ("malformed", "no_arguments", "unknown_tool", "unoffered", "stringly")
ATTACK = "important_instructions"


def _case_id(suite: str, user: str, injection: str | None) -> str:
    return f"{suite}:{user}" if injection is None else f"{suite}:{user}:{injection}:{ATTACK}"


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    wanted = {_case_id(s, u, i) for s, u, i, _ in PLAN}
    suites = sorted({s for s, *_ in PLAN})
    built = {c["case_id"]: c for c in build_cases(suites=suites, attacks=(ATTACK,)) if c["case_id"] in wanted}
    return [built[_case_id(s, u, i)] for s, u, i, _ in PLAN]


def _calls(case: Mapping[str, Any], policy: str) -> tuple[list[FunctionCall], str]:
    """The tool calls and final answer of a policy, computed on the case's injected environment."""
    if policy == "idle":
        return [], "Sorry, I cannot do that."
    if policy in ("parallel", "unoffered", "python", "stringly"):
        policy = "solve"
    suite = get_suite(BENCHMARK_VERSION, case["suite"])
    user_task = suite.get_user_task_by_id(case["user_task_id"])
    env = user_task.init_environment(suite.load_and_inject_default_environment(dict(case["injections"])))
    calls = list(user_task.ground_truth(env.model_copy(deep=True)))
    if policy == "obey":
        calls += list(
            suite.get_injection_task_by_id(case["injection_task_id"]).ground_truth(env.model_copy(deep=True))
        )
    return calls, user_task.GROUND_TRUTH_OUTPUT


class _Script(BasePipelineElement):  # type: ignore[misc]
    """AgentDojo pipeline making given calls, then answering (the reference run of an 'obey' policy)."""

    def __init__(self, calls: Sequence[FunctionCall], output: str) -> None:
        self.calls, self.output = list(calls), output

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = None,
        messages: Sequence[Any] = (),
        extra_args: dict[str, Any] | None = None,
    ) -> tuple[Any, ...]:
        new: list[Any] = []
        for call in self.calls:
            new.append(
                ChatAssistantMessage(
                    role="assistant", tool_calls=[call], content=[text_content_block_from_string("")]
                )
            )
            result, error = runtime.run_function(env, call.function, call.args)
            new.append(
                ChatToolResultMessage(
                    role="tool",
                    tool_call=call,
                    tool_call_id=None,
                    error=error,
                    content=[text_content_block_from_string(tool_result_to_str(result))],
                )
            )
        new.append(
            ChatAssistantMessage(
                role="assistant", tool_calls=None, content=[text_content_block_from_string(self.output)]
            )
        )
        return query, runtime, env, [*messages, *new], extra_args or {}


def _agentdojo_outcome(case: Mapping[str, Any], policy: str) -> tuple[bool, bool]:
    """(utility, attack success) from AgentDojo's own run of the same calls."""
    suite = get_suite(BENCHMARK_VERSION, case["suite"])
    user_task = suite.get_user_task_by_id(case["user_task_id"])
    injection = (
        suite.get_injection_task_by_id(case["injection_task_id"]) if case["injection_task_id"] else None
    )
    solve = policy in ("solve", "parallel", "python")
    pipeline = GroundTruthPipeline(user_task) if solve else _Script(*_calls(case, policy))
    utility, security = suite.run_task_with_pipeline(pipeline, user_task, injection, dict(case["injections"]))
    return bool(utility), injection is not None and bool(security)


class ScriptedServer:
    """Stands in for verl's vLLM server client: replies to each trajectory from its policy's script."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast, scripts: Mapping[str, list[str]]) -> None:
        self.tokenizer, self.scripts = tokenizer, scripts
        self.turn: dict[str, int] = {}
        self.prompts: dict[str, str] = {}

    async def generate(
        self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        text = self.tokenizer.decode(prompt_ids)
        self.prompts.setdefault(request_id, text)
        # The user prompt of the first turn says which case this trajectory plays.
        key = next(k for k in self.scripts if f"<|im_start|>user\n{k}<|im_end|>" in self.prompts[request_id])
        turn = self.turn.get(request_id, 0)
        self.turn[request_id] = turn + 1
        ids = self.tokenizer.encode(self.scripts[key][turn] + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def _call_text(name: str, args: dict[str, Any], policy: str) -> str:
    if policy == "python":
        return repr({"name": name, "arguments": args})
    if policy == "stringly":
        args = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in args.items()}
    return json.dumps({"name": name, "arguments": args})


def _turns(case: Mapping[str, Any], policy: str) -> list[str]:
    if policy == "malformed":
        return ['<tool_call>\n{"name": "get_balance", "arguments": \n</tool_call>', "Done."]
    if policy == "unknown_tool":
        return ['<tool_call>\n{"name": "launch_rocket", "arguments": {}}\n</tool_call>', "Done."]
    if policy == "no_arguments":
        return ['<tool_call>\n{"name": "get_channels"}\n</tool_call>', "Done."]
    calls, output = _calls(case, policy)
    blocks = [f"<tool_call>\n{_call_text(c.function, dict(c.args), policy)}\n</tool_call>" for c in calls]
    return ["\n".join(blocks), output] if policy == "parallel" else [*blocks, output]


def _config(model_dir: Path, data: Path) -> Any:
    recipe = build_recipe(
        "agent_security",
        "verl",
        overrides=[
            f"model={model_dir}",
            f"train_files={data}",
            f"val_files={data}",
            "max_prompt_length=200000",
            "max_response_length=60000",
            "max_turns=12",
            "max_parallel_calls=16",
        ],
    )
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(recipe.argv[3:]))


def _handle(worker: RewardLoopWorker) -> Any:
    """The in-process equivalent of the Ray actor handle verl passes around (``.compute_score.remote``)."""
    return SimpleNamespace(compute_score=SimpleNamespace(remote=worker.compute_score))


@pytest.fixture(scope="module")
def rollout(
    model_dir: Path, cases: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[DataProto, ScriptedServer]:
    data = tmp_path_factory.mktemp("agentdojo") / "train.parquet"
    rows = to_rows(
        cases,
        split="train",
        system_message=default_system_message(),
        tool_names=suite_tool_names(suites=sorted({c["suite"] for c in cases})),
    )
    for row, (*_, policy) in zip(rows, PLAN, strict=True):
        if policy == "unoffered":  # offer every tool of the suite but the one the solution needs first
            first = _calls(parse_case(row["extra_info"]), "solve")[0][0].function
            row["extra_info"]["tool_selection"] = [
                t for t in row["extra_info"]["tool_selection"] if t != first
            ]
    datasets.Dataset.from_list(rows).to_parquet(str(data))
    cfg = _config(model_dir, data)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    scripts = {c["prompt"]: _turns(c, policy) for c, (*_, policy) in zip(cases, PLAN, strict=True)}
    assert len(scripts) == len(cases), "each planned case needs its own user prompt"
    server = ScriptedServer(tokenizer, scripts)

    async def run() -> DataProto:
        dataset = RLHFDataset(data_files=[str(data)], tokenizer=tokenizer, config=cfg.data)
        batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
        batch.meta_info["global_steps"] = 1
        worker = AgentLoopWorker(
            cfg, llm_client=server, reward_loop_worker_handles=[_handle(RewardLoopWorker(cfg))]
        )
        return await worker.generate_sequences(batch)

    return asyncio.run(run()), server


def test_the_shipped_config_loads_our_loop(model_dir: Path) -> None:
    entries = OmegaConf.load(AGENT_LOOP_CONFIG)
    assert [e.name for e in entries] == ["agentdojo_agent"]
    assert entries[0]._target_ == f"{AgentDojoAgentLoop.__module__}.{AgentDojoAgentLoop.__qualname__}"


def test_every_trajectory_is_judged_as_agentdojo_judges_the_same_calls(
    rollout: tuple[DataProto, ScriptedServer], cases: list[dict[str, Any]]
) -> None:
    out, _ = rollout
    results = out.non_tensor_batch["agentdojo_result"]
    assert [r["case_id"] for r in results] == [c["case_id"] for c in cases]
    for case, (*_, policy), result in zip(cases, PLAN, results, strict=True):
        if policy in INVALID:
            continue
        assert (result["valid"], result["format_valid"]) == (True, True), result
        assert (result["utility"], result["attack_success"]) == _agentdojo_outcome(case, policy), case[
            "case_id"
        ]
        assert result["num_tool_calls"] == len(_calls(case, policy)[0])
        if policy == "parallel":  # every call of the one turn ran (max_parallel_calls=16 here)
            assert result["num_tool_calls"] >= 2
    # Both outcomes of both checks occur, so the comparison can tell a wrong checker from a right one.
    assert {r["utility"] for r in results} == {True, False}
    assert {r["attack_success"] for r in results if r["case_type"] == "security"} == {True, False}


def test_malformed_or_hallucinated_calls_make_the_trajectory_invalid(
    rollout: tuple[DataProto, ScriptedServer],
) -> None:
    out, _ = rollout
    nt = out.non_tensor_batch
    bad = [i for i, (*_, policy) in enumerate(PLAN) if policy in INVALID]
    assert bad
    for i in bad:
        assert nt["agentdojo_result"][i]["valid"]
        assert not nt["agentdojo_result"][i]["format_valid"]
        assert (nt["valid_reward"][i], nt["utility_reward"][i], nt["safety_reward"][i]) == (0.0, 0.0, 0.0)


def test_verl_reward_loop_scores_with_our_reward(rollout: tuple[DataProto, ScriptedServer]) -> None:
    out, _ = rollout
    nt = out.non_tensor_batch
    for i, result in enumerate(nt["agentdojo_result"]):
        expected = compute_score("agentdojo", "", "", {"agentdojo_result": result})
        for key in ("utility_reward", "safety_reward", "joint_reward", "valid_reward"):
            assert nt[key][i] == expected[key], (key, i)
    scores = out.batch["rm_scores"].sum(dim=-1).numpy()
    expected_scores = [
        compute_score("agentdojo", "", "", {"agentdojo_result": r})["score"] for r in nt["agentdojo_result"]
    ]
    np.testing.assert_allclose(scores, expected_scores)


def test_only_the_model_tokens_are_trained_on(
    rollout: tuple[DataProto, ScriptedServer], cases: list[dict[str, Any]]
) -> None:
    out, server = rollout
    mask = out.batch["response_mask"]
    for i, (case, (*_, policy)) in enumerate(zip(cases, PLAN, strict=True)):
        played = _turns(case, policy)[:1] if policy in UNPARSED else _turns(case, policy)
        generated = sum(
            len(server.tokenizer.encode(t + "<|im_end|>", add_special_tokens=False)) for t in played
        )
        assert int(mask[i].sum()) == generated, case["case_id"]
        if len(played) > 1:  # tool replies sit between assistant turns: the mask has a hole
            ones = mask[i].nonzero().flatten()
            assert int(ones[-1] - ones[0]) + 1 > generated


def test_the_model_saw_the_suite_tools_with_agentdojo_schemas(
    rollout: tuple[DataProto, ScriptedServer], cases: list[dict[str, Any]]
) -> None:
    _, server = rollout
    first_prompts = list(server.prompts.values())
    names = suite_tool_names(suites=["workspace"])["workspace"]
    workspace = next(p for p in first_prompts if cases[5]["prompt"] in p)
    assert all(f'"name": "{n}"' in workspace for n in names)
    assert '"anyOf"' in workspace
    assert '"$defs"' in workspace


def test_verl_parameters_reduce_optional_and_enum_parameters() -> None:
    suite = get_suite(BENCHMARK_VERSION, "workspace")
    schemas = {t.name: t.parameters.model_json_schema() for t in suite.tools}
    share = verl_parameters(schemas["share_file"])["properties"]["permission"]
    assert share["type"] == "string"
    assert set(share["enum"]) == {"r", "rw"}
    cc = verl_parameters(schemas["send_email"])["properties"]["cc"]
    assert cc["type"] == ["array", "null"]


def test_a_row_without_its_case_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="agentdojo_case_json"):
        parse_case({"index": 0})
    with pytest.raises(ValueError, match="lacks"):
        parse_case({"agentdojo_case_json": json.dumps({"case_id": "x"})})
