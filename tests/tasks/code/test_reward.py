"""Each reward component on hand-written cases, the stage chain, options and extraction."""

from __future__ import annotations

import json

import pytest

from corrgrpo_tasks.code import COMPONENTS, DEFAULT_WEIGHTS, CodeRewardConfig, compute_score, extract_code
from corrgrpo_tasks.sandbox import Sandbox

REFERENCE = (
    "class Solution:\n    def solve(self, n):\n        total = 0\n        for i in range(n):\n"
    "            total += i\n        return total\n"
)
GT = {
    "prompt": "from typing import *\n",
    "entry_point": "Solution().solve",
    "test": "def check(candidate):\n    for n in range(0, 30000, 1499):\n"
    "        assert candidate(n) == n * (n - 1) // 2\n",
    "reference_solution": REFERENCE,
}


def fenced(code: str) -> str:
    return f"Here is my answer.\n```python\n{code}```\nDone."


CASES = {
    "correct": fenced(REFERENCE),
    "wrong_answer": fenced("class Solution:\n    def solve(self, n):\n        return n\n"),
    "syntax_error": fenced("class Solution:\n    def solve(self, n)\n        return n\n"),
    "runtime_error": fenced("class Solution:\n    def solve(self, n):\n        return [][n]\n"),
    "own_assert": fenced(
        "class Solution:\n    def solve(self, n):\n        assert n < 0\n        return 0\n"
    ),
    "timeout": fenced("class Solution:\n    def solve(self, n):\n        while True:\n            pass\n"),
    "no_fence": REFERENCE,
    "extra_prints": fenced(
        "class Solution:\n    def solve(self, n):\n        print('debug', n)\n"
        "        return n * (n - 1) // 2\n"
    ),
    "compile_error": fenced("class Solution:\n    def solve(self, n):\n        return n\nreturn 1\n"),
    "missing_entry": fenced("def solve(n):\n    return n * (n - 1) // 2\n"),
}
#                      format syntax compile runtime accuracy
EXPECTED = {
    "correct": (1, 1, 1, 1, 1),
    "wrong_answer": (1, 1, 1, 1, 0),
    "syntax_error": (1, 0, 0, 0, 0),
    "runtime_error": (1, 1, 1, 0, 0),
    "own_assert": (1, 1, 1, 0, 0),
    "timeout": (1, 1, 1, 0, 0),
    "no_fence": (0, 1, 1, 1, 1),
    "extra_prints": (1, 1, 1, 1, 1),
    "compile_error": (1, 1, 0, 0, 0),  # parses; `return` outside a function fails at compile
    "missing_entry": (0, 1, 1, 0, 0),
}


@pytest.fixture(scope="module")
def results(box: Sandbox) -> dict[str, dict[str, float]]:
    del box
    return {
        name: compute_score("leetcodedataset", text, json.dumps(GT), timeout_seconds=2)
        for name, text in CASES.items()
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_stage_components(name: str, results: dict[str, dict[str, float]]) -> None:
    got = results[name]
    stages = tuple(int(got[k]) for k in COMPONENTS[:5])
    assert stages == EXPECTED[name], got
    assert set(got) >= {"score", *COMPONENTS}
    weighted = sum(w * got[k] for w, k in zip(DEFAULT_WEIGHTS, COMPONENTS, strict=False))
    assert got["score"] == pytest.approx(weighted)
    if not got["accuracy_reward"]:
        assert got["efficiency_reward"] == 0.0
        assert got["efficiency_applied"] == 0.0
    assert got["timeout"] == float(name == "timeout")


def test_ast_similarity(results: dict[str, dict[str, float]]) -> None:
    assert results["correct"]["ast_similarity_reward"] == pytest.approx(1.0)
    assert 0.0 < results["wrong_answer"]["ast_similarity_reward"] < 1.0
    assert results["syntax_error"]["ast_similarity_reward"] == 0.0
    renamed = fenced(REFERENCE.replace("total", "acc").replace("n)", "m)").replace("(n", "(m"))
    assert compute_score("x", renamed, GT)["ast_similarity_reward"] == pytest.approx(1.0)


def test_efficiency_fast_beats_slow(box: Sandbox) -> None:
    del box
    fast = compute_score(
        "x", fenced("class Solution:\n    def solve(self, n):\n        return n * (n - 1) // 2\n"), GT
    )
    slow = compute_score(
        "x",
        fenced(
            "class Solution:\n    def solve(self, n):\n        total = 0\n"
            "        for i in range(n):\n            for _ in range(3):\n"
            "                pass\n            total += i\n        return total\n"
        ),
        GT,
    )
    assert fast["accuracy_reward"] == slow["accuracy_reward"] == 1.0
    assert fast["efficiency_applied"] == slow["efficiency_applied"] == 1.0
    # Only comparisons within this run (never a fixed threshold: the figures move with the machine's
    # load): the O(1) program beats the O(n) reference and the 4n program, which loses to it.
    assert fast["generated_runtime_seconds"] < fast["reference_runtime_seconds"]
    assert fast["generated_runtime_seconds"] < slow["generated_runtime_seconds"]
    assert fast["efficiency_reward"] > slow["efficiency_reward"] == 0.0
    assert slow["generated_runtime_seconds"] > slow["reference_runtime_seconds"]


def test_efficiency_against_stored_reference_runtime(box: Sandbox) -> None:
    del box
    gt = {**GT, "reference_solution": None, "reference_runtime_seconds": 10.0}
    result = compute_score("x", CASES["correct"], gt)
    assert result["efficiency_applied"] == 1.0
    assert result["efficiency_reward"] > 0.9
    assert result["ast_reference_available"] == 0.0
    assert result["ast_similarity_reward"] == 0.0
    none = compute_score("x", CASES["correct"], {**GT, "reference_solution": None})
    assert none["efficiency_applied"] == 0.0
    assert none["efficiency_reward"] == 0.0


def test_stdio_verifier(box: Sandbox) -> None:
    del box
    gt = {"kind": "stdio", "tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10"}]}
    good = "```python\nimport sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n```"
    bad = "```python\nprint(0)\n```"
    assert compute_score("livecodebench", good, gt)["accuracy_reward"] == 1.0
    assert (
        compute_score("livecodebench", "```python\nprint(sum(map(int, open(0).read().split())))\n```", gt)[
            "accuracy_reward"
        ]
        == 1.0
    )
    wrong = compute_score("livecodebench", bad, gt)
    assert (wrong["runtime_reward"], wrong["accuracy_reward"]) == (1.0, 0.0)


