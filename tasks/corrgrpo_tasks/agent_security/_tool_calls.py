"""One assistant turn's hermes tool calls, read and checked as the paper's agent loop reads them.

The paper's verl loop parses a turn with the authors' modified hermes parser and validates every call's
arguments against the tool's schema; a call it accepts is executed, one it rejects is dropped, and the
trajectory is invalid unless every opened ``<tool_call>`` was closed and accepted. :func:`parse_turn` is
that rule, shared by our verl agent loop, TRL tool loop and OpenRLHF agent, so the three execute the
same calls and mark the same turns invalid. Plain functions on text and dicts; no framework imports.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_FENCE = "```"
_FENCE_LANGUAGES = ("json", "python")

# JSON-schema type name -> the Python values that have it (bool is no integer or number).
_TYPE_CHECKS: Mapping[str, Callable[[Any], bool]] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}


@dataclass(frozen=True)
class ToolCall:
    """An accepted call: the tool's name and the arguments it runs with (JSON values; optional
    arguments given as null are left out)."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParsedTurn:
    """One turn as the agent loop sees it.

    ``content`` is the turn's text without its closed ``<tool_call>`` blocks (the whole text when it
    lacks either tag); ``calls`` every accepted call, in order; ``opens`` and ``closes`` the tag counts.
    """

    content: str
    calls: tuple[ToolCall, ...]
    opens: int
    closes: int

    @property
    def format_valid(self) -> bool:
        """No tool-call tags at all, or as many opening tags, closing tags and accepted calls."""
        return (self.opens == self.closes == 0) or self.opens == self.closes == len(self.calls)


