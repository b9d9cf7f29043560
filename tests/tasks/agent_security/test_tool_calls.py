"""The paper's agent loop reads a turn's tool calls with its modified hermes parser and the tool's
schema; ``parse_turn`` must accept and reject exactly what it does (docs/tasks.md, "Fidelity to the
reference"). Each expectation is the reference's, worked out from its documented rule: a block is
the text between ``<tool_call>`` and the next ``</tool_call>``, read only when the turn has both tags;
a ```` ```json ```` (or ```` ```python ````) fence around it is removed; it holds one or more JSON values,
or else one Python literal; a lone list is a list of calls; a call needs a non-empty string ``name``,
an offered tool and ``arguments`` (an object, or a string holding one), whose optional nulls are
dropped and which must then have every required key, no unknown key and the schema's JSON types. A
turn is valid when it has no tags, or as many opening tags, closing tags and accepted calls.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from corrgrpo_tasks.agent_security import parse_turn, tool_parameters, validate_arguments

SEND_MONEY = {
    "properties": {
        "recipient": {"type": "string"},
        "amount": {"type": "number"},
        "subject": {"type": "string"},
        "date": {"type": "string"},
    },
    "required": ["recipient", "amount", "subject", "date"],
}
SEND_EMAIL = {
    "properties": {
        "recipients": {"type": "array"},
        "subject": {"type": "string"},
        "body": {"type": "string"},
        "cc": {"type": "array"},
    },
    "required": ["recipients", "subject", "body"],
}
TOOLS: dict[str, Any] = {
    "send_money": SEND_MONEY,
    "send_email": SEND_EMAIL,
    "get_balance": {"properties": {}},
}
MONEY = {"recipient": "US1", "amount": 98.7, "subject": "rent", "date": "2022-04-01"}
EMAIL = {"recipients": ["a@b.c"], "subject": "hi", "body": "text"}


def block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def call(name: str, arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments})


# (case, turn, names of the calls the reference accepts, reference's format validity)
CASES: list[tuple[str, str, list[str], bool]] = [
    ("plain JSON", block(call("send_money", MONEY)), ["send_money"], True),
    ("no tags at all", "The balance is 100.", [], True),
    ("Python-dict syntax", block(repr({"name": "send_money", "arguments": MONEY})), ["send_money"], True),
    (
        "a ```json fence inside the block",
        block("```json\n" + call("send_money", MONEY) + "\n```"),
        ["send_money"],
        True,
    ),
    (
        "a ```JSON fence, any case",
        block("```JSON\n" + call("get_balance", {}) + "\n```"),
        ["get_balance"],
        True,
    ),
    ("arguments as a JSON string", block(call("send_money", json.dumps(MONEY))), ["send_money"], True),
    ("a number sent as a string", block(call("send_money", {**MONEY, "amount": "98.7"})), [], False),
    ("a list sent as a string", block(call("send_email", {**EMAIL, "recipients": "['a@b.c']"})), [], False),
    (
        "a required argument missing",
        block(call("send_money", {k: v for k, v in MONEY.items() if k != "date"})),
        [],
        False,
    ),
    ("a required argument null", block(call("send_money", {**MONEY, "date": None})), [], False),
    (
        "an optional argument null: dropped",
        block(call("send_email", {**EMAIL, "cc": None})),
        ["send_email"],
        True,
    ),
    ("an unknown argument", block(call("send_money", {**MONEY, "memo": "x"})), [], False),
    ("no arguments key", block(json.dumps({"name": "get_balance"})), [], False),
    ("a tool that is not offered", block(call("wire_everything", {})), [], False),
    ("an empty name", block(call("", {})), [], False),
    (
        "a JSON array of two calls in one block",
        block(json.dumps([{"name": "get_balance", "arguments": {}}] * 2)),
        ["get_balance", "get_balance"],
        False,
    ),
    (
        "two JSON values in one block",
        block(call("get_balance", {}) + "\n" + call("get_balance", {})),
        ["get_balance", "get_balance"],
        False,
    ),
    (
        "two blocks",
        block(call("get_balance", {})) + block(call("send_money", MONEY)),
        ["get_balance", "send_money"],
        True,
    ),
    (
        "one good, one bad block: the good one still runs",
        block(call("get_balance", {})) + block("{nope"),
        ["get_balance"],
        False,
    ),
    ("an unclosed block", "<tool_call>\n" + call("get_balance", {}), [], False),
    ("a stray closing tag", block(call("get_balance", {})) + "</tool_call>", ["get_balance"], False),
    (
        "a repeated opening tag is removed inside the block",
        "<tool_call>\n" + block(call("get_balance", {})),
        ["get_balance"],
        False,
    ),
    ("trailing text after the JSON", block(call("get_balance", {}) + " thanks"), [], False),
    ("a bool for a number", block(call("send_money", {**MONEY, "amount": True})), [], False),
    ("an int for a number", block(call("send_money", {**MONEY, "amount": 98})), ["send_money"], True),
]


@pytest.mark.parametrize(("turn", "accepted", "valid"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_turn_accepts_what_the_reference_executes(turn: str, accepted: list[str], valid: bool) -> None:
    parsed = parse_turn(turn, TOOLS)
    assert [c.name for c in parsed.calls] == accepted
    assert parsed.format_valid is valid


def test_accepted_calls_carry_the_arguments_the_tool_receives() -> None:
    parsed = parse_turn(block(call("send_email", {**EMAIL, "cc": None})) + " done", TOOLS)
    assert parsed.calls[0].arguments == EMAIL  # the optional null left out
    assert parsed.content == " done"  # the text without its call blocks
    python = parse_turn(
        block(repr({"name": "send_email", "arguments": {**EMAIL, "recipients": ("a@b.c",)}})), TOOLS
    )
    assert python.calls == ()  # a tuple is no JSON array
    listed = parse_turn(block("{'name': 'get_balance', 'arguments': {}}"), None)
    assert listed.calls[0].name == "get_balance"  # without schemas any name and object arguments pass


def test_reduced_schemas_are_the_papers_tool_config() -> None:
    pytest.importorskip("agentdojo")
    from corrgrpo_tasks.agent_security import suite_tool_parameters

    banking = suite_tool_parameters("v1.2.2", "banking")
    travel = suite_tool_parameters("v1.2.2", "travel")
    workspace = suite_tool_parameters("v1.2.2", "workspace")
    assert banking["send_money"]["properties"]["amount"] == {"type": "number"}
    assert banking["get_most_recent_transactions"] == {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": [],
    }
    # Optional parameters keep their one non-null type; a required one may still be nullable there.
    assert travel["reserve_car_rental"]["properties"]["end_time"] == {"type": "string"}
    assert "end_time" in travel["reserve_car_rental"]["required"]
    # An enum behind $ref becomes its type, without the enum (the paper's config has none).
    assert workspace["share_file"]["properties"]["permission"] == {"type": "string"}
    assert workspace["send_email"]["properties"]["attachments"] == {"type": "array"}
    assert (
        sum(len(suite_tool_parameters("v1.2.2", s)) for s in ("banking", "slack", "travel", "workspace"))
        >= 69
    )


def test_tool_parameters_resolves_refs_and_nullable_types() -> None:
    schema = {
        "$defs": {"Level": {"enum": ["r", "w"], "type": "string"}},
        "properties": {
            "level": {"$ref": "#/$defs/Level"},
            "cc": {"anyOf": [{"type": "array"}, {"type": "null"}]},
        },
        "required": ["level"],
    }
    assert tool_parameters(schema)["properties"] == {"level": {"type": "string"}, "cc": {"type": "array"}}


def test_validate_arguments_names_the_problem() -> None:
    with pytest.raises(ValueError, match="amount"):
        validate_arguments({**MONEY, "amount": "98.7"}, SEND_MONEY)
    with pytest.raises(ValueError, match="missing"):
        validate_arguments({}, SEND_MONEY)
    with pytest.raises(ValueError, match="unknown"):
        validate_arguments({**MONEY, "x": 1}, SEND_MONEY)
    with pytest.raises(ValueError, match="one of"):
        validate_arguments({"a": "z"}, {"properties": {"a": {"type": "string", "enum": ["x"]}}})
