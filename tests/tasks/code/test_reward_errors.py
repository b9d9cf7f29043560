"""``CodeRewardConfig(keep_error=True)``: the reward says why a program failed, as the judge saw it (what
``corrgrpo evaluate`` writes into each record); by default no text is attached."""

from __future__ import annotations

import pytest

from corrgrpo_tasks.code import compute_score
from corrgrpo_tasks.sandbox import Sandbox

GT = {"prompt": "", "test": "def check(candidate):\n    assert candidate(2) == 4\n", "entry_point": "double"}


def _program(body: str) -> str:
    return f"```python\ndef double(x):\n    {body}\n```"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("return 2 * x", ""),
        ("return x + 1", "wrong_answer"),
        ("return 1 / 0", "ZeroDivisionError"),
        ("return (", "SyntaxError"),
    ],
)
def test_the_first_failed_stage_is_named(body: str, expected: str, box: Sandbox) -> None:
    del box
    result = compute_score("humaneval", _program(body), GT, keep_error=True)
    assert isinstance(result["_error"], str)
    if expected:
        assert expected in result["_error"], result["_error"]
    else:
        assert result["_error"] == ""
        assert result["accuracy_reward"] == 1.0


def test_no_text_unless_asked(box: Sandbox) -> None:
    del box
    assert "_error" not in compute_score("humaneval", _program("return 1 / 0"), GT)
