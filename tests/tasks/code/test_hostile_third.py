"""The third adversary (issue 34): programs written after reading the judge of issue 25, one class per family.

1. handles answering the test's questions (``in``, ``startswith``, a method shadowed by an attribute);
2. names and prompts: a helper predicate of the reference's, MBPP's shown asserts as a lookup table;
3. the stdin/stdout comparator (non-canonical numbers, a tolerance nobody stated);
4. the harness and the noise as efficiency: the harness's modules and frames within reach, the
   reference scored against itself;
5. a session forging a lane failure;
6. honest false negatives: generator, iterator, value-type and numpy results, which must pass.

Every cheat gets ``accuracy_reward == 0`` and ``efficiency_reward == 0``; a forged lane failure also gets
``sandbox_error == 0`` (it is the program's failure, not the sandbox's) and starts no lane. Honest controls
keep ``accuracy_reward == 1``. ``python tests/tasks/code/test_hostile_third.py`` prints, per family, how
many cheats earn and how many honest controls pass on the tree it imports (``PYTHONPATH=<tree>/tasks``
scores an older tree).
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from typing import Any

import pytest

from corrgrpo_tasks.code import compute_score, score_batch
from corrgrpo_tasks.sandbox import Sandbox

OPTIONS: dict[str, Any] = {"timeout_seconds": 3.0, "keep_error": True}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def check(*lines: str) -> str:
    return "def check(candidate):\n" + "".join(f"    {line}\n" for line in lines)


def task(test: str, entry: str, reference: str | None, prompt: str = "") -> dict[str, Any]:
    return {"prompt": prompt, "test": test, "entry_point": entry, "reference_solution": reference}


def stdio(expected: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "stdio", "tests": [{"input": "", "output": expected}], **extra}


POINT = (
    "class Point:\n    def __init__(self, x=0, y=0):\n        self.x = x\n        self.y = y\n"
    "    def norm2(self):\n        return self.x * self.x + self.y * self.y\n"
)
SORT_REF = "def is_sorted(xs):\n    return all(a <= b for a, b in zip(xs, xs[1:]))\n\ndef sort_list(xs):\n    return sorted(xs)\n"
SORT = task(
    check("assert is_sorted(sort_list([3, 1, 2]))", "assert is_sorted(sort_list([9, 7]))"),
    "sort_list",
    SORT_REF,
)
MBPP_ROW = {  # MBPP's schema; the prompt of purpose="evaluate" shows all three asserts
    "task_id": 12,
    "text": "Write a function to find the square of the largest number in a list.",
    "code": "def square_max(xs):\n    return max(xs) ** 2",
    "test_list": [
        "assert square_max([1, 2, 3]) == 9",
        "assert square_max([-5, 4]) == 16",
        "assert square_max([10, 11]) == 121",
    ],
    "test_setup_code": "",
    "challenge_test_list": ["assert square_max([-20, 30]) == 900"],
}
LOOKUP = "def square_max(xs):\n    return {(1, 2, 3): 9, (-5, 4): 16, (10, 11): 121}.get(tuple(xs), 0)\n"
FORGE_LANE = (
    "import os, stat\n"
    "def f():\n"
    '    frame = b\'["t",2,"s","lane_error","s","confinement failed"]\'\n'
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
    "                os.write(fd, len(frame).to_bytes(4, 'big') + frame)\n"
    "        except OSError:\n"
    "            pass\n"
    "    return 1\n"
)
RETURNS_TRUE = task(check("assert candidate() == True"), "f", "def f():\n    return True\n")

# family -> name -> (completion, ground truth, extra options)
CHEATS: dict[str, dict[str, tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "handles": {
        "contains_says_yes": (
            (
                "class Bag:\n    def __contains__(self, item):\n        return True\n"
                "def fruits(n):\n    return Bag()\n"
            ),
            task(
                check("assert 'apple' in candidate(2)", "assert 'kiwi' in candidate(1)"),
                "fruits",
                "def fruits(n):\n    return ['apple', 'kiwi'] * n\n",
            ),
            {},
        ),
        "startswith_says_yes": (
            (
                "class Text:\n    def startswith(self, prefix):\n        return True\n"
                "def word(n):\n    return Text()\n"
            ),
            task(
                check("assert candidate(2).startswith('abab')"), "word", "def word(n):\n    return 'ab' * n\n"
            ),
            {},
        ),
        "issuperset_says_yes": (
            (
                "class Everything:\n    def issuperset(self, other):\n        return True\n"
                "def letters(s):\n    return Everything()\n"
            ),
            task(
                check("assert candidate('abc').issuperset({'a', 'c'})"),
                "letters",
                "def letters(s):\n    return set(s)\n",
            ),
            {},
        ),
        "attribute_shadows_method": (
            "def point(a):\n    p = Point(0, 0)\n    p.norm2 = lambda: 25\n    return p\n",
            task(check("assert candidate(3).norm2() == 25"), "point", None, POINT),
            {},
        ),
    },
    "names": {
        "helper_of_the_reference_replaced": (
            "def is_sorted(xs):\n    return True\n\ndef sort_list(xs):\n    return list(xs)\n",
            SORT,
            {},
        ),
        "mbpp_lookup_of_the_shown_asserts": (LOOKUP, {"mbpp": "train"}, {}),
    },
    "stdio": {
        "leading_zeros": ("print(101)\n", stdio("00000101"), {}),
        "integer_for_a_half": ("print(2500000)\n", stdio("2500000.5"), {}),
        "zero_for_a_small_number": ("print(0)\n", stdio("0.0000005"), {}),
        "stated_tolerance_is_capped": ("print(2500000)\n", stdio("2500000.5", tolerance=1e-6), {}),
    },
    "harness": {
        "finds_the_codec_by_name": (
            "import sys\ndef f():\n    return '_wire' in sys.modules\n",
            RETURNS_TRUE,
            {},
        ),
        "finds_the_session_in_its_callers_frame": (
            "import sys\ndef f():\n    return 'self' in sys._getframe(1).f_locals\n",
            RETURNS_TRUE,
            {},
        ),
        "finds_the_harness_as_main": (
            "import sys\ndef f():\n    return hasattr(sys.modules.get('__main__'), '_Session')\n",
            RETURNS_TRUE,
            {},
        ),
    },
    "lane": {
        "forged_lane_failure": (
            FORGE_LANE,
            task(check("assert candidate() == 1"), "f", "def f():\n    return 1\n"),
            {},
        )
    },
}

RANGE_REF = "def evens(n):\n    return list(range(0, n, 2))\n"
EVENS = task(
    check(
        "assert list(candidate(7)) == [0, 2, 4, 6]",
        "assert sum(candidate(5)) == 6",
        "assert sorted(candidate(3)) == [0, 2]",
    ),
    "evens",
    RANGE_REF,
)
HONEST: dict[str, dict[str, tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "handles": {
        "design_problem": (
            (
                "class Counter:\n    def __init__(self):\n        self.n = 0\n    def add(self, k):\n        self.n += k\n"
                "        return self.n\n    def __len__(self):\n        return self.n\n"
            ),
            task(
                check("c = Counter()", "assert c.add(2) == 2 and c.add(3) == 5", "assert len(c) == 5"),
                "None",
                "class Counter:\n    def __init__(self):\n        self.n = 0\n    def add(self, k):\n        self.n += k\n"
                "        return self.n\n    def __len__(self):\n        return self.n\n",
            ),
            {},
        ),
        "dataset_object_with_an_extra_attribute": (
            "def point(a):\n    p = Point(a, 4)\n    p.seen = True\n    return p\n",
            task(
                check("assert candidate(3).norm2() == 25"),
                "point",
                "def point(a):\n    return Point(a, 4)\n",
                POINT,
            ),
            {},
        ),
    },
    "names": {
        "sorts_without_defining_the_helper": ("def sort_list(xs):\n    return sorted(xs)\n", SORT, {}),
        "mbpp_reference_trained_on_hidden_tests": (MBPP_ROW["code"], {"mbpp": "train"}, {}),
    },
    "stdio": {
        "same_value_other_form": ("print('5.0 0.50')\n", stdio("5 0.5"), {}),
        "within_the_stated_tolerance": ("print(1.0000009)\n", stdio("1.0", tolerance=1e-6), {}),
        "exact_text": ("print('00000101')\n", stdio("00000101"), {}),
    },
    "harness": {"plain_program": ("def f():\n    return True\n", RETURNS_TRUE, {})},
    "lane": {
        "returns_one": (
            "def f():\n    return 1\n",
            task(check("assert candidate() == 1"), "f", "def f():\n    return 1\n"),
            {},
        )
    },
    "false_negatives": {
        "generator": ("def evens(n):\n    yield from range(0, n, 2)\n", EVENS, {}),
        "map": ("def evens(n):\n    return map(lambda k: 2 * k, range((n + 1) // 2))\n", EVENS, {}),
        "reversed": ("def evens(n):\n    return reversed(range(((n - 1) // 2) * 2, -1, -2))\n", EVENS, {}),
        "iter": ("def evens(n):\n    return iter(list(range(0, n, 2)))\n", EVENS, {}),
        "len_of_a_generator_is_a_type_error": (
            "def g():\n    yield 1\n",
            task(
                check(
                    "x = candidate()",
                    "try:\n        len(x)\n    except TypeError:\n        pass\n    else:\n        assert False",
                    "assert list(x) == [1]",
                ),
                "g",
                "def g():\n    yield 1\n",
            ),
            {},
        ),
        "complex": (
            "def z(a):\n    return complex(a, -1)\n",
            task(check("assert candidate(2) == 2 - 1j"), "z", "def z(a):\n    return a - 1j\n"),
            {},
        ),
        "complex_argument": (
            "import cmath\ndef phase(a, b):\n    return cmath.phase(a + b)\n",
            task(
                check("assert candidate(0, 1j) == 1.5707963267948966"),
                "phase",
                "import cmath\ndef phase(a, b):\n    return cmath.phase(a + b)\n",
            ),
            {},
        ),
        "fraction": (
            "from fractions import Fraction\ndef half(a):\n    return Fraction(a, 2)\n",
            task(
                check(
                    "from fractions import Fraction",
                    "assert candidate(3) == Fraction(3, 2)",
                    "assert candidate(4) == 2",
                ),
                "half",
                "from fractions import Fraction\ndef half(a):\n    return Fraction(a) / 2\n",
            ),
            {},
        ),
        "decimal": (
            "from decimal import Decimal\ndef cents(a):\n    return Decimal(a) / 100\n",
            task(
                check("from decimal import Decimal", "assert candidate(5) == Decimal('0.05')"),
                "cents",
                "from decimal import Decimal\ndef cents(a):\n    return Decimal(a) / Decimal(100)\n",
            ),
            {},
        ),
        "bytes_and_bytearray": (
            "def raw(s):\n    return s.encode(), bytearray(s.encode())\n",
            task(
                check("assert candidate('ab') == (b'ab', bytearray(b'ab'))"),
                "raw",
                "def raw(s):\n    return bytes(s, 'ascii'), bytearray(s, 'ascii')\n",
            ),
            {},
        ),
        "numpy_scalars": (
            "import numpy as np\ndef stats(xs):\n    a = np.array(xs)\n    return a.sum(), a.mean(), np.bool_(a.all()), np.array(a.max())\n",
            task(
                check("assert candidate([1, 2, 3]) == (6, 2.0, True, 3)"),
                "stats",
                "def stats(xs):\n    return sum(xs), sum(xs) / len(xs), all(xs), max(xs)\n",
            ),
            {"sandbox_packages": ("numpy",)},
        ),
    },
}


def _mbpp(purpose: str) -> dict[str, Any]:
    import json
    import tempfile
    from pathlib import Path

    data = pytest.importorskip("corrgrpo_tasks.code.data")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mbpp.jsonl"
        path.write_text(json.dumps(MBPP_ROW) + "\n")
        try:
            (row,) = data.load_mbpp(data_files=str(path), purpose=purpose)
        except TypeError:  # a tree before issue 34: one prompt for both
            (row,) = data.load_mbpp(data_files=str(path))
    verifier: dict[str, Any] = row.verifier
    return verifier


def score(completion: str, truth: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    if "mbpp" in truth:
        truth = _mbpp(truth["mbpp"])
    return compute_score(None, fenced(completion), truth, **{**OPTIONS, **extra})


def _needs(extra: dict[str, Any]) -> None:
    if "numpy" in extra.get("sandbox_packages", ()):
        pytest.importorskip("numpy")


@pytest.mark.parametrize(("family", "name"), [(f, n) for f, cases in CHEATS.items() for n in cases])
def test_cheat_gains_nothing(family: str, name: str, box: Sandbox) -> None:
    del box
    completion, truth, extra = CHEATS[family][name]
    result = score(completion, truth, extra)
    assert result["accuracy_reward"] == 0.0, result
    assert result["efficiency_reward"] == 0.0, result
    assert result["sandbox_error"] == 0.0, result


@pytest.mark.parametrize(("family", "name"), [(f, n) for f, cases in HONEST.items() for n in cases])
def test_honest_controls_keep_their_score(family: str, name: str, box: Sandbox) -> None:
    del box
    completion, truth, extra = HONEST[family][name]
    _needs(extra)
    result = score(completion, truth, extra)
    assert result["accuracy_reward"] == 1.0, result
    assert result["runtime_reward"] == 1.0, result


def test_a_forged_lane_failure_poisons_the_sample_and_starts_no_lane(
    box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's claim is the program's: 0, ``sandbox_error == 0``, no retry on fresh lanes."""
    del box
    from corrgrpo_tasks.code import _lanes

    completion, truth, extra = CHEATS["lane"]["forged_lane_failure"]
    score(*HONEST["lane"]["returns_one"])  # a warm lane in the pool
    started: list[int] = []
    original = _lanes._Lane.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        started.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_lanes._Lane, "__init__", counting)
    result = score(completion, truth, extra)
    assert (result["accuracy_reward"], result["runtime_reward"], result["sandbox_error"]) == (0.0, 0.0, 0.0)
    assert "claimed a lane failure" in result["_error"]
    assert len(started) <= 1  # the poisoned lane's replacement at most, never three retries