def test_weights_and_kwargs() -> None:
    assert CodeRewardConfig.from_kwargs({"correctness_weight": 1.0}).weights[4] == 1.0
    assert CodeRewardConfig.from_kwargs({"weights": {"format_reward": 0.5}}).weights[0] == 0.5
    assert CodeRewardConfig.from_kwargs({"memory_limit_mb": 512, "unrelated": 1}).memory_mb == 512
    with pytest.raises(ValueError, match="7 entries"):
        CodeRewardConfig(weights=(1.0,))
    with pytest.raises(ValueError, match="non-negative"):
        CodeRewardConfig(weights=(-1.0,) * 7)
    with pytest.raises(ValueError, match="unknown weight names"):
        CodeRewardConfig.from_kwargs({"weights": {"speed": 1.0}})


def test_invalid_ground_truth_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        compute_score("x", "y", "{nope")
    with pytest.raises(ValueError, match="entry_point"):
        compute_score("x", "y", {"test": "def check(c): pass"})
    with pytest.raises(ValueError, match="kind"):
        compute_score("x", "y", {"kind": "other"})


def test_extract_code() -> None:
    assert extract_code("no code here", entry_name="Solution") == ("no code here", False)
    text = "```\nprint(1)\n```\n```python\nclass Solution:\n    pass\n```\n```py\nx = 1\n```"
    assert extract_code(text) == ("class Solution:\n    pass", True)
    assert extract_code("<think>class Solution: bad</think>\nSure:\nclass Solution:\n    pass\n") == (
        "class Solution:\n    pass",
        False,
    )
    assert extract_code("```java\nclass Solution {}\n```")[1] is False


def test_batch_survives_bad_samples(box: Sandbox) -> None:
    from corrgrpo_tasks.code import score_batch

    del box
    texts = [CASES["correct"], CASES["correct"], CASES["timeout"], None]
    truths = [GT, "{broken", GT, GT]
    scores = score_batch(texts, truths, timeout_seconds=1.0)  # type: ignore[arg-type]
    assert [s["accuracy_reward"] for s in scores] == [1.0, 0.0, 0.0, 0.0]
    assert [s["sandbox_error"] for s in scores] == [0.0, 1.0, 0.0, 0.0]
    assert scores[1]["score"] == 0.0
    with pytest.raises(ValueError, match="ground truths"):
        score_batch(texts, truths[:2])


def test_reward_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    from corrgrpo_tasks.code import _lanes
    from corrgrpo_tasks.sandbox import SandboxUnavailableError, _core

    monkeypatch.setattr(_core.shutil, "which", lambda name: None)
    _lanes.sandbox_for.cache_clear()
    try:
        with pytest.raises(SandboxUnavailableError, match="apt-get install -y bubblewrap"):
            compute_score("leetcodedataset", CASES["correct"], GT)
        from corrgrpo_tasks.code import score_batch

        with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
            score_batch([CASES["correct"]], [GT])
    finally:
        _lanes.sandbox_for.cache_clear()


def test_unsafe_mode_scores_and_never_wipes_the_host_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import tempfile
    import warnings

    from corrgrpo_tasks.code import _lanes
    from corrgrpo_tasks.sandbox import _core

    keep = tempfile.NamedTemporaryFile(prefix="corrgrpo-keep-", dir="/tmp", delete=False)  # noqa: SIM115
    keep.close()
    monkeypatch.setattr(_core.shutil, "which", lambda name: None)
    _lanes.sandbox_for.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            good = compute_score("x", CASES["correct"], GT, allow_unsafe=True)
            bad = compute_score("x", CASES["wrong_answer"], GT, allow_unsafe=True)
        assert (good["accuracy_reward"], bad["accuracy_reward"]) == (1.0, 0.0)
        assert os.path.exists(keep.name)  # the rlimits-only servers must not clean the host's /tmp
    finally:
        _lanes._LANES.close()
        _lanes.sandbox_for.cache_clear()
        os.unlink(keep.name)
