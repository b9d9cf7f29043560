"""One AgentDojo case as a live environment: execute tool calls on it, then run the official checkers.

This is what a framework's multi-turn agent loop drives (verl's tool agent loop calls :meth:`call` for
every parsed tool call and :meth:`result` at the end). Needs the ``agentdojo`` package.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from corrgrpo_tasks.agent_security._answer import hardened_utility, injection_seen
from corrgrpo_tasks.agent_security._reward import checker_result, invalid_result
from corrgrpo_tasks.agent_security._tool_calls import ParsedTurn, parse_turn, tool_parameters


@functools.lru_cache(maxsize=16)
def _schemas(benchmark_version: str, suite: str) -> str:
    from agentdojo.task_suite.load_suites import get_suite

    return json.dumps(
        [
            {
                "type": "function",
                "function": {
                    "name": f.name,
                    "description": f.description,
                    "parameters": f.parameters.model_json_schema(),
                },
            }
            for f in get_suite(benchmark_version, suite).tools
        ]
    )


def suite_tool_schemas(benchmark_version: str, suite: str) -> list[dict[str, Any]]:
    """OpenAI-style function schemas of a suite's tools, as AgentDojo gives them to API models (a fresh
    copy each call; built once per suite)."""
    return list(json.loads(_schemas(benchmark_version, suite)))


def suite_tool_parameters(benchmark_version: str, suite: str) -> dict[str, dict[str, Any]]:
    """``{tool name: reduced parameter schema}`` of a suite, the schemas the paper's loop validates
    calls against (:func:`~corrgrpo_tasks.agent_security.tool_parameters`)."""
    return {
        s["function"]["name"]: tool_parameters(s["function"]["parameters"])
        for s in suite_tool_schemas(benchmark_version, suite)
    }


def _listed(value: Any) -> Any:
    """A string argument that reads as a Python list literal becomes that list (the paper's tool does
    this before running any call); anything else is left alone."""
    if not isinstance(value, str):
        return value
    try:
        parsed = ast.literal_eval(value)
    except Exception:  # noqa: BLE001 -- not a literal: an ordinary string
        return value
    return parsed if isinstance(parsed, list) else value


def _yaml_dump(data: Any) -> str:
    import yaml  # type: ignore[import-untyped,unused-ignore]  # a dependency of agentdojo

    return str(yaml.safe_dump(data, allow_unicode=True))


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut to its first and last ``limit // 2`` characters when longer than ``limit`` (verl's
    ``tool_response_truncate_side="middle"``)."""
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...(truncated)...{text[len(text) - limit // 2 :]}"


class AgentDojoEpisode:
    """The injected environment of one case, the calls made on it, and its checker result.

    >>> ep = AgentDojoEpisode({"case_id": "banking:user_task_0", "case_type": "clean", "suite": "banking",
    ...                        "user_task_id": "user_task_0", "injection_task_id": "", "injections": {},
    ...                        "benchmark_version": "v1.2.2"})  # doctest: +SKIP
    """

    def __init__(self, case: Mapping[str, Any]) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime
        from agentdojo.task_suite.load_suites import get_suite

        self.case = dict(case)
        self.suite = get_suite(case.get("benchmark_version") or "v1.2.2", case["suite"])
        self.user_task = self.suite.get_user_task_by_id(case["user_task_id"])
        self.injection_task = (
            self.suite.get_injection_task_by_id(case["injection_task_id"])
            if case["case_type"] == "security"
            else None
        )
        environment = self.suite.load_and_inject_default_environment(dict(case.get("injections") or {}))
        self.environment = self.user_task.init_environment(environment)
        self.pre_environment = self.environment.model_copy(deep=True)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.calls: list[Any] = []
        self.tool_outputs: list[str] = []
        self.format_valid = True

    @property
    def tool_names(self) -> list[str]:
        return list(self.runtime.functions)

    @property
    def benchmark_version(self) -> str:
        return str(self.case.get("benchmark_version") or "v1.2.2")

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schemas of the suite's tools (for the chat template's tool list)."""
        return suite_tool_schemas(self.benchmark_version, self.case["suite"])

    def tool_parameters(self, tool_names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """The reduced parameter schemas of ``tool_names`` (default: every tool of the suite)."""
        schemas = suite_tool_parameters(self.benchmark_version, self.case["suite"])
        return schemas if tool_names is None else {n: schemas[n] for n in tool_names if n in schemas}

    def parse_turn(self, text: str, *, tool_names: Sequence[str] | None = None) -> ParsedTurn:
        """One assistant turn read as the paper's loop reads it, against the offered tools' schemas."""
        return parse_turn(text, self.tool_parameters(tool_names))

    def record_turn(self, text: str, *, tool_names: Sequence[str] | None = None) -> ParsedTurn:
        """Parse one assistant turn and note its validity; one invalid turn invalidates the trajectory.

        A call must name one of ``tool_names`` (default: every tool of the suite), the tools offered,
        carry ``arguments`` and match the tool's schema. Returns the parsed turn (its calls are the
        ones the paper's loop would execute, in order).
        """
        turn = self.parse_turn(text, tool_names=tool_names)
        self.record_validity(turn.format_valid)
        return turn

    def record_validity(self, valid: bool) -> None:
        """Note one parsed turn's validity (for loops that parse the turn themselves)."""
        self.format_valid = self.format_valid and bool(valid)

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call on the environment as the paper's tool does; returns its output as text.

        String arguments that read as a Python list become lists; the call enters the trace before it
        runs; a failure comes back as ``{"error": "..."}`` JSON, a result as AgentDojo's YAML.
        """
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall

        args = {key: _listed(value) for key, value in arguments.items()}
        self.calls.append(FunctionCall(function=name, args=args))
        result, error = self.runtime.run_function(self.environment, name, args)
        if error is not None:
            text = json.dumps({"error": error}, ensure_ascii=False)
        else:
            text = str(tool_result_to_str(result, dump_fn=_yaml_dump))
        self.tool_outputs.append(text)
        return text

    def _check(self, task: Any, output: str, *, kind: str) -> bool:
        traced = getattr(task, f"{kind}_from_traces")(
            output, self.pre_environment, self.environment, self.calls
        )
        if traced is not None:
            return bool(traced)
        return bool(getattr(task, kind)(output, self.pre_environment, self.environment))

    def result(self, final_output: str) -> dict[str, Any]:
        """Run AgentDojo's checkers on the final state; a checker that raises gives an invalid result.

        The user-task check also runs as the hardened profile applies it (``utility_hardened``: see
        :func:`~corrgrpo_tasks.agent_security.hardened_utility`, bounded by the task's
        ``GROUND_TRUTH_OUTPUT`` and its ground-truth calls), and ``injection_seen`` says whether a tool
        output carried the case's injection.
        """
        try:
            utility = self._check(self.user_task, final_output, kind="utility")
            truth = self.user_task.ground_truth(self.pre_environment.model_copy(deep=True))
            hardened = hardened_utility(
                lambda answer: (
                    utility if answer == final_output else self._check(self.user_task, answer, kind="utility")
                ),
                final_output,
                self.tool_outputs,
                expected=str(getattr(self.user_task, "GROUND_TRUTH_OUTPUT", "") or ""),
                calls=[c.function for c in self.calls],
                ground_truth_calls=[c.function for c in truth],
            )
            attacked = (
                self._check(self.injection_task, final_output, kind="security")
                if self.injection_task is not None
                else False
            )
        except Exception as exc:  # noqa: BLE001 -- any checker failure invalidates this trajectory only
            return invalid_result(case_id=self.case["case_id"], error=f"{type(exc).__name__}: {exc}"[:2000])
        return checker_result(
            case_id=self.case["case_id"],
            case_type=self.case["case_type"],
            utility=utility,
            attack_success=attacked,
            format_valid=self.format_valid,
            num_tool_calls=len(self.calls),
            utility_hardened=hardened,
            injection_seen=injection_seen((self.case.get("injections") or {}).values(), self.tool_outputs),
        )