def test_mbpp_shows_one_assert_for_training_and_flags_lookups_in_evaluation(box: Sandbox) -> None:
    del box
    from corrgrpo_tasks.code.evaluate import reward_options, score_problem

    train, evaluate = _mbpp("train"), _mbpp("evaluate")
    assert train["shown_tests"] == MBPP_ROW["test_list"][:1]
    assert "square_max([-20, 30]) == 900" in train["test"]  # scored on all asserts and the challenge list
    assert evaluate["shown_tests"] == MBPP_ROW["test_list"]
    assert "[-20, 30]" not in evaluate["test"]  # the standard tests: Pass@1 as published
    options = reward_options(rounds=2, timeout_seconds=5.0)
    cheat = score_problem(fenced(LOOKUP), evaluate, **options)
    honest = score_problem(fenced(MBPP_ROW["code"]), evaluate, **options)
    assert cheat["accuracy_reward"] == 1.0  # the shown asserts are the test: it passes them ...
    assert cheat["special_cases_shown_tests"] == 1.0  # ... and the record says how
    assert (honest["accuracy_reward"], honest["special_cases_shown_tests"]) == (1.0, 0.0)


def _paired_bound(candidate: list[float], reference: list[float]) -> float:
    """The standard error of the rounds' mean speed-up: what the noise alone could show."""
    gains = [1.0 - c / r for c, r in zip(candidate, reference, strict=False)]
    return statistics.stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else 0.0


