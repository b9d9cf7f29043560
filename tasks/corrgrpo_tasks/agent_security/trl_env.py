"""AgentDojo cases as TRL environments (``GRPOTrainer(environment_factory=...)``) and TRL reward functions.

TRL (>= 1.16, with transformers >= 5.2) runs multi-turn tool use itself: it shows each environment's
public methods to the model as tools, executes the calls it parses, and passes the environments to the
reward functions. One environment class per AgentDojo suite, keyed by suite name
(:func:`environment_factories`): each row's ``environment`` column names its suite, ``reset`` loads the
row's case as an :class:`AgentDojoEpisode`, each suite tool is a method that runs the call on it, and
the rewards are the checker results, scored by :func:`compute_score`. Needs ``agentdojo``; TRL itself is
not imported here.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrgrpo_tasks.agent_security._data import BENCHMARK_VERSION, CASE_KEY, SUITES
from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode, truncate_middle
from corrgrpo_tasks.agent_security._reward import (
    COMPONENTS,
    DATA_SOURCE,
    INVALID_REWARD,
    RESULT_KEY,
    compute_score,
)

__all__ = ["AgentDojoEnvironment", "environment_factories", "final_output", "trl_reward_functions"]

_SPACES = re.compile(r"\s+")


class AgentDojoEnvironment:
    """Base of the per-suite environment classes; the suite's tools are added as methods."""

    suite = ""
    benchmark_version = BENCHMARK_VERSION
    max_tool_response_length = 2048
    """Tool output longer than this keeps its head and tail (verl's middle truncation). TRL itself does
    not truncate: it drops a tool result that would overflow ``max_completion_length`` from the
    completion, although the call has already changed the environment."""

    def __init__(self) -> None:
        self.episode: AgentDojoEpisode | None = None
        self._results: dict[tuple[str, bool], dict[str, Any]] = {}

    def reset(self, **example: Any) -> None:
        """Load the example's case (``agentdojo_case_json`` at the top level or in ``extra_info``)."""
        text = example.get(CASE_KEY)
        if text is None and isinstance(example.get("extra_info"), Mapping):
            text = example["extra_info"].get(CASE_KEY)
        if text is None:
            raise ValueError(
                f"an AgentDojo example needs {CASE_KEY!r} (in extra_info, as prepare() writes it)"
            )
        if not isinstance(text, str):
            raise TypeError(f"{CASE_KEY!r} must be a JSON string, got {type(text).__name__}")
        case = json.loads(text)
        if case.get("suite") != self.suite:
            raise ValueError(
                f"case {case.get('case_id')!r} is from suite {case.get('suite')!r}, but this "
                f"environment is {self.suite!r}: the row's 'environment' must be its suite"
            )
        self.episode = AgentDojoEpisode(case)
        self._results = {}

    def _run(self, name: str, arguments: dict[str, Any]) -> str:
        if self.episode is None:
            raise RuntimeError("reset() was not called before a tool call")
        return truncate_middle(self.episode.call(name, arguments), self.max_tool_response_length)

    def _checked(self, output: str, *, format_valid: bool) -> dict[str, Any]:
        """AgentDojo's checkers on the final state, once per (output, validity)."""
        if self.episode is None:
            raise RuntimeError("reset() was not called before scoring")
        key = (output, format_valid)
        if key not in self._results:
            self.episode.format_valid = format_valid
            self._results[key] = self.episode.result(output)
        return self._results[key]


def _one_line(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _tool_method(function: Any) -> Callable[..., str]:
    """A method whose signature, type hints and Google-style docstring give TRL (through transformers'
    ``get_json_schema``) the AgentDojo function's schema; calling it runs the function on the episode."""
    name = function.name
    fields = function.parameters.model_fields

    def method(self: AgentDojoEnvironment, **arguments: Any) -> str:
        return self._run(name, arguments)

    required = [n for n, f in fields.items() if f.is_required()]
    optional = [n for n, f in fields.items() if not f.is_required()]
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=fields[n].annotation)
        for n in required
    ]
    params += [
        inspect.Parameter(
            n,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=fields[n].annotation,
            default=fields[n].default,
        )
        for n in optional
    ]
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = {**{n: f.annotation for n, f in fields.items()}, "return": str}
    method.__name__ = method.__qualname__ = name
    args = "".join(f"\n    {n}: {_one_line(f.description or n)}" for n, f in fields.items())
    method.__doc__ = (
        f"{_one_line(function.description)}\n\nArgs:{args}\n\nReturns:\n    The tool's output."
        if fields
        else f"{_one_line(function.description)}\n\nReturns:\n    The tool's output."
    )
    return method


