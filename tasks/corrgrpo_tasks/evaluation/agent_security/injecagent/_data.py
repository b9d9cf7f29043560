"""InjecAgent's published data files, read from a local checkout (nothing is downloaded).

Layout (``uiuc-kang-lab/InjecAgent``; ``root`` is the checkout or its ``data/`` folder)::

    data/tools.json                      [{"toolkit": "Gmail", "tools": [{"name": "SendEmail", "summary": ...,
                                           "parameters": [...], "returns": [...], ...}]}, ...]
    data/test_cases_dh_base.json         direct harm: a JSON list of cases
    data/test_cases_ds_base.json         data stealing: a JSON list of cases
    data/attacker_simulated_responses.json   {"(ToolName,{params})": "response text"} for stage 2

A case holds ``User Tool``, ``User Instruction``, ``Tool Parameters``, ``Tool Response`` (the user tool's
output with the attacker instruction inside), ``Thought`` (the agent's first thought, ``Thought: ...``),
``Attacker Tools`` (the target tool first; data stealing adds the sending tool second) and ``Attacker
Instruction``; ``Attack Type`` and ``Expected Achievements`` are kept when present. Tool names are the
toolkit name followed by the tool's own (``Gmail`` + ``SendEmail``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ATTACKS: tuple[str, ...] = ("dh", "ds")
SETTINGS: tuple[str, ...] = ("base", "enhanced")
LAYOUT = (
    "an InjecAgent checkout (uiuc-kang-lab/InjecAgent) with data/tools.json, "
    "data/test_cases_dh_{setting}.json, data/test_cases_ds_{setting}.json "
    "(and data/attacker_simulated_responses.json for data-stealing stage 2)"
)
_REQUIRED = (
    "User Tool",
    "User Instruction",
    "Tool Parameters",
    "Tool Response",
    "Thought",
    "Attacker Tools",
    "Attacker Instruction",
)


class InjecAgentDataError(ValueError):
    """A missing file or a malformed record; the message names the file (and record) and the layout."""


@dataclasses.dataclass(frozen=True)
class InjecAgentCase:
    """One test case: ``attack`` is ``"dh"`` (direct harm) or ``"ds"`` (data stealing)."""

    attack: str
    index: int
    user_tool: str
    user_instruction: str
    tool_parameters: str
    tool_response: str
    thought: str
    attacker_tools: tuple[str, ...]
    attacker_instruction: str
    attack_type: str = ""
    expected_achievements: str = ""

    @property
    def case_id(self) -> str:
        return f"{self.attack}:{self.index}"


@dataclasses.dataclass(frozen=True)
class InjecAgentData:
    """Cases of one setting, the tool catalogue (name -> spec) and the stage-2 simulated responses."""

    setting: str
    cases: tuple[InjecAgentCase, ...]
    tools: Mapping[str, Mapping[str, Any]]
    attacker_responses: Mapping[str, str]


def _data_dir(root: str | Path) -> Path:
    root = Path(root)
    return (
        root / "data"
        if (root / "data" / "tools.json").is_file() or not (root / "tools.json").is_file()
        else root
    )


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise InjecAgentDataError(f"{path} is missing; expected {LAYOUT}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InjecAgentDataError(f"{path}: not valid JSON ({exc})") from None


def load_tools(path: str | Path) -> dict[str, dict[str, Any]]:
    """``tools.json`` as ``{toolkit + name: spec}``; each spec's ``name`` is the full name."""
    path = Path(path)
    toolkits = _read_json(path)
    if not isinstance(toolkits, list):
        raise InjecAgentDataError(f"{path}: expected a JSON list of toolkits, got {type(toolkits).__name__}")
    tools: dict[str, dict[str, Any]] = {}
    for i, kit in enumerate(toolkits):
        if (
            not isinstance(kit, dict)
            or not isinstance(kit.get("toolkit"), str)
            or not isinstance(kit.get("tools"), list)
        ):
            raise InjecAgentDataError(f"{path}[{i}]: a toolkit needs a string 'toolkit' and a list 'tools'")
        for j, tool in enumerate(kit["tools"]):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                raise InjecAgentDataError(f"{path}[{i}].tools[{j}]: a tool needs a string 'name'")
            full = kit["toolkit"] + tool["name"]
            tools[full] = {**tool, "name": full}
    return tools


def _case(record: Any, *, attack: str, index: int, source: Path) -> InjecAgentCase:
    where = f"{source}[{index}]"
    if not isinstance(record, dict):
        raise InjecAgentDataError(f"{where}: a case must be a JSON object, got {type(record).__name__}")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise InjecAgentDataError(f"{where}: case lacks {missing}")
    tools = record["Attacker Tools"]
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise InjecAgentDataError(f"{where}: 'Attacker Tools' must be a non-empty list of tool names")
    if attack == "ds" and len(tools) < 2:
        raise InjecAgentDataError(f"{where}: a data-stealing case needs two attacker tools (target, sender)")
    texts = {k: record[k] for k in _REQUIRED if k != "Attacker Tools"}
    bad = [k for k, v in texts.items() if not isinstance(v, str)]
    if bad:
        raise InjecAgentDataError(f"{where}: fields {bad} must be strings")
    return InjecAgentCase(
        attack=attack,
        index=index,
        user_tool=texts["User Tool"],
        user_instruction=texts["User Instruction"],
        tool_parameters=texts["Tool Parameters"],
        tool_response=texts["Tool Response"],
        thought=texts["Thought"],
        attacker_tools=tuple(tools),
        attacker_instruction=texts["Attacker Instruction"],
        attack_type=str(record.get("Attack Type", "")),
        expected_achievements=str(record.get("Expected Achievements", "")),
    )


def load_cases(path: str | Path, *, attack: str) -> list[InjecAgentCase]:
    """One ``test_cases_{dh,ds}_{setting}.json`` file; a malformed record is an error naming it."""
    if attack not in ATTACKS:
        raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")
    path = Path(path)
    records = _read_json(path)
    if not isinstance(records, list):
        raise InjecAgentDataError(f"{path}: expected a JSON list of cases, got {type(records).__name__}")
    return [_case(r, attack=attack, index=i, source=path) for i, r in enumerate(records)]


def load_injecagent(root: str | Path, *, setting: str = "base") -> InjecAgentData:
    """Everything one evaluation needs from a checkout; every tool a case names must be in the catalogue."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
    data = _data_dir(root)
    tools = load_tools(data / "tools.json")
    cases = [
        c
        for attack in ATTACKS
        for c in load_cases(data / f"test_cases_{attack}_{setting}.json", attack=attack)
    ]
    for case in cases:
        unknown = [t for t in (case.user_tool, *case.attacker_tools) if t not in tools]
        if unknown:
            raise InjecAgentDataError(f"{case.case_id}: tools {unknown} are not in {data / 'tools.json'}")
    responses_path = data / "attacker_simulated_responses.json"
    responses = _read_json(responses_path) if responses_path.is_file() else {}
    if not isinstance(responses, dict):
        raise InjecAgentDataError(f"{responses_path}: expected a JSON object of simulated responses")
    return InjecAgentData(setting, tuple(cases), tools, {str(k): str(v) for k, v in responses.items()})