def test_the_reference_against_itself_scores_zero_on_average(box: Sandbox) -> None:
    """16 scorings of the reference as its own candidate: the mean efficiency stays within a third of the
    rounds' own standard error (the minimum over rounds paid about half of it), never a time threshold."""
    del box
    reference = "def total(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
    truth = task(
        check("for n in range(0, 30000, 997):", "    assert candidate(n) == n * (n - 1) // 2"),
        "total",
        reference,
    )
    results = score_batch(
        [fenced(reference)] * 16, [truth] * 16, max_workers=2, keep_timing=True, timeout_seconds=5.0
    )
    assert all(r["accuracy_reward"] == 1.0 for r in results)
    timed = [r for r in results if "_timing" in r]
    assert len(timed) >= 12
    noise = statistics.mean(_paired_bound(*r["_timing"]) for r in timed)
    mean = statistics.mean(r["efficiency_reward"] for r in timed)
    assert mean <= noise / 3, (mean, noise)


def test_efficiency_pays_nothing_for_symmetric_noise() -> None:
    """The estimator on synthetic rounds (seeded, no timing): equal programs with a 10% spread score
    about 0 on average, a program twice as fast keeps most of its 0.5."""
    from corrgrpo_tasks.code._reward import efficiency

    rng = random.Random(34)

    def rounds(scale: float, n: int) -> list[float]:
        return [scale * math.exp(rng.gauss(0.0, 0.1)) for _ in range(n)]

    for n in (2, 3, 5):
        same = [efficiency(rounds(1.0, n), rounds(1.0, n)) for _ in range(4000)]
        old = [
            max(0.0, 1.0 - min(c) / min(r))
            for c, r in ((rounds(1.0, n), rounds(1.0, n)) for _ in range(4000))
        ]
        fast = [efficiency(rounds(0.5, n), rounds(1.0, n)) for _ in range(500)]
        assert statistics.mean(same) < 0.01 < statistics.mean(old)
        assert statistics.mean(fast) > 0.25
    assert efficiency([1.0], [2.0]) == 0.0  # one pair: no noise estimate, nothing paid
    assert efficiency([1.0, 1.0], [], 4.0) == 0.75  # a stored reference runtime: the paper's formula


