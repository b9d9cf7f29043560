"""OpenRLHF hands our rewards the completion as the model ended it, without chat or end-of-turn markers.

OpenRLHF 0.11.2 keeps special tokens: its single-turn executor decodes prompt + completion with
``skip_special_tokens=False`` for ``reward_func`` (``openrlhf/utils/agent.py``), and its vLLM sampling
keeps them in each turn's text for the multi-turn agent. These tests run OpenRLHF's own executors on a
real tokenizer whose end-of-turn ``<|im_end|>`` is the EOS special token; the only stand-in is the
vLLM engine (scripted token ids). Runs in ci/envs/openrlhf.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from corrgrpo_tasks._decoding import PROFILE_ENV, completion_text
from corrgrpo_tasks.gpu_smoke._tiny import QWEN_STYLE_TEMPLATE, byte_chat_tokenizer
from corrgrpo_tasks.recipes._builders import OPENRLHF_REWARD_FILES
from corrgrpo_tasks.tool_calling import compute_score

GT = '<think>plan</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>'
HEDGE = GT.replace("}}\n", '}}\n{"name": "f", "parameters": {"a": 2}}\n')


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return byte_chat_tokenizer(QWEN_STYLE_TEMPLATE)  # <|im_end|> is its EOS special token


class Engine:
    """vLLM's ``generate`` for one completion: its token ids then EOS, the text with it (as OpenRLHF's
    ``skip_special_tokens=False`` sampling returns it)."""

    def __init__(self, tokenizer: Any, completions: list[str]) -> None:
        self.tokenizer, self.completions = tokenizer, list(completions)

    async def generate(self, tokens: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        ids = [
            *self.tokenizer.encode(self.completions.pop(0), add_special_tokens=False),
            self.tokenizer.eos_token_id,
        ]
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return SimpleNamespace(
            outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)]
        )


def _single_turn(tokenizer: Any, completion: str) -> dict[str, Any]:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(str(OPENRLHF_REWARD_FILES["tool_calling"]))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "call f"}], tokenize=False, add_generation_prompt=True
    )
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    out: dict[str, Any] = asyncio.run(
        executor.execute(prompt, GT, params, 4096, tokenizer, Engine(tokenizer, [completion]))
    )
    return out


@pytest.mark.parametrize("profile", ["paper", "hardened"])
def test_single_turn_rewards_see_the_completion_without_markers(
    tokenizer: Any, profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROFILE_ENV, profile)
    for completion in (GT, HEDGE):
        out = _single_turn(tokenizer, completion)
        expected = compute_score("rlla", completion, GT, profile=profile)
        assert float(out["reward"]) == expected["score"]
        assert float(out["extra_logs"]["format_reward"]) == 1.0
    assert float(_single_turn(tokenizer, HEDGE)["reward"]) == {"paper": 3.5, "hardened": 1.0}[profile]


def test_completion_text_equals_a_decode_without_special_tokens(tokenizer: Any) -> None:
    prompt_ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True
    )
    prompt_ids = prompt_ids if isinstance(prompt_ids, list) else prompt_ids["input_ids"]
    for completion in (GT, "plain answer", "<think>x</think>\n<response>y</response>"):
        action = [*tokenizer.encode(completion, add_special_tokens=False), tokenizer.eos_token_id]
        # What OpenRLHF's executor hands reward_func: both decoded with special tokens kept.
        query = tokenizer.decode(prompt_ids + action, skip_special_tokens=False)
        prompt = tokenizer.decode(prompt_ids, skip_special_tokens=False)
        assert completion_text(query, prompt) == tokenizer.decode(action, skip_special_tokens=True)


def test_the_agent_judges_the_answer_without_markers(tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agentdojo")
    from openrlhf.trainer.ray.vllm_engine import _load_agent_executor

    from corrgrpo_tasks import agent_security
    from corrgrpo_tasks.agent_security import AgentDojoEpisode, build_cases

    case = next(
        c for c in build_cases(suites=["banking"], attacks=()) if c["case_id"] == "banking:user_task_1"
    )
    seen: list[str] = []
    result = AgentDojoEpisode.result

    def spy(self: AgentDojoEpisode, final_output: str) -> dict[str, Any]:
        seen.append(final_output)
        return result(self, final_output)

    monkeypatch.setattr(AgentDojoEpisode, "result", spy)
    call = json.dumps({"name": "get_most_recent_transactions", "arguments": {"n": 100}})
    answer = "You spent 1050 in March 2022."
    executor = _load_agent_executor(str(Path(agent_security.__file__).with_name("openrlhf_agent.py")))
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    engine = Engine(tokenizer, [f"I will look.\n<tool_call>\n{call}\n</tool_call>", answer])
    response = asyncio.run(executor.execute("ignored", json.dumps(case), params, 200_000, tokenizer, engine))
    assert seen == ["I will look.", answer]  # each step's answer: no call block, no <|im_end|>
    assert float(response["extra_logs"]["utility_reward"]) == 1.0
