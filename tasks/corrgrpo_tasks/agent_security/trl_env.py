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

import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrgrpo_tasks.agent_security._data import BENCHMARK_VERSION, CASE_KEY, SUITES
from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode, suite_tool_parameters, truncate_middle
from corrgrpo_tasks.agent_security._reward import (
    COMPONENTS,
    DATA_SOURCE,
    INVALID_REWARD,
    PROFILES,
    RESULT_KEY,
    compute_score,
)
from corrgrpo_tasks.agent_security._tool_calls import CLOSE_TAG, OPEN_TAG, parse_turn, validate_arguments

__all__ = [
    "TURN_KEY",
    "AgentDojoEnvironment",
    "environment_factories",
    "final_output",
    "install_paper_parser",
    "trl_reward_functions",
]

_SPACES = re.compile(r"\s+")
TURN_KEY = "corrgrpo_turn"
"""Key of an assistant message parsed by :func:`install_paper_parser`: ``{"format_valid": bool,
"text": the turn's text without special tokens}``."""


@functools.lru_cache(maxsize=4)
def _all_parameters(benchmark_version: str) -> dict[str, dict[str, Any]]:
    """Reduced parameter schemas of every AgentDojo tool (a name means the same tool in every suite)."""
    merged: dict[str, dict[str, Any]] = {}
    for suite in SUITES:
        merged.update(suite_tool_parameters(benchmark_version, suite))
    return merged


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        return str(tool.get("function", tool).get("name"))
    return str(getattr(tool, "__name__", ""))


def install_paper_parser(
    tokenizer: Any, *, max_parallel_calls: int = 1, benchmark_version: str = BENCHMARK_VERSION
) -> Any:
    """Make TRL's tool loop read AgentDojo turns with the paper's parser and schema check.

    TRL parses each generated turn with ``tokenizer.parse_response``; this replaces that method on
    ``tokenizer`` (the instance, returned) with :func:`~corrgrpo_tasks.agent_security.parse_turn` on
    the turn decoded with special tokens kept, against the offered tools' schemas. The message it
    returns holds the turn's text without call blocks and special tokens, its first
    ``max_parallel_calls`` accepted calls (TRL runs them all), and under :data:`TURN_KEY` the turn's
    validity, which :func:`trl_reward_functions` reads.
    """
    special = tuple(getattr(tokenizer, "all_special_tokens", ()))

    def clean(text: str) -> str:
        for token in special:
            text = text.replace(token, "")
        return text.strip()

    def parse_response(
        ids: Any, prefix: Any = None, tools: Sequence[Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        text = ids if isinstance(ids, str) else str(tokenizer.decode(list(ids), skip_special_tokens=False))
        schemas = _all_parameters(benchmark_version)
        offered = schemas if tools is None else {n: schemas.get(n) for n in map(_tool_name, tools)}
        turn = parse_turn(text, offered)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": clean(turn.content),
            TURN_KEY: {"format_valid": turn.format_valid, "text": clean(text)},
        }
        calls = turn.calls[:max_parallel_calls]
        if calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c.name, "arguments": dict(c.arguments)}}
                for c in calls
            ]
        return message

    tokenizer.parse_response = parse_response
    return tokenizer


class AgentDojoEnvironment:
    """Base of the per-suite environment classes; the suite's tools are added as methods."""

    suite = ""
    benchmark_version = BENCHMARK_VERSION
    max_tool_response_length = 2048
    """Tool output longer than this keeps its head and tail (verl's middle truncation). TRL itself does
    not truncate: it drops a tool result that would overflow ``max_completion_length`` from the
    completion, although the call has already changed the environment."""
    max_turns: int | None = None
    """Generations per rollout (TRL's ``max_tool_calling_iterations`` + 1): a rollout that used them all
    ended on a turn the paper's loop does not read, so that turn's format does not count."""
    max_completion_tokens: int | None = None
    """TRL's ``max_completion_length``: a rollout that filled it ended on a cut turn, likewise."""

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
    suite: str,
    benchmark_version: str,
    max_tool_response_length: int,
    max_turns: int | None = None,
    max_completion_tokens: int | None = None,
) -> type[AgentDojoEnvironment]:
    from agentdojo.task_suite.load_suites import get_suite

    tools = get_suite(benchmark_version, suite).tools
    namespace: dict[str, Any] = {
        "suite": suite,
        "benchmark_version": benchmark_version,
        "max_tool_response_length": max_tool_response_length,
        "max_turns": max_turns,
        "max_completion_tokens": max_completion_tokens,
        "__doc__": f"The AgentDojo {suite} suite ({benchmark_version}) as a TRL environment.",
    }
    namespace.update({function.name: _tool_method(function) for function in tools})
    return type(f"AgentDojo{suite.capitalize()}Environment", (AgentDojoEnvironment,), namespace)


def environment_factories(
    *,
    suites: Sequence[str] = SUITES,
    benchmark_version: str = BENCHMARK_VERSION,
    max_tool_response_length: int = 2048,
    max_turns: int | None = None,
    max_completion_tokens: int | None = None,
) -> dict[str, type[AgentDojoEnvironment]]:
    """``{suite: environment class}`` for ``GRPOTrainer(environment_factory=...)``; rows name their
    suite in an ``environment`` column. Every tool of the suite is offered (a row's ``tool_selection``
    is verl's; TRL shows one tool list per environment). ``max_turns`` and ``max_completion_tokens``
    are the rollout limits TRL runs with (see :class:`AgentDojoEnvironment`)."""
    if max_tool_response_length < 32:
        raise ValueError(f"max_tool_response_length must be at least 32, got {max_tool_response_length}")
    return {
        suite: _suite_class(
            suite, benchmark_version, max_tool_response_length, max_turns, max_completion_tokens
        )
        for suite in suites
    }