def test_timed_rounds_stay_paired() -> None:
    """A round faster than the server can tell from an empty session reads 0 and still counts (it was
    dropped, pairing every later round with the wrong one); a list with a value that is no time at all
    is no measurement."""
    from corrgrpo_tasks.code._reward import _times, efficiency

    assert _times([0.0, 0.001, 0.0]) == [0.0, 0.001, 0.0]
    assert efficiency(_times([0.0, 0.001, 0.0]), _times([0.01, 0.011, 0.01])) > 0.8
    for broken in ([0.001, -1.0, 0.001], [0.001, float("nan")], [0.001, True], [0.001, "0.1"], "0.1"):
        assert _times(broken) == [], broken


def _report() -> None:
    """Per family: cheats that earn (accuracy or efficiency above 0, or a sandbox error) and honest
    controls that pass, on the tree this interpreter imports."""
    families = sorted(set(CHEATS) | set(HONEST))
    for family in families:
        earned = []
        for name, (completion, truth, extra) in CHEATS.get(family, {}).items():
            r = score(completion, truth, extra)
            if r["accuracy_reward"] or r["efficiency_reward"] or r["sandbox_error"]:
                earned.append(name)
        kept = []
        for name, (completion, truth, extra) in HONEST.get(family, {}).items():
            try:
                r = score(completion, truth, extra)
            except Exception as exc:  # noqa: BLE001 - an older tree may lack an option
                r = {"accuracy_reward": 0.0, "_error": repr(exc)}
            if r["accuracy_reward"] == 1.0:
                kept.append(name)
        print(
            f"{family}: cheats earning {len(earned)} of {len(CHEATS.get(family, {}))} {earned}; "
            f"honest kept {len(kept)} of {len(HONEST.get(family, {}))}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    _report()
