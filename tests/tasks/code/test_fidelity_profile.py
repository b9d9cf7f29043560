"""``profile="hardened"``: a program that gives up or swallows its errors earns no more than an honest
failed attempt; the paper's profile (the default) pays both for "running". Since issue 35 the hardened
AST similarity of a failing program is paid in the share of asserts it passed (``test_hardened_code.py``):
here every failure passes none, so they tie at 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrgrpo_tasks.code import COMPONENTS, CodeRewardConfig, compute_score
from corrgrpo_tasks.sandbox import Sandbox

FIXTURES = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
ROW = json.loads((FIXTURES / "leetcode_train.jsonl").read_text().splitlines()[0])
VERIFIER = {k: ROW[k] for k in ("prompt", "test", "entry_point")} | {"reference_solution": ROW["completion"]}
HEAD = "class Solution:\n    def twoSum(self, nums, target):\n"
BODY = (
    "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return [seen[target - x], i]\n            seen[x] = i\n"
)
PROGRAMS = {
    "honest_crash": HEAD + "        _ = 1 // 0\n" + BODY,  # the right idea with one bug
    "swallowed": HEAD
    + "        try:\n            _ = 1 // 0\n"
    + "".join("    " + line + "\n" for line in BODY.splitlines())
    + "        except Exception:\n            return None\n",
    "stub": HEAD + "        return None\n",
    "correct": HEAD + BODY,
}


@pytest.fixture(scope="module")
def scores(box: Sandbox) -> dict[str, dict[str, dict[str, float]]]:
    del box
    return {
        profile: {
            name: compute_score("leetcodedataset", f"```python\n{program}```", VERIFIER, profile=profile)
            for name, program in PROGRAMS.items()
        }
        for profile in ("paper", "hardened")
    }


def test_the_paper_pays_giving_up_more_than_trying(scores: dict[str, dict[str, dict[str, float]]]) -> None:
    paper = scores["paper"]
    assert paper["stub"]["runtime_reward"] == paper["swallowed"]["runtime_reward"] == 1.0
    assert paper["honest_crash"]["runtime_reward"] == 0.0
    assert paper["stub"]["score"] > paper["honest_crash"]["score"]
    assert paper["swallowed"]["score"] > paper["honest_crash"]["score"]


def test_hardened_pays_no_cheat_more_than_an_honest_failure(
    scores: dict[str, dict[str, dict[str, float]]],
) -> None:
    hardened = scores["hardened"]
    honest = hardened["honest_crash"]["score"]
    assert hardened["stub"]["score"] <= honest
    assert hardened["swallowed"]["score"] <= honest
    assert hardened["correct"]["score"] > 1.0
    for name in PROGRAMS:
        assert hardened[name]["runtime_reward"] == hardened[name]["accuracy_reward"]


def test_only_runtime_and_ast_differ_between_profiles(scores: dict[str, dict[str, dict[str, float]]]) -> None:
    for name in PROGRAMS:
        for key in COMPONENTS:
            if key not in (
                "runtime_reward",
                "efficiency_reward",
                "ast_similarity_reward",
            ):  # efficiency: noise
                assert scores["paper"][name][key] == scores["hardened"][name][key], (name, key)
        paper, hardened = (scores[p][name]["ast_similarity_reward"] for p in ("paper", "hardened"))
        assert hardened == (paper if scores["paper"][name]["accuracy_reward"] else 0.0), name


def test_profile_is_validated() -> None:
    assert CodeRewardConfig().profile == "paper"
    assert CodeRewardConfig.from_kwargs({"profile": "hardened"}).profile == "hardened"
    with pytest.raises(ValueError, match="profile must be one of"):
        CodeRewardConfig(profile="strict")
