"""verl's multi-turn agent loop for AgentDojo cases, registered as ``agentdojo_agent``.

verl's own ``ToolAgentLoop`` runs the rollout: chat template with the tool list, generation, tool
replies, tool-output truncation, turn and length limits, ``max_parallel_calls``. This subclass adds only
what is AgentDojo's and the paper's:

* the case's injected environment (:class:`AgentDojoEpisode`, from ``extra_info["agentdojo_case_json"]``),
* that suite's tools, shown to the model with AgentDojo's own JSON schemas and executed on the episode,
* the paper's hermes parser (:class:`AgentDojoToolParser`: Python-dict syntax, fences, string
  arguments, schema validation), and its format check of every turn it parses (a call it drops
  makes the trajectory invalid),
* AgentDojo's checkers at the end; their result goes to ``extra_fields["agentdojo_result"]``, which
  verl's reward loop merges into the reward function's ``extra_info`` (see :func:`compute_score`).

Enable it with the shipped config, ``actor_rollout_ref.rollout.agent.agent_loop_config_path=``
:data:`~corrgrpo_tasks.agent_security.AGENT_LOOP_CONFIG` (the agent-security recipe sets it). Needs
``verl`` and ``agentdojo``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from corrgrpo_tasks.agent_security._data import AGENT_NAME, CASE_KEY
from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode
from corrgrpo_tasks.agent_security._reward import RESULT_KEY
from corrgrpo_tasks.agent_security._tool_calls import ParsedTurn, parse_turn

__all__ = ["AgentDojoAgentLoop", "AgentDojoTool", "AgentDojoToolParser", "parse_case", "verl_parameters"]


def verl_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema in the reduced form verl's ``OpenAIFunctionParametersSchema`` accepts.

    verl keeps only ``type``, ``description`` and ``enum`` per property: an optional parameter
    (``anyOf`` with null) becomes a type list, an enum behind ``$ref`` is resolved. The model still
    sees the full schema; verl only validates against this one.
    """
    defs = schema.get("$defs", {})
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        target = defs.get(str(prop["$ref"]).rsplit("/", 1)[-1], {}) if "$ref" in prop else prop
        alternatives = target.get("anyOf", [target])
        types = [a.get("type", "string") for a in alternatives]
        reduced: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        if "description" in prop:
            reduced["description"] = prop["description"]
        if "enum" in target:
            reduced["enum"] = list(target["enum"])
        properties[name] = reduced
    return {"type": "object", "properties": properties, "required": list(schema.get("required", []))}


class AgentDojoTool(BaseTool):  # type: ignore[misc,unused-ignore]  # Any where verl is absent
    """One AgentDojo function as a verl tool, bound to the episode of one trajectory."""

    def __init__(self, schema: Mapping[str, Any], episode: AgentDojoEpisode) -> None:
        # BaseTool.__init__ would print every schema; set its three attributes directly.
        function = schema["function"]
        self.config: dict[str, Any] = {}
        self.tool_schema = OpenAIFunctionToolSchema.model_validate(
            {
                "type": "function",
                "function": {
                    "name": function["name"],
                    "description": function["description"],
                    "parameters": verl_parameters(function["parameters"]),
                },
            }
        )
        self.name: str = function["name"]
        self.episode = episode

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict[str, Any]]:
        return ToolResponse(text=self.episode.call(self.name, parameters)), 0.0, {}


