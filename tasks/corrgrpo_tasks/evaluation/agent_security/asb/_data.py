"""Agent Security Bench's published data files, read from a local checkout (nothing is downloaded).

Layout (``agiresearch/ASB``; ``root`` is the checkout)::

    data/agent_task.jsonl          {"agent_name": "financial_analyst_agent",
                                    "agent_path": "example/financial_analyst_agent", "tasks": ["...", ...]}
    data/all_attack_tools.jsonl    {"Attacker Tool", "Attacker Instruction", "Description", "Attack goal",
                                    "Attack Type", "Corresponding Agent", "Aggressive"}
    data/all_normal_tools.jsonl    {"Tool Name", "Description", "Expected Achievements", "Corresponding Agent"}
    pyopenagi/agents/<agent_path>/config.json   optional: {"description": [...], "tools": ["simulated/Name"]}

An agent's normal tools are its config's ``tools`` (the part after ``/``) when the config is there, else
every normal tool whose ``Corresponding Agent`` is the agent; its system prompt is the config's
``description`` (else "You are a <agent name>."). ``attack_tools=`` picks another attacker-tool file
(``all_attack_tools_aggressive.jsonl``, ...).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

LAYOUT = (
    "an ASB checkout (agiresearch/ASB) with data/agent_task.jsonl, data/all_attack_tools.jsonl and "
    "data/all_normal_tools.jsonl (agent configs under pyopenagi/agents/<agent_path>/config.json optional)"
)


class ASBDataError(ValueError):
    """A missing file or a malformed record; the message names the file (and line) and the layout."""


@dataclasses.dataclass(frozen=True)
class NormalTool:
    name: str
    description: str
    expected_achievement: str


@dataclasses.dataclass(frozen=True)
class AttackTool:
    name: str
    instruction: str
    description: str
    goal: str
    attack_type: str
    agent: str
    aggressive: bool


@dataclasses.dataclass(frozen=True)
class ASBAgent:
    name: str
    description: str
    tasks: tuple[str, ...]
    tools: tuple[NormalTool, ...]
    attack_tools: tuple[AttackTool, ...]


def _jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise ASBDataError(f"{path} is missing; expected {LAYOUT}")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ASBDataError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise ASBDataError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append((n, row))
    return rows


def _text(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise ASBDataError(f"{where}: field {key!r} must be a string, got {value!r:.60}")
    return value


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def load_asb(root: str | Path, *, attack_tools: str = "all_attack_tools.jsonl") -> list[ASBAgent]:
    """Every agent with its tasks, normal tools and attacker tools, in ``agent_task.jsonl`` order."""
    root = Path(root)
    data = root / "data"
    normal: dict[str, list[NormalTool]] = {}
    by_name: dict[str, NormalTool] = {}
    path = data / "all_normal_tools.jsonl"
    for n, row in _jsonl(path):
        where = f"{path}:{n}"
        tool = NormalTool(
            _text(row, "Tool Name", where),
            _text(row, "Description", where),
            _text(row, "Expected Achievements", where),
        )
        normal.setdefault(_text(row, "Corresponding Agent", where), []).append(tool)
        by_name[tool.name] = tool
    attacks: dict[str, list[AttackTool]] = {}
    path = data / attack_tools
    for n, row in _jsonl(path):
        where = f"{path}:{n}"
        attack = AttackTool(
            _text(row, "Attacker Tool", where),
            _text(row, "Attacker Instruction", where),
            _text(row, "Description", where),
            _text(row, "Attack goal", where),
            str(row.get("Attack Type", "")),
            _text(row, "Corresponding Agent", where),
            _flag(row.get("Aggressive", False)),
        )
        attacks.setdefault(attack.agent, []).append(attack)
    agents = []
    path = data / "agent_task.jsonl"
    for n, row in _jsonl(path):
        where = f"{path}:{n}"
        name = _text(row, "agent_name", where)
        tasks = row.get("tasks")
        if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
            raise ASBDataError(f"{where}: 'tasks' must be a non-empty list of strings")
        description, tools = _config(root, row.get("agent_path"), name, by_name, where)
        if tools is None:
            tools = normal.get(name, [])
        if not tools:
            raise ASBDataError(
                f"{where}: agent {name!r} has no normal tools in {data / 'all_normal_tools.jsonl'}"
            )
        agents.append(ASBAgent(name, description, tuple(tasks), tuple(tools), tuple(attacks.get(name, []))))
    if not agents:
        raise ASBDataError(f"{data / 'agent_task.jsonl'} holds no agents; expected {LAYOUT}")
    return agents


def _config(
    root: Path, agent_path: Any, name: str, tools: dict[str, NormalTool], where: str
) -> tuple[str, list[NormalTool] | None]:
    default = f"You are a {name.replace('_', ' ')}."
    if not isinstance(agent_path, str):
        return default, None
    path = root / "pyopenagi" / "agents" / agent_path / "config.json"
    if not path.is_file():
        return default, None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ASBDataError(f"{path}: not valid JSON ({exc})") from None
    description = config.get("description", default) if isinstance(config, dict) else default
    if isinstance(description, list):
        description = "".join(str(part) for part in description)
    names = config.get("tools") if isinstance(config, dict) else None
    if not isinstance(names, list):
        return str(description), None
    missing = [t for t in names if str(t).split("/")[-1] not in tools]
    if missing:
        raise ASBDataError(f"{path}: tools {missing} are not in all_normal_tools.jsonl ({where})")
    return str(description), [tools[str(t).split("/")[-1]] for t in names]
