"""One test per agent-security row of the deviation table in docs/tasks.md ("Fidelity to the
reference"): the reference's value, worked out from its documented rule, beside ours."""

from __future__ import annotations

from corrgrpo_tasks.agent_security import INVALID_REWARD, compute_score, parse_turn


def test_nesting_beyond_the_recursion_limit_in_a_call() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    turn = '<tool_call>{"name": "get_balance", "arguments": {"x": ' + deep + "}}</tool_call>"
    # The reference's JSON decoding raises RecursionError, which its parser does not catch: the rollout
    # raises. Ours: no call, and the turn is invalid (opening tag without an accepted call).
    reference = "RecursionError"
    assert reference == "RecursionError"
    parsed = parse_turn(turn, {"get_balance": None})
    assert (parsed.calls, parsed.format_valid) == ((), False)


def test_the_default_invalid_reward() -> None:
    reference = -1.0  # the reference function's own default (its launcher passes -0.0)
    ours = compute_score("agentdojo", "", "", {})["score"]
    assert reference == -1.0
    assert ours == INVALID_REWARD == 0.0
    assert str(ours) == "-0.0"  # the launcher's value, sign included
