"""One AgentDojo case as a live environment: execute tool calls on it, then run the official checkers.

This is what a framework's multi-turn agent loop drives (verl's tool agent loop calls :meth:`call` for
every parsed tool call and :meth:`result` at the end). Needs the ``agentdojo`` package.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from corrgrpo_tasks.agent_security._reward import checker_result, invalid_result, tool_call_format_is_valid


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
        self.format_valid = True

    @property
    def tool_names(self) -> list[str]:
        return list(self.runtime.functions)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schemas of the suite's tools (for the chat template's tool list)."""
        return suite_tool_schemas(self.case.get("benchmark_version") or "v1.2.2", self.case["suite"])

    def record_turn(
        self, text: str, *, tool_names: Sequence[str] | None = None, require_arguments: bool = False
    ) -> None:
        """Note one assistant turn; a malformed tool call in any turn makes the trajectory invalid.

        A call must name one of ``tool_names`` (default: every tool of the suite), the tools offered.
        """
        names = self.tool_names if tool_names is None else tool_names
        self.format_valid = self.format_valid and tool_call_format_is_valid(
            text, tool_names=names, require_arguments=require_arguments
        )

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call on the environment; returns the tool's output (or its error) as text."""
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall

        args = dict(arguments)
        self.calls.append(FunctionCall(function=name, args=args))
        result, error = self.runtime.run_function(self.environment, name, args)
        return error if error is not None else str(tool_result_to_str(result))

    def _check(self, task: Any, output: str, *, kind: str) -> bool:
        traced = getattr(task, f"{kind}_from_traces")(
            output, self.pre_environment, self.environment, self.calls
        )
        if traced is not None:
            return bool(traced)
        return bool(getattr(task, kind)(output, self.pre_environment, self.environment))

    def result(self, final_output: str) -> dict[str, Any]:
        """Run AgentDojo's checkers on the final state; a checker that raises gives an invalid result."""
        try:
            utility = self._check(self.user_task, final_output, kind="utility")
            attacked = (
                self._check(self.injection_task, final_output, kind="security")
                if self.injection_task is not None
                else False
            )
        except Exception as exc:  # noqa: BLE001 -- any checker failure invalidates this trajectory only
            return invalid_result(case_id=self.case["case_id"], error=f"{type(exc).__name__}: {exc}")
        return checker_result(
            case_id=self.case["case_id"],
            case_type=self.case["case_type"],
            utility=utility,
            attack_success=attacked,
            format_valid=self.format_valid,
            num_tool_calls=len(self.calls),
        )
