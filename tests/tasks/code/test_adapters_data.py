"""TRL / OpenRLHF shapes (shared scoring per batch), loaders on fixtures, conversion, evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

from corrgrpo_tasks.code import COMPONENTS, data, make_openrlhf_reward_func, trl_reward_functions
from corrgrpo_tasks.code.evaluate import evaluate
from corrgrpo_tasks.sandbox import Sandbox

FIXTURES = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def leetcode() -> list[data.CodeTask]:
    return data.load_leetcode("train", data_files=str(FIXTURES / "leetcode_train.jsonl"))


def reference_completion(task: data.CodeTask) -> str:
    return f"```python\n{task.verifier['reference_solution']}```"


def test_trl_functions_share_one_scoring(
    leetcode: list[data.CodeTask], box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    from corrgrpo_tasks.code import _reward

    original = _reward._score_one

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)  # one judge job per scored program
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_reward, "_score_one", counting)
    del box
    funcs = trl_reward_functions()
    assert [f.__name__ for f in funcs] == list(COMPONENTS)
    rows = data.to_trl_rows(leetcode)
    completions = [[{"role": "assistant", "content": reference_completion(t)}] for t in leetcode] + [
        "nothing"
    ]
    truths = [r["ground_truth"] for r in rows] + [None]
    prompts = [r["prompt"] for r in rows] + [[]]
    outputs = [f(prompts, completions, ground_truth=truths) for f in funcs]
    assert len(calls) == len(leetcode)  # once per program, not once per component
    accuracy = outputs[COMPONENTS.index("accuracy_reward")]
    assert accuracy == [1.0] * len(leetcode) + [None]
    with pytest.raises(KeyError, match="ground_truth"):
        funcs[0](prompts, completions)


def test_openrlhf_reward_func(leetcode: list[data.CodeTask], box: Sandbox) -> None:
    import torch

    del box
    func = make_openrlhf_reward_func(timeout_seconds=3)
    rows = data.to_openrlhf_rows(leetcode)
    prompts = ["PROMPT: " + t.prompt for t in leetcode]
    queries = [p + reference_completion(t) for p, t in zip(prompts, leetcode, strict=False)]
    queries[0] = prompts[0] + "no code"
    out = func(queries, prompts, [r["label"] for r in rows])
    assert out["rewards"].dtype == torch.float32
    assert out["rewards"].shape == (len(leetcode),)
    assert set(out["extra_logs"]) == set(COMPONENTS)
    assert out["extra_logs"]["accuracy_reward"].tolist() == [0.0] + [1.0] * (len(leetcode) - 1)
    assert torch.equal(out["scores"], out["rewards"])


def test_loaders_and_conversions() -> None:
    test = data.load_leetcode("test", data_files=str(FIXTURES / "leetcode_test.jsonl"))
    assert [t.task_id for t in test] == ["max-element", "count-evens"]
    assert test[0].verifier["entry_point"] == "Solution().maxElement"
    he = data.load_humaneval(data_files=str(FIXTURES / "humaneval.jsonl"))
    mbpp = data.load_mbpp(data_files=str(FIXTURES / "mbpp.jsonl"))
    lcb = data.load_livecodebench(data_files=str(FIXTURES / "livecodebench.jsonl"))
    assert mbpp[0].verifier["entry_point"] == "remove_Occ"
    assert "def check(candidate)" in mbpp[0].verifier["test"]
    assert {t.verifier["kind"] for t in lcb} == {"stdio", "check"}
    assert (
        len(next(t for t in lcb if t.verifier["kind"] == "stdio").verifier["tests"]) == 3
    )  # private decoded
    verl = data.to_verl_rows(he)
    assert verl[0]["data_source"] == "humaneval"
    assert verl[0]["prompt"][-1]["role"] == "user"
    assert verl[0]["reward_model"]["style"] == "rule"
    with pytest.raises(ValueError, match="split"):
        data.load_leetcode("dev")


def test_every_benchmark_reference_passes(box: Sandbox) -> None:
    del box
    from corrgrpo_tasks.code import score_batch

    tasks = [
        *data.load_humaneval(data_files=str(FIXTURES / "humaneval.jsonl")),
        *data.load_mbpp(data_files=str(FIXTURES / "mbpp.jsonl")),
    ]
    lcb = data.load_livecodebench(data_files=str(FIXTURES / "livecodebench.jsonl"))
    solutions = {
        "abc999_a": "a, b = map(int, input().split())\nprint(a + b)\n",
        "9100": "class Solution:\n    def double(self, x):\n        return 2 * x\n",
    }
    completions = [reference_completion(t) for t in tasks] + [
        f"```python\n{solutions[t.task_id]}```" for t in lcb
    ]
    scores = score_batch(completions, [t.ground_truth for t in [*tasks, *lcb]])
    assert [s["accuracy_reward"] for s in scores] == [1.0] * len(scores)


def test_evaluate_pass_at_1_executable_efficiency(box: Sandbox) -> None:
    del box
    tasks = data.load_leetcode("test", data_files=str(FIXTURES / "leetcode_test.jsonl"))
    fast_max = "```python\nclass Solution:\n    def maxElement(self, nums):\n        return max(nums)\n```"
    report = evaluate(
        [
            fast_max,
            ("```python\nclass Solution:\n    def countEvens(self, nums):\n        return 1 / 0\n```"),
        ],
        [t.ground_truth for t in tasks],
        rounds=4,
    )
    summary = report.summary()
    assert summary["pass@1"] == 50.0
    assert summary["executable"] == 50.0
    assert report.n_qualified == 1
    # The share of the 4 rounds in which the one qualified sample beat the reference: which share is the
    # machine's timing noise (a loaded CI box gave 25 for a program as fast as the reference), so this
    # checks the aggregation, not a speed (speed belongs to benchmarks; code_metrics' doctest has exact numbers).
    assert summary["efficiency"] in {0.0, 25.0, 50.0, 75.0, 100.0}
