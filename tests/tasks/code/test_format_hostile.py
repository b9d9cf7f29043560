"""Format from the syntax tree (issue 25, class 9): the entry point must be a top-level ``class``/``def`` of
the parsed program; a line that merely looks like one earns nothing."""

from __future__ import annotations

import ast

import pytest

from corrgrpo_tasks.code import compute_score
from corrgrpo_tasks.code.sandboxed._syntax import entry_defined, syntax_facts
from corrgrpo_tasks.sandbox import Sandbox

GT = {
    "prompt": "from typing import *\n",
    "entry_point": "Solution().solve",
    "test": "def check(candidate):\n    assert candidate(2) == 3\n",
    "reference_solution": "class Solution:\n    def solve(self, n):\n        return n + 1\n",
}
METHOD = "    def solve(self, n):\n        return n + 1\n"

# Each defines no top-level Solution, yet a line starts with "class Solution" (the reference's rule: 1).
HOSTILE = {
    "string_literal": 'DOC = """\nclass Solution:\n"""\n\n\ndef solve(n):\n    return n + 1\n',
    "comment": "# class Solution:\ndef solve(n):\n    return n + 1\n",
    "if_false": "if False:\n    class Solution:\n" + "    " + METHOD.replace("\n    ", "\n        "),
    "nested_in_function": "def make():\n    class Solution:\n        pass\n    return Solution\n",
    "conditional": "import sys\nif sys.version_info > (3,):\n    class Solution:\n        pass\n",
    "try_block": "try:\n    class Solution:\n        pass\nexcept Exception:\n    pass\n",
    "nested_in_class": "class Outer:\n    class Solution:\n        pass\n",
    "assignment": "class Impl:\n" + METHOD + "\n\nSolution = Impl  # class Solution\n",
    "with_block": "import contextlib\nwith contextlib.suppress(Exception):\n    class Solution:\n        pass\n",
    "subclass_name": "class SolutionBase:\n" + METHOD,
}
HONEST = {
    "plain": "class Solution:\n" + METHOD,
    "after_helpers": "import math\n\n\ndef helper(x):\n    return x\n\n\nclass Solution:\n" + METHOD,
    "decorated": "def keep(cls):\n    return cls\n\n\n@keep\nclass Solution:\n" + METHOD,
    "subclass": "class Base:\n    pass\n\n\nclass Solution(Base):\n" + METHOD,
}


def fenced(code: str) -> str:
    return f"Answer:\n```python\n{code}```\n"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_no_top_level_definition_no_format_in_process(name: str) -> None:
    tree = ast.parse(HOSTILE[name])
    assert not entry_defined(tree, "Solution")
    assert syntax_facts(tree, {"entry_top": "Solution", "ast_token_cap": 0})["entry_defined"] is False


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_definitions_count_in_process(name: str) -> None:
    tree = ast.parse(HONEST[name])
    assert entry_defined(tree, "Solution")
    facts = syntax_facts(tree, {"entry_top": "Solution", "ast_token_cap": 10})
    assert facts["entry_defined"] is True
    assert len(facts["tokens"]) == 10
    assert facts["tokens_truncated"] is True


@pytest.fixture(scope="module")
def scored(box: Sandbox) -> dict[str, dict[str, float]]:
    del box
    cases = {
        **{f"hostile/{k}": v for k, v in HOSTILE.items()},
        **{f"honest/{k}": v for k, v in HONEST.items()},
    }
    return {name: compute_score("leetcodedataset", fenced(code), GT) for name, code in cases.items()}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_score_no_format(name: str, scored: dict[str, dict[str, float]]) -> None:
    result = scored[f"hostile/{name}"]
    assert result["format_reward"] == 0.0
    assert result["syntax_reward"] == 1.0  # they parse: the tree decides, not the fallback
    assert result["accuracy_reward"] == 0.0 or name == "assignment"


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_programs_keep_format(name: str, scored: dict[str, dict[str, float]]) -> None:
    result = scored[f"honest/{name}"]
    assert (result["format_reward"], result["accuracy_reward"]) == (1.0, 1.0)


def test_an_unparsable_program_keeps_the_reference_rule(box: Sandbox) -> None:
    """No tree, nothing else earned: format is the reference's ``class Solution`` substring rule."""
    del box
    broken = compute_score("x", fenced("class Solution:\n    def solve(self, n)\n        return n\n"), GT)
    assert (broken["format_reward"], broken["syntax_reward"]) == (1.0, 0.0)
    assert broken["score"] == pytest.approx(0.05)
    unfenced = compute_score("x", HONEST["plain"], GT)
    assert (unfenced["format_reward"], unfenced["accuracy_reward"]) == (0.0, 1.0)
