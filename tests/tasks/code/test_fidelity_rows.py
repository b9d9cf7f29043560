"""Each deliberate deviation of the code reward from the reference reward: both values, per component.

The reference's value is the literal its documented rule gives (cross-checked against this project's
reading of it, ``Reference`` in test_fidelity_reference.py); ours is what the reward returns. The table
is docs/tasks.md's (rows for the code domain).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from corrgrpo_tasks.code import COMPONENTS, compute_score
from corrgrpo_tasks.sandbox import Sandbox

FIXTURES = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
TWO_SUM = json.loads((FIXTURES / "leetcode_train.jsonl").read_text().splitlines()[0])
VERIFIER = {
    "prompt": TWO_SUM["prompt"],
    "test": TWO_SUM["test"],
    "entry_point": TWO_SUM["entry_point"],
    "reference_solution": TWO_SUM["completion"],
}
SOLUTION = TWO_SUM["completion"].rstrip("\n")
JAVA = (
    "```java\nclass Solution {\n    public int[] twoSum(int[] nums, int target) {\n"
    "        Map<Integer, Integer> seen = new HashMap<>();\n"
    "        for (int i = 0; i < nums.length; i++) {\n"
    "            if (seen.containsKey(target - nums[i])) return new int[] {seen.get(target - nums[i]), i};\n"
    "            seen.put(nums[i], i);\n        }\n        return new int[0];\n    }\n}\n```\n"
)


def _indented(code: str, pad: str) -> str:
    return "\n".join(pad + line if line else line for line in code.split("\n"))


def _deep(code: str) -> str:
    # An expression 1,200 operators deep: the reference's recursive node walk overflows.
    lines = code.split("\n")
    return "\n".join([*lines[:2], "        zero = " + "+".join(["0"] * 1200), *lines[2:]])


#: name -> completion built from the reference solution (plain code).
ROW_CASES: dict[str, Callable[[str], str]] = {
    "other_language_block_first": lambda c: f"{JAVA}Or in Python:\n```python\n{c}\n```",
    "python3_tag": lambda c: f"```python3\n{c}\n```",
    "space_before_tag": lambda c: f"``` python\n{c}\n```",
    "indented_fence_with_import": lambda c: (
        "1. The code:\n   ```python\n" + _indented("from typing import List\n" + c, "   ") + "\n   ```"
    ),
    "unfenced_indented_then_code": lambda c: (
        "Here it is:\n" + _indented(c + "\n\nprint(Solution().twoSum([2, 7], 9))", "    ")
    ),
    "prose_mentions_the_class": lambda c: f"I will write class Solution with a dictionary.\n\n{c}",
    "example_block_after_unfenced": lambda c: f"{c}\n```text\nOutput: [0, 1]\n```",
    "future_import": lambda c: f"```python\nfrom __future__ import annotations\n\n{c}\n```",
    "deep_expression": lambda c: f"```python\n{_deep(c)}\n```",
    "class_under_if": lambda c: "```python\nif True:\n" + _indented(c, "    ") + "\n```",
    "class_in_string_only": lambda c: (
        '```python\nNOTE = """\nclass Solution:\n"""\n\n\ndef twoSum(nums, target):\n    return [0, 1]\n```'
    ),
    "own_assert": lambda c: (
        "```python\nclass Solution:\n    def twoSum(self, nums, target):\n        assert False\n```"
    ),
}


def ratio(program: str) -> float:
    """AST similarity of ``program`` to the reference solution (the node sequence with contexts)."""
    import ast
    import difflib

    from corrgrpo_tasks.code.sandboxed._syntax import ast_tokens

    mine, ref = (ast_tokens(ast.parse(p), 10**6) for p in (program, SOLUTION))
    return difflib.SequenceMatcher(None, mine, ref, autojunk=False).ratio()


# (reference, ours) per component that differs; every other component is equal. Reasons: docs/tasks.md.
F, S, C, R, A, T = COMPONENTS[:6]
ROWS: dict[str, dict[str, tuple[float, float]]] = {
    # The reference takes the longer block that contains "class Solution": the Java one.
    "other_language_block_first": {S: (0, 1), C: (0, 1), R: (0, 1), A: (0, 1), T: (0, 1)},
    # The reference's pattern takes "python" and leaves "3" as the program's first statement: the program
    # still runs, with one more statement (Expr, Constant: 4 tokens) in its node sequence.
    "python3_tag": {T: (ratio("3\n" + SOLUTION), 1)},
    # "python" becomes the program's first statement: a NameError.
    "space_before_tag": {R: (0, 1), A: (0, 1), T: (ratio("python\n" + SOLUTION), 1)},
    # The reference strips the block, dedenting its first line only: "unexpected indent".
    "indented_fence_with_import": {
        S: (0, 1),
        C: (0, 1),
        R: (0, 1),
        A: (0, 1),
        T: (0, ratio("from typing import List\n" + SOLUTION)),
    },
    # The reference cuts at "class Solution", so the class loses its indent and what follows keeps it.
    "unfenced_indented_then_code": {
        S: (0, 1),
        C: (0, 1),
        R: (0, 1),
        A: (0, 1),
        T: (0, ratio(SOLUTION + "\nprint(Solution().twoSum([2, 7], 9))")),
    },
    # The reference cuts from the first "class Solution", inside the prose.
    "prose_mentions_the_class": {S: (0, 1), C: (0, 1), R: (0, 1), A: (0, 1), T: (0, 1)},
    # The reference takes the only fenced block (the example) as the program: "text" is a NameError.
    "example_block_after_unfenced": {R: (0, 1), A: (0, 1), T: (ratio("text\nOutput: [0, 1]"), 1)},
    # The reference compiles prompt + program + tests as one source: a late __future__ import.
    "future_import": {C: (0, 1), R: (0, 1), A: (0, 1)},
    # The reference's recursive node walk raises RecursionError, which its catch-all reads as compile 0
    # (and no AST similarity).
    "deep_expression": {C: (0, 1), R: (0, 1), A: (0, 1), T: (0, ratio(_deep(SOLUTION)))},
    # Format from the parse tree (issue 25): no top-level definition of Solution.
    "class_under_if": {F: (1, 0)},
    "class_in_string_only": {F: (1, 0)},
    # The candidate's own AssertionError is its runtime error, not a failed test of the dataset's.
    "own_assert": {R: (1, 0)},
}


@pytest.fixture(scope="module")
def scores(box: Sandbox) -> dict[str, dict[str, float]]:
    del box
    return {
        name: compute_score("leetcodedataset", make(SOLUTION), VERIFIER, timeout_seconds=3)
        for name, make in ROW_CASES.items()
    }


def _reference(name: str) -> dict[str, float]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from test_fidelity_reference import Reference
    finally:
        sys.path.pop(0)
    return Reference.score(ROW_CASES[name](SOLUTION), VERIFIER)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_values(name: str, scores: dict[str, dict[str, float]]) -> None:
    ours, reading = scores[name], _reference(name)
    for key in (F, S, C, R, A, T):
        if key in ROWS[name]:
            theirs_expected, ours_expected = ROWS[name][key]
            assert reading[key] == pytest.approx(theirs_expected), (key, "reference")
            assert ours[key] == pytest.approx(ours_expected), (key, "ours")
            assert ours[key] != reading[key], key
        else:
            assert ours[key] == pytest.approx(reading[key]), key