def final_output(completion: Any) -> str:
    """The text of the last assistant message of a conversational completion (AgentDojo's output)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _assistant_turns(completion: Any) -> list[Mapping[str, Any]]:
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    return [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]


def _turn_valid(message: Mapping[str, Any], parameters: Mapping[str, Mapping[str, Any]]) -> bool:
    """One assistant turn's validity: as :func:`install_paper_parser` recorded it, else (a turn TRL's
    own parser read) no tool-call tag left in its text and every parsed call offered and valid."""
    turn = message.get(TURN_KEY)
    if isinstance(turn, Mapping):
        return bool(turn.get("format_valid"))
    content = str(message.get("content") or "")
    if OPEN_TAG in content or CLOSE_TAG in content:  # tags TRL's parser could not read
        return False
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        name, arguments = str(function.get("name")), function.get("arguments", {})
        if name not in parameters or not isinstance(arguments, Mapping):
            return False
        try:
            validate_arguments(arguments, parameters[name])
        except ValueError:
            return False
    return True


def _read(
    completion: Any, env: AgentDojoEnvironment, completion_ids: Sequence[int] | None
) -> tuple[bool, str]:
    """(format validity, final answer) of a rollout, as the paper's loop would judge it: the last turn
    does not count, and its whole text is the answer, when a turn or token limit cut it."""
    turns = _assistant_turns(completion)
    parameters = env.episode.tool_parameters() if env.episode is not None else {}
    cut = bool(turns) and (
        (env.max_turns is not None and len(turns) >= env.max_turns)
        or (
            env.max_completion_tokens is not None
            and completion_ids is not None
            and len(completion_ids) >= env.max_completion_tokens
        )
    )
    checked = turns[:-1] if cut else turns
    valid = all(_turn_valid(m, parameters) for m in checked)
    if cut:
        last = turns[-1]
        recorded = last.get(TURN_KEY)
        answer = (
            str(recorded.get("text", "")) if isinstance(recorded, Mapping) else str(last.get("content") or "")
        )
        return valid, answer
    return valid, final_output(completion)


def trl_reward_functions(
    *,
    utility_weight: float = 1.0,
    safety_weight: float = 1.0,
    invalid_reward: float = INVALID_REWARD,
    profile: str = "paper",
) -> list[Callable[..., list[float]]]:
    """``utility_reward`` and ``safety_reward`` (in :data:`COMPONENTS` order) for TRL: each reads the
    checker result of its rollout's environment, so the estimator gets the two components.
    ``profile`` is :func:`compute_score`'s (``"paper"`` or ``"hardened"``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")

    def scores(
        completions: Sequence[Any],
        environments: Sequence[AgentDojoEnvironment],
        completion_ids: Sequence[Sequence[int]] | None,
    ) -> list[dict[str, float]]:
        out = []
        ids: Sequence[Sequence[int] | None] = (
            completion_ids if completion_ids is not None else [None] * len(completions)
        )
        for completion, env, token_ids in zip(completions, environments, ids, strict=True):
            valid, answer = _read(completion, env, token_ids)
            result = env._checked(answer, format_valid=valid)
            out.append(
                compute_score(
                    DATA_SOURCE,
                    "",
                    "",
                    {RESULT_KEY: result},
                    utility_weight=utility_weight,
                    safety_weight=safety_weight,
                    invalid_reward=invalid_reward,
                    profile=profile,
                )
            )
        return out

    def utility_reward(
        completions: Sequence[Any],
        environments: Sequence[AgentDojoEnvironment],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **_: Any,
    ) -> list[float]:
        return [s["utility_reward"] for s in scores(completions, environments, completion_ids)]

    def safety_reward(
        completions: Sequence[Any],
        environments: Sequence[AgentDojoEnvironment],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **_: Any,
    ) -> list[float]:
        return [s["safety_reward"] for s in scores(completions, environments, completion_ids)]

    functions = {"utility_reward": utility_reward, "safety_reward": safety_reward}
    return [functions[name] for name in COMPONENTS]


def _with_environment(dataset: Any) -> Any:
    """AgentDojo rows with TRL's ``environment`` column: the case's suite."""
    if "environment" in dataset.column_names:
        return dataset
    return dataset.map(lambda row: {"environment": row["extra_info"]["suite"]})


def trl_episode_setup(
    train: Any, evaluation: Any, processing_class: Any, config: Mapping[str, Any]
) -> tuple[Any, Any, dict[str, Any]]:
    """The recipe's TRL tool loop for AgentDojo (the domain's ``agent_loops["trl"]``): the datasets with
    their ``environment`` column, and ``GRPOTrainer``'s ``environment_factory`` keyword for the suites
    they name; with a tokenizer, TRL's tool loop then reads every turn with the paper's parser."""
    train = _with_environment(train)
    evaluation = _with_environment(evaluation) if evaluation is not None else None
    suites = set(train["environment"]) | set(evaluation["environment"] if evaluation is not None else ())
    factories = environment_factories(suites=sorted(suites), **config.get("environment", {}))
    if processing_class is not None:
        install_paper_parser(
            getattr(processing_class, "tokenizer", processing_class),
            max_parallel_calls=int(config.get("max_parallel_calls", 1)),
        )
    return train, evaluation, {"environment_factory": factories}