def parse_case(extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The AgentDojo case a row carries in ``extra_info["agentdojo_case_json"]``; a clear error if absent."""
    if not isinstance(extra_info, Mapping) or extra_info.get(CASE_KEY) is None:
        raise ValueError(
            f"an {AGENT_NAME!r} row needs extra_info[{CASE_KEY!r}] (a JSON case, as written by "
            "corrgrpo_tasks.agent_security.prepare); this row has none"
        )
    text = extra_info[CASE_KEY]
    if not isinstance(text, str):
        raise TypeError(f"extra_info[{CASE_KEY!r}] must be a JSON string, got {type(text).__name__}")
    case = json.loads(text)
    missing = [k for k in ("case_id", "case_type", "suite", "user_task_id") if k not in case]
    if missing:
        raise ValueError(f"AgentDojo case {case.get('case_id')!r} lacks {missing}")
    return dict(case)


class AgentDojoToolParser(ToolParser):  # type: ignore[misc,unused-ignore]  # Any where verl is absent
    """verl's tool-parser interface over :func:`~corrgrpo_tasks.agent_security.parse_turn`: the paper's
    hermes parser with schema validation, on the turn decoded with special tokens kept (as the
    reference decodes it). Keeps the last parsed turn for the loop's format check."""

    def __init__(self, tokenizer: Any, parameters: Mapping[str, Mapping[str, Any]]) -> None:
        super().__init__(tokenizer)
        self.parameters = dict(parameters)
        self.last: ParsedTurn | None = None

    async def extract_tool_calls(
        self, responses_ids: list[int], tools: list[Any] | None = None
    ) -> tuple[str, list[FunctionCall]]:
        text = await asyncio.get_running_loop().run_in_executor(None, self.tokenizer.decode, responses_ids)
        offered = (
            self.parameters
            if tools is None
            else {t.function.name: self.parameters.get(t.function.name) for t in tools}
        )
        self.last = parse_turn(text, offered)
        calls = [
            FunctionCall(name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False))
            for c in self.last.calls
        ]
        return self.last.content, calls


@register(AGENT_NAME)
class AgentDojoAgentLoop(ToolAgentLoop):  # type: ignore[misc,unused-ignore]  # Any where verl is absent
    """verl's tool agent loop on one AgentDojo case; leaves the checker result in ``extra_fields``."""

    def __init__(self, *args: Any, tools: Any = None, **kwargs: Any) -> None:
        # The tools are the case's suite, bound to its episode in run(); verl's global tool list is unused.
        super().__init__(*args, tools=None, **kwargs)
        self._episode: AgentDojoEpisode | None = None
        self._final_output = ""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = dict(kwargs.get("extra_info") or {})
        case = parse_case(extra_info)
        episode = await self.loop.run_in_executor(None, AgentDojoEpisode, case)
        schemas = episode.tool_schemas()
        selection = extra_info.pop("tool_selection", None)  # a list, or a numpy array when read from parquet
        if selection is not None and len(selection):
            chosen = {str(name) for name in selection}
            schemas = [s for s in schemas if s["function"]["name"] in chosen]
        self.tools = {s["function"]["name"]: AgentDojoTool(s, episode) for s in schemas}
        # The chat template gets AgentDojo's full schemas (what AgentDojo gives API models); without a
        # tool_selection verl's run() uses these as they are.
        self.tool_schemas = schemas
        self.tool_parser = AgentDojoToolParser(self.tokenizer, episode.tool_parameters(list(self.tools)))
        self._episode, self._final_output = episode, ""
        output: AgentLoopOutput = await super().run(sampling_params, **{**kwargs, "extra_info": extra_info})
        result = await self.loop.run_in_executor(None, episode.result, self._final_output)
        output.extra_fields[RESULT_KEY] = result
        return output

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        parser = self.tool_parser if isinstance(self.tool_parser, AgentDojoToolParser) else None
        if parser is not None:
            parser.last = None
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        turn = parser.last if parser is not None else None
        if turn is not None:
            # verl parsed this turn (it calls the parser only for a turn no turn or length limit cut):
            # its format counts, and its text without the call blocks is the answer so far. A cut turn
            # is not checked, and its whole text is the answer, as in the paper's loop. (verl 0.9.0
            # appends the parsed turn to agent_data.messages only with continuous tokens on, so the
            # parser's call is the sign both releases give.)
            if self._episode is not None:
                self._episode.record_validity(turn.format_valid)
            self._final_output = self._without_special_tokens(turn.content)
        else:
            tokenizer: Any = self.tokenizer
            self._final_output = str(
                tokenizer.decode(agent_data.response_ids, skip_special_tokens=True)
            ).strip()
        return state

    def _without_special_tokens(self, text: str) -> str:
        for token in getattr(self.tokenizer, "all_special_tokens", ()):
            text = text.replace(token, "")
        return text.strip()

    def final_output(self) -> str:
        """AgentDojo's output: the last turn's text without its closed tool-call blocks and special tokens,
        or, when a limit cut that turn, its whole decoded text."""
        return self._final_output
