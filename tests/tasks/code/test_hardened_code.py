"""Issue 35, code: the hardened profile's AST similarity is that of the live code (dead and unused code
removed) and is paid to a failing program only in the share of the reference's asserts it passed, so an
input-independent program never beats an honest failed attempt and padding moves nothing. The paper's
profile is untouched (its AST similarity is the authors' definition: ``test_fidelity_rows.py``).

``python tests/tasks/code/test_hardened_code.py`` prints each program's score under both profiles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corrgrpo_tasks.code import COMPONENTS, compute_score
from corrgrpo_tasks.code.sandboxed._syntax import ast_tokens, prune
from corrgrpo_tasks.sandbox import Sandbox

FIXTURES = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
ROW = json.loads((FIXTURES / "leetcode_train.jsonl").read_text().splitlines()[0])  # two-sum, 3 asserts
VERIFIER = {k: ROW[k] for k in ("prompt", "test", "entry_point")} | {"reference_solution": ROW["completion"]}
HEAD = "class Solution:\n    def twoSum(self, nums, target):\n"
BODY = (
    "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return [seen[target - x], i]\n            seen[x] = i\n"
)
ONE_LINE = (
    "        return next([i, j] for i in range(len(nums)) for j in range(i + 1, len(nums))"
    " if nums[i] + nums[j] == target)\n"
)
PROGRAMS = {
    "correct": HEAD + BODY,
    "one_line": HEAD + ONE_LINE,
    "one_line_padded": HEAD + ONE_LINE + BODY + "\n    def spare(self, a):\n        return a * 2\n",
    # Honest attempts: a realistic bug (a duplicate pair is missed: 2 of 3 asserts), and a crash.
    "honest_bug": HEAD + "        seen = {}\n        for i, x in enumerate(nums):\n            seen[x] = i\n"
    "            if target - x in seen and seen[target - x] != i:\n                return [seen[target - x], i]\n",
    "honest_crash": HEAD + "        _ = 1 // 0\n" + BODY,
    # Input-independent programs and the reference's tree with a literal changed.
    "stub": HEAD + "        return None\n",
    "skeleton": HEAD + "        res = 0\n        for i in range(10):\n            if i % 2 == 0:\n"
    "                res += i\n        return res\n",
    "stub_dead_copy": HEAD + "        return None\n" + BODY,
    "literal_changed": HEAD + BODY.replace("[seen[target - x], i]", "[seen[target - x], i + 1]"),
}
HONEST_FAILURES = ("honest_bug", "honest_crash")
INPUT_INDEPENDENT = ("stub", "skeleton", "stub_dead_copy")


def scored() -> dict[str, dict[str, dict[str, Any]]]:
    return {
        profile: {
            name: compute_score("leetcodedataset", f"```python\n{program}```", VERIFIER, profile=profile)
            for name, program in PROGRAMS.items()
        }
        for profile in ("paper", "hardened")
    }


@pytest.fixture(scope="module")
def scores(box: Sandbox) -> dict[str, dict[str, dict[str, Any]]]:
    del box
    return scored()


def total(result: dict[str, Any]) -> float:
    return sum(result[k] for k in COMPONENTS)


def test_the_paper_pays_input_independent_programs_over_an_honest_crash(
    scores: dict[str, dict[str, dict[str, Any]]],
) -> None:
    paper = scores["paper"]
    assert total(paper["skeleton"]) > total(paper["honest_crash"])  # the hack the issue names
    assert total(paper["stub_dead_copy"]) > total(paper["honest_crash"])
    assert (
        paper["literal_changed"]["ast_similarity_reward"] > 0.8 > paper["literal_changed"]["accuracy_reward"]
    )


def test_hardened_never_pays_an_input_independent_program_over_an_honest_failure(
    scores: dict[str, dict[str, dict[str, Any]]],
) -> None:
    hardened = scores["hardened"]
    for cheat in (*INPUT_INDEPENDENT, "literal_changed"):
        for honest in HONEST_FAILURES:
            assert hardened[cheat]["score"] <= hardened[honest]["score"], (cheat, honest)
            assert total(hardened[cheat]) <= total(hardened[honest]), (cheat, honest)
        assert hardened[cheat]["ast_similarity_reward"] == 0.0  # no assert passed: no similarity paid
    # The realistic failure passes 2 of the reference's 3 asserts: two thirds of its similarity.
    bug = hardened["honest_bug"]["ast_similarity_reward"]
    assert bug == pytest.approx(scores["paper"]["honest_bug"]["ast_similarity_reward"] * 2 / 3, abs=0.02)
    assert hardened["honest_bug"]["score"] > max(hardened[c]["score"] for c in INPUT_INDEPENDENT)


def test_dead_and_unused_code_moves_nothing_under_hardened(
    scores: dict[str, dict[str, dict[str, Any]]],
) -> None:
    hardened, paper = scores["hardened"], scores["paper"]
    assert hardened["one_line_padded"]["accuracy_reward"] == hardened["one_line"]["accuracy_reward"] == 1.0
    assert (
        hardened["one_line_padded"]["ast_similarity_reward"] == hardened["one_line"]["ast_similarity_reward"]
    )
    assert paper["one_line_padded"]["ast_similarity_reward"] > paper["one_line"]["ast_similarity_reward"]
    assert hardened["correct"]["ast_similarity_reward"] == paper["correct"]["ast_similarity_reward"]


def test_prune_removes_what_cannot_run_or_is_never_read() -> None:
    import ast

    source = (
        "import math\nCONST = 3\nclass Solution:\n    '''doc'''\n    def twoSum(self, nums, target):\n"
        "        x = helper(nums)\n        return x\n        y = 1\n    def spare(self):\n        return 0\n"
        "def helper(a):\n    if False:\n        a = a * 2\n    while 0:\n        pass\n    return a\n"
        "def unused():\n    return unused2()\ndef unused2():\n    return 1\n"
    )
    pruned = ast.unparse(prune(ast.parse(source), {"Solution", "twoSum"}))
    expected = (
        "import math\n\nclass Solution:\n\n    def twoSum(self, nums, target):\n        x = helper(nums)\n"
        "        return x\n\ndef helper(a):\n    return a"
    )
    assert pruned == expected
    tree = ast.parse(PROGRAMS["correct"])
    assert ast_tokens(prune(tree, {"Solution", "twoSum"}), 10_000) == ast_tokens(
        ast.parse(PROGRAMS["correct"]), 10_000
    )


if __name__ == "__main__":
    results = scored()
    for profile, rows in results.items():
        print(f"profile={profile}")
        for name, result in rows.items():
            print(
                f"  {name:18s} score {result['score']:.3f} sum {total(result):.3f}"
                f" ast {result['ast_similarity_reward']:.3f} accuracy {result['accuracy_reward']:.0f}"
            )