def _suite_class(
    suite: str, benchmark_version: str, max_tool_response_length: int
) -> type[AgentDojoEnvironment]:
    from agentdojo.task_suite.load_suites import get_suite

    tools = get_suite(benchmark_version, suite).tools
    namespace: dict[str, Any] = {
        "suite": suite,
        "benchmark_version": benchmark_version,
        "max_tool_response_length": max_tool_response_length,
        "__doc__": f"The AgentDojo {suite} suite ({benchmark_version}) as a TRL environment.",
    }
    namespace.update({function.name: _tool_method(function) for function in tools})
    return type(f"AgentDojo{suite.capitalize()}Environment", (AgentDojoEnvironment,), namespace)


def environment_factories(
    *,
    suites: Sequence[str] = SUITES,
    benchmark_version: str = BENCHMARK_VERSION,
    max_tool_response_length: int = 2048,
) -> dict[str, type[AgentDojoEnvironment]]:
    """``{suite: environment class}`` for ``GRPOTrainer(environment_factory=...)``; rows name their
    suite in an ``environment`` column. Every tool of the suite is offered (a row's ``tool_selection``
    is verl's; TRL shows one tool list per environment)."""
    if max_tool_response_length < 32:
        raise ValueError(f"max_tool_response_length must be at least 32, got {max_tool_response_length}")
    return {suite: _suite_class(suite, benchmark_version, max_tool_response_length) for suite in suites}


def final_output(completion: Any) -> str:
    """The text of the last assistant message of a conversational completion (AgentDojo's output)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


_TAGS = ("<tool_call>", "</tool_call>")


def _format_valid(completion: Any, tool_names: Sequence[str]) -> bool:
    """False when a turn left tool-call tags TRL could not parse or called a tool the suite lacks.

    TRL puts a turn it cannot parse back as text, decoded without special tokens; so this assumes the
    tags are ordinary tokens, as in Qwen2.5's tokenizer.
    """
    if isinstance(completion, str):
        return not any(tag in completion for tag in _TAGS)
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        if any(tag in str(message.get("content") or "") for tag in _TAGS):
            return False
        for call in message.get("tool_calls") or ():
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            if function.get("name") not in tool_names or not isinstance(
                function.get("arguments", {}), Mapping
            ):
                return False
    return True


def trl_reward_functions(
    *, utility_weight: float = 1.0, safety_weight: float = 1.0, invalid_reward: float = INVALID_REWARD
) -> list[Callable[..., list[float]]]:
    """``utility_reward`` and ``safety_reward`` (in :data:`COMPONENTS` order) for TRL: each reads the
    checker result of its rollout's environment, so the estimator gets the two components."""

    def scores(
        completions: Sequence[Any], environments: Sequence[AgentDojoEnvironment]
    ) -> list[dict[str, float]]:
        out = []
        for completion, env in zip(completions, environments, strict=True):
            names = env.episode.tool_names if env.episode is not None else []
            result = env._checked(final_output(completion), format_valid=_format_valid(completion, names))
            out.append(
                compute_score(
                    DATA_SOURCE,
                    "",
                    "",
                    {RESULT_KEY: result},
                    utility_weight=utility_weight,
                    safety_weight=safety_weight,
                    invalid_reward=invalid_reward,
                )
            )
        return out

    def utility_reward(
        completions: Sequence[Any], environments: Sequence[AgentDojoEnvironment], **_: Any
    ) -> list[float]:
        return [s["utility_reward"] for s in scores(completions, environments)]

    def safety_reward(
        completions: Sequence[Any], environments: Sequence[AgentDojoEnvironment], **_: Any
    ) -> list[float]:
        return [s["safety_reward"] for s in scores(completions, environments)]

    functions = {"utility_reward": utility_reward, "safety_reward": safety_reward}
    return [functions[name] for name in COMPONENTS]
