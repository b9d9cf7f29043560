"""OpenRLHF's multi-turn agent for AgentDojo cases: ``--train.agent_func_path`` points at this file.

OpenRLHF's ``MultiTurnAgentExecutor`` runs the rollout (generation on vLLM, token bookkeeping, action
masks); it asks an agent instance to ``reset`` on the prompt and to ``step`` on every generated turn.
Here the label is the case (``reward_model.ground_truth``, the case JSON), and:

* ``execute`` re-renders the prompt with the suite's tools through the model's own chat template
  (OpenRLHF's data path renders it without tools);
* ``step`` reads the turn's hermes tool calls with the paper's parser and schema check (the one verl's
  and TRL's loops use), runs them on the case's :class:`AgentDojoEpisode` and
  returns the tool replies rendered by the same template; the rollout ends when a turn makes no call,
  a call is malformed or the turn budget is spent. Every step returns AgentDojo's checker result on the
  state so far, with the components in ``extra_logs`` (OpenRLHF keeps the last step's, in
  ``Experience.info``, where our estimator reads them), so a rollout cut by the token budget is scored
  on the state it reached, as verl does.

Loaded by path, so imports are absolute. Limits come from the environment (our OpenRLHF launcher
forwards them to the Ray actors): ``CORRGRPO_AGENT_MAX_TURNS`` (generations, default 8),
``CORRGRPO_AGENT_MAX_TOOL_RESPONSE`` (characters per tool reply, default 2048),
``CORRGRPO_AGENT_MAX_PARALLEL_CALLS`` (calls run per turn, default 1, the paper's value),
``CORRGRPO_AGENT_PROFILE`` (the reward's ``profile``, default ``paper``) and
``CORRGRPO_AGENT_MAX_RESPONSE`` (tokens after the prompt, all turns and replies together, as verl's
response length; default unlimited, i.e. OpenRLHF's ``max_len``). The work on the AgentDojo
environment runs in a thread, off the actor's event loop that drives vLLM.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode, suite_tool_schemas, truncate_middle
from corrgrpo_tasks.agent_security._reward import COMPONENTS, DATA_SOURCE, PROFILES, RESULT_KEY, compute_score
from corrgrpo_tasks.agent_security._tool_calls import ToolCall

_SENTINEL = "corrgrpo-assistant-turn"


def _limit(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _profile() -> str:
    profile = os.environ.get("CORRGRPO_AGENT_PROFILE", "paper")
    if profile not in PROFILES:
        raise ValueError(f"CORRGRPO_AGENT_PROFILE must be one of {PROFILES}, got {profile!r}")
    return profile


def without_special_tokens(tokenizer: Any, text: str) -> str:
    """``text`` without the tokenizer's special tokens (OpenRLHF's vLLM sampling keeps them)."""
    for token in getattr(tokenizer, "all_special_tokens", ()):
        text = text.replace(token, "")
    return text.strip()


def tool_feedback(tokenizer: Any, outputs: Sequence[tuple[str, str]]) -> str:
    """The text the chat template puts after an assistant turn for these tool replies, up to the next
    assistant header, minus the end-of-turn token the model already generated."""
    base = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
    tools = [{"role": "tool", "name": name, "content": text} for name, text in outputs]
    before = str(tokenizer.apply_chat_template(base, tokenize=False))
    after = str(tokenizer.apply_chat_template(base + tools, tokenize=False, add_generation_prompt=True))
    if not after.startswith(before):
        raise ValueError("the chat template does not render a conversation as a prefix of its continuation")
    turn_end = before[
        before.rindex(_SENTINEL) + len(_SENTINEL) :
    ]  # closes the assistant turn: "<|im_end|>\n"
    eos = tokenizer.eos_token or ""
    return turn_end.removeprefix(eos) + after[len(before) :]


class AgentDojoInstance(AgentInstanceBase):  # type: ignore[misc,unused-ignore]  # Any without openrlhf
    """One rollout: the case's episode, its turns, and the template-rendered tool replies."""

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer
        self.episode: AgentDojoEpisode | None = None
        self.turns = 0
        self._scored = 0.0
        self.max_turns = _limit("CORRGRPO_AGENT_MAX_TURNS", 8)
        self.max_tool_response = _limit("CORRGRPO_AGENT_MAX_TOOL_RESPONSE", 2048)
        self.max_parallel_calls = _limit("CORRGRPO_AGENT_MAX_PARALLEL_CALLS", 1)
        self.profile = _profile()

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.episode = await asyncio.to_thread(AgentDojoEpisode, json.loads(states["label"]))
        self.turns = 0
        self._scored = 0.0
        return {"observation": states["observation"]}

    def _advance(self, answer: str, calls: Sequence[ToolCall]) -> tuple[dict[str, float], str]:
        """Run the calls, render their replies, and score the state reached (blocking work)."""
        if self.episode is None:
            raise RuntimeError("step() before reset()")
        outputs = [
            (call.name, truncate_middle(self.episode.call(call.name, call.arguments), self.max_tool_response))
            for call in calls
        ]
        feedback = tool_feedback(self.tokenizer, outputs) if outputs else ""
        result = self.episode.result(answer)
        return compute_score(DATA_SOURCE, "", "", {RESULT_KEY: result}, profile=self.profile), feedback

    async def step(self, state_dict: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Run the turn's calls, or end the rollout, as the paper's verl loop does.

        The turn that reaches ``max_turns`` is not read (nor format-checked); its whole text is the
        answer. Any other turn is read with the paper's parser: its first ``max_parallel_calls`` accepted
        calls run, its text without call blocks is the answer so far, and the rollout ends when it made
        no call or a call was dropped (the trajectory is then invalid anyway). Every step is scored as
        if the rollout ended there (the checkers are cheap): OpenRLHF keeps the last step's
        ``extra_logs`` and the sum of the step rewards, and stops without a final step when the token
        budget runs out."""
        import torch

        if self.episode is None:
            raise RuntimeError("step() before reset()")
        text = state_dict["action_text"]
        self.turns += 1
        calls: list[ToolCall] = []
        if self.max_turns and self.turns >= self.max_turns:
            answer = without_special_tokens(self.tokenizer, text)
        else:
            turn = self.episode.record_turn(text)
            calls = list(turn.calls[: self.max_parallel_calls])
            answer = without_special_tokens(self.tokenizer, turn.content)
        done = not (calls and self.episode.format_valid)
        scores, feedback = await asyncio.to_thread(self._advance, answer, [] if done else calls)
        # Step rewards are differences, so their sum is always the latest score.
        reward, self._scored = scores["score"] - self._scored, scores["score"]
        return {
            "rewards": torch.tensor(reward),
            "scores": torch.tensor(scores["score"]),
            "done": done,
            "environment_feedback": feedback,
            "extra_logs": {k: torch.tensor(v) for k, v in scores.items() if k != "score"},
        }


class AgentExecutor(MultiTurnAgentExecutor):  # type: ignore[misc,unused-ignore]  # Any without openrlhf
    """What OpenRLHF loads from ``--train.agent_func_path``."""

    def __init__(self) -> None:
        super().__init__(AgentDojoInstance)
        self._tokenizer: Any = None
        self.agent_instance_cls = lambda: AgentDojoInstance(self._tokenizer)

    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        self._tokenizer = hf_tokenizer
        rendered = await asyncio.to_thread(render_prompt, label, hf_tokenizer)
        budget = os.environ.get("CORRGRPO_AGENT_MAX_RESPONSE")
        if budget is not None:  # verl's response length: every turn and reply after the prompt
            prompt_tokens = len(hf_tokenizer(text=rendered, add_special_tokens=False)["input_ids"])
            max_length = min(max_length, prompt_tokens + int(budget))
        response: dict[str, Any] = await super().execute(
            rendered, label, sampling_params, max_length, hf_tokenizer, llm_engine, images
        )
        response["prompt"] = prompt  # OpenRLHF files eval metrics under the dataset's own prompt
        return response


def render_prompt(label: str, tokenizer: Any) -> str:
    """The case's conversation (AgentDojo's system prompt, the user task) with its suite's tools."""
    from corrgrpo_tasks.agent_security._data import BENCHMARK_VERSION, default_system_message

    case: Mapping[str, Any] = json.loads(label)
    tools = suite_tool_schemas(case.get("benchmark_version") or BENCHMARK_VERSION, case["suite"])
    messages = [
        {"role": "system", "content": default_system_message()},
        {"role": "user", "content": case["prompt"]},
    ]
    return str(
        tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    )


__all__ = ["COMPONENTS", "AgentDojoInstance", "AgentExecutor", "render_prompt", "tool_feedback"]