def tool_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The reduced parameter schema the paper's tool config gives each AgentDojo tool, from the tool's
    pydantic JSON schema: per property only ``type``, the one non-null type (a ``$ref`` resolved,
    enums dropped), and the ``required`` list.

    >>> tool_parameters({"properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}})
    {'type': 'object', 'properties': {'n': {'type': 'integer'}}, 'required': []}
    """
    defs = schema.get("$defs", {})

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        return defs.get(str(node["$ref"]).rsplit("/", 1)[-1], {}) if "$ref" in node else node

    properties = {}
    for name, prop in schema.get("properties", {}).items():
        target = resolve(prop)
        types = [resolve(a).get("type") for a in target.get("anyOf", [target])]
        concrete = [t for t in types if t is not None and t != "null"]
        properties[name] = {"type": concrete[0] if concrete else "string"}
    return {"type": "object", "properties": properties, "required": list(schema.get("required", []))}


def _strip_fence(body: str) -> str:
    """The block's payload: inside a ```` ``` ```` fence (optionally tagged json or python, any case)
    when the stripped block is one, minus any stray tool-call tags (the reference's cleaning)."""
    text = body.strip()
    if text.startswith(_FENCE) and text.endswith(_FENCE) and len(text) >= 2 * len(_FENCE):
        inner = text[len(_FENCE) : -len(_FENCE)]
        for language in _FENCE_LANGUAGES:
            if inner[: len(language)].lower() == language:
                inner = inner[len(language) :]
                break
        text = inner.strip()
    return text.replace(OPEN_TAG, "").replace(CLOSE_TAG, "").strip()


def _json_sequence(text: str) -> list[Any]:
    """One or more adjacent JSON values (control characters allowed inside strings)."""
    decoder = json.JSONDecoder(strict=False)
    values, cursor = [], 0
    while True:
        while cursor < len(text) and text[cursor].isspace():
            cursor += 1
        if cursor == len(text):
            break
        value, cursor = decoder.raw_decode(text, cursor)
        values.append(value)
    if not values:
        raise ValueError("empty tool call")
    return values


def _candidates(body: str) -> list[Any]:
    """The decoded values of one block: JSON values, else one Python literal; a lone list is unpacked."""
    text = _strip_fence(body)
    try:
        values = _json_sequence(text)
    except (ValueError, RecursionError):
        try:
            values = [ast.literal_eval(text)]
        except Exception:  # noqa: BLE001 -- any unreadable literal is simply no call
            return []
    if len(values) == 1 and isinstance(values[0], list):
        return list(values[0])
    return values


def validate_arguments(arguments: Mapping[Any, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` checked against a tool's ``parameters`` schema, optional nulls left out.

    Raises ValueError for a missing or null required argument, an unknown argument, a value of the
    wrong JSON type (``"98.7"`` for a number, ``"[...]"`` for an array) or outside the enum.

    >>> validate_arguments({"n": 3, "q": None}, {"properties": {"n": {"type": "integer"}, "q": {"type": "string"}}})
    {'n': 3}
    """
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    kept = {name: value for name, value in arguments.items() if value is not None or name in required}
    missing = required.difference(kept)
    if missing:
        raise ValueError(f"missing required arguments: {sorted(missing)}")
    unknown = [name for name in kept if name not in properties]
    if unknown:
        raise ValueError(f"unknown arguments: {unknown}")
    for name, value in kept.items():
        expected = properties[name].get("type")
        names = [expected] if isinstance(expected, str) else list(expected or ())
        known = [t for t in names if t in _TYPE_CHECKS]
        if known and not any(_TYPE_CHECKS[t](value) for t in known):
            raise ValueError(f"argument {name!r} has type {type(value).__name__}, expected {expected!r}")
        enum = properties[name].get("enum")
        if enum is not None and value not in enum:
            raise ValueError(f"argument {name!r} is not one of {enum!r}")
    return kept


Tools = Mapping[str, Mapping[str, Any] | None]
"""Offered tools: name -> parameter schema (None: any object arguments)."""


def _call(candidate: Any, tools: Tools | None, require_arguments: bool) -> ToolCall:
    """One decoded value as an accepted call; ValueError/TypeError when the loop would drop it."""
    if not isinstance(candidate, dict):
        raise TypeError("tool call must be a JSON object")
    name = candidate.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("tool call requires a non-empty string 'name'")
    if require_arguments and "arguments" not in candidate:
        raise ValueError("tool call is missing 'arguments'")
    if tools is not None and name not in tools:
        raise ValueError(f"unknown tool: {name!r}")
    arguments = candidate.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            arguments = ast.literal_eval(arguments)
    if not isinstance(arguments, dict):
        raise TypeError("'arguments' must be a JSON object")
    schema = tools.get(name) if tools is not None else None
    if schema is not None:
        arguments = validate_arguments(arguments, schema)
    # The loop hands the tool the arguments after a JSON round trip (tuples become lists; a value JSON
    # cannot hold drops the call).
    return ToolCall(name, json.loads(json.dumps(arguments, ensure_ascii=False)))


def _accepted(candidate: Any, tools: Tools | None, require_arguments: bool) -> ToolCall | None:
    try:
        return _call(candidate, tools, require_arguments)
    except Exception:  # noqa: BLE001 -- the loop drops (and logs) any call it cannot accept
        return None


def _blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of each closed block, left to right: an opening tag up to the first closing tag
    after it (``<tool_call>(.*?)</tool_call>`` without rescanning from every unclosed tag)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        start = text.find(OPEN_TAG, pos)
        if start < 0:
            return spans
        end = text.find(CLOSE_TAG, start + len(OPEN_TAG))
        if end < 0:
            return spans
        spans.append((start, end + len(CLOSE_TAG)))
        pos = end + len(CLOSE_TAG)


def parse_turn(text: str, tools: Tools | None = None, *, require_arguments: bool = True) -> ParsedTurn:
    """Read one assistant turn's hermes tool calls as the paper's loop does.

    ``tools`` maps each offered tool's name to its parameter schema (:func:`tool_parameters`); a call
    to another name is dropped, and arguments are validated (:func:`validate_arguments`; a None schema
    skips that). ``tools=None`` accepts any name. A call without ``arguments`` is dropped (the
    reference's rule) unless ``require_arguments=False``. A block holds one or more JSON values (a JSON array of
    calls, or Python-literal syntax such as ``{'name': 'f', 'arguments': {}}``, also count), may be
    wrapped in a ```` ```json ```` fence, and gives ``arguments`` as an object or a string holding one.
    Only when the text has both tags is anything parsed. Linear in the text's length.

    >>> turn = parse_turn('<tool_call>\\n{"name": "get_balance", "arguments": {}}\\n</tool_call>')
    >>> turn.calls, turn.format_valid
    ((ToolCall(name='get_balance', arguments={}),), True)
    """
    opens, closes = text.count(OPEN_TAG), text.count(CLOSE_TAG)
    if not opens or not closes:
        return ParsedTurn(text, (), opens, closes)
    spans = _blocks(text)
    calls = []
    for start, end in spans:
        for candidate in _candidates(text[start + len(OPEN_TAG) : end - len(CLOSE_TAG)]):
            call = _accepted(candidate, tools, require_arguments)
            if call is not None:
                calls.append(call)
    content, last = [], 0
    for start, end in spans:
        content.append(text[last:start])
        last = end
    content.append(text[last:])
    return ParsedTurn("".join(content), tuple(calls), opens, closes)
