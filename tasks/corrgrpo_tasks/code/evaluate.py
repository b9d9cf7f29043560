"""Held-out evaluation through the same sandbox: Executable, Pass@1 and Efficiency as the paper defines.

* Executable: share of completions that run without a runtime error (a wrong answer still counts as
  executable; syntax errors, crashes and timeouts do not).
* Pass@1: share of completions (one greedy sample per problem) that pass all tests.
* Efficiency: among qualified programs (candidate and reference both pass all tests, with positive finite
  run times), the percentage strictly faster than the reference, measured in ``rounds`` alternating
  reruns of both on the same core and averaged over the rounds.

:func:`score_problem` scores one completion into a self-contained record (components, the extracted
program, where it failed and the error text, the timing rounds); :func:`code_metrics` computes the three
numbers from such records, so a resumed run's records count as if scored in one go. :func:`evaluate`
does both for a list of completions.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..sandbox import SandboxUnavailableError
from ._extract import entry_name, extract_code, parse_verifier
from ._reward import CodeRewardConfig, compute_score, score_batch

__all__ = [
    "EvalReport",
    "code_metrics",
    "evaluate",
    "failure",
    "reward_options",
    "score_problem",
    "special_cases_shown_tests",
]

_FIELDS = frozenset(f.name for f in dataclasses.fields(CodeRewardConfig))


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """Percentages (0-100) and counts of one evaluation."""

    n: int
    executable: float
    pass_at_1: float
    efficiency: float | None
    n_qualified: int
    per_task: list[dict[str, float]]

    def summary(self) -> dict[str, float]:
        out = {
            "n": float(self.n),
            "executable": self.executable,
            "pass@1": self.pass_at_1,
            "n_qualified": float(self.n_qualified),
        }
        if self.efficiency is not None:
            out["efficiency"] = self.efficiency
        return out


def reward_options(
    *, rounds: int = 8, timeout_seconds: float = 10.0, sandbox_packages: Sequence[str] = ()
) -> dict[str, Any]:
    """The code reward's options for an evaluation: every qualified pair gets all ``rounds`` (no time
    budget, only the wall-clock limit), the raw times and, where the reward offers it, the error text.

    ``sandbox_packages`` names installed packages the candidate may import (``CodeRewardConfig``'s
    ``sandbox_packages``); a ``ValueError`` when this build's reward lacks that option, never a run that
    silently ignores it.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    options: dict[str, Any] = {
        "timeout_seconds": timeout_seconds,
        "timing_rounds": rounds,
        "timing_min_rounds": rounds,
        "timing_budget_seconds": float("inf"),
        "keep_timing": True,
    }
    if "keep_error" in _FIELDS:
        options["keep_error"] = True
    if sandbox_packages:
        if "sandbox_packages" not in _FIELDS:
            raise ValueError(
                "--sandbox-packages needs the code reward's sandbox_packages option, which this "
                "installation's CodeRewardConfig lacks"
            )
        options["sandbox_packages"] = tuple(sandbox_packages)
    return options


def failure(scores: Mapping[str, Any], program: str) -> str:
    """Where a scored completion stopped, from its components: ``passed``, ``wrong answer`` (it ran; a
    test failed), ``runtime error``, ``timeout``, ``compile error``, ``syntax error``, ``no code``,
    ``too long`` or ``sandbox error``.

    >>> failure({"accuracy_reward": 1.0, "runtime_reward": 1.0}, "x = 1")
    'passed'
    >>> failure({"syntax_reward": 1.0, "compile_reward": 1.0, "timeout": 1.0}, "while True: pass")
    'timeout'
    """
    if scores.get("sandbox_error"):
        return "sandbox error"
    if scores.get("accuracy_reward"):
        return "passed"
    if scores.get("runtime_reward"):
        return "wrong answer"
    if scores.get("compile_reward"):
        return "timeout" if scores.get("timeout") else "runtime error"
    if scores.get("syntax_reward"):
        return "compile error"
    if not program.strip():
        return "no code"
    return "too long" if len(program) > CodeRewardConfig().max_code_chars else "syntax error"


def _shown_values(shown: Sequence[str]) -> list[list[Any]]:
    """Per shown assert (``assert f(args) == expected``): the literal values a lookup table would hold --
    the expected result and the argument tuple (and each argument that is a container or a string of
    two or more characters)."""
    found: list[list[Any]] = []
    for text in shown:
        try:
            node = ast.parse(text.strip()).body[0]
        except (SyntaxError, IndexError, ValueError, RecursionError):
            continue
        test = getattr(node, "test", None)
        values: list[Any] = []
        if isinstance(test, ast.Compare) and len(test.comparators) == 1 and isinstance(test.left, ast.Call):
            values += _literals([test.comparators[0]])
            values += _literals([ast.Tuple(elts=list(test.left.args), ctx=ast.Load())])
            values += [v for v in _literals(test.left.args) if isinstance(v, (str, tuple, list, dict, set))]
        found.append([v for v in values if _distinctive(v)])
    return found


def _literals(nodes: Sequence[ast.expr]) -> Iterator[Any]:
    for node in nodes:
        try:
            yield ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue


def _distinctive(value: Any) -> bool:
    """Not a value any program might hold: booleans, None, small numbers, short strings, empty or
    one-element containers."""
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return abs(value) >= 10
    if isinstance(value, str):
        return len(value) >= 2
    return isinstance(value, (tuple, list, dict, set)) and len(value) >= 2


def special_cases_shown_tests(program: str, verifier: Mapping[str, Any]) -> bool:
    """Whether ``program`` holds, as literals, the inputs or expected results of at least two of the
    asserts its prompt showed (of the only one, where one was shown): a lookup table of the visible
    cases. ``verifier["shown_tests"]`` comes from ``data.load_mbpp``; without it, False.

    >>> v = {"shown_tests": ["assert f(12) == 144", "assert f(30) == 900"]}
    >>> special_cases_shown_tests("def f(x): return {12: 144, 30: 900}[x]", v)
    True
    >>> special_cases_shown_tests("def f(x): return x * x", v)
    False
    """
    shown = verifier.get("shown_tests")
    if not isinstance(shown, list) or not shown:
        return False
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    held: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Set)):
            held += _literals([node])
        if isinstance(node, ast.Dict):
            held += _literals([k for k in node.keys if k is not None])
    cases = _shown_values([t for t in shown if isinstance(t, str)])
    hits = sum(1 for values in cases if any(_equal(v, h) for v in values for h in held))
    return bool(cases) and hits >= min(2, len(cases))


def _equal(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - literals compare; anything odd is no match
        return False


def _record(completion: str, ground_truth: Any, scores: Mapping[str, Any]) -> dict[str, Any]:
    verifier = parse_verifier(ground_truth)
    name = entry_name(verifier) if verifier.get("kind") == "check" else None
    program = extract_code(completion or "", entry_name=name)[0]
    timing = scores.get("_timing")
    error = scores.get("_error")
    return {
        **{k: v for k, v in scores.items() if not k.startswith("_")},
        "program": program,
        "failure": failure(scores, program),
        # MBPP shows its asserts in the prompt: a program that holds their values as literals passed by
        # looking them up (issue 34); 0.0 where the verifier shows none.
        "special_cases_shown_tests": float(special_cases_shown_tests(program, verifier)),
        "error": str(error) if error else None,
        "timing": {"candidate": list(timing[0]), "reference": list(timing[1])} if timing else None,
    }


def score_problem(completion: str, ground_truth: Any, **options: Any) -> dict[str, Any]:
    """One completion's record: every reward component, ``program`` (the code that ran), ``failure``
    (see :func:`failure`), ``error`` (the judge's error text or failed assertion, when the reward reports
    it) and ``timing`` (the candidate's and the reference's round times, when both passed).

    ``options`` are :func:`reward_options`' result (or ``CodeRewardConfig`` fields). The program runs
    in a lane of sandboxes started from the calling thread, which should outlive the run: bubblewrap's
    ``--die-with-parent`` kills a sandbox when the *thread* that started it exits, so a lane started by
    a short-lived worker (``score_batch``'s pool, one per call) dies under the next problem that
    reuses it (a sandbox error for a correct program, about one call in eight back to back here).
    """
    try:
        scores = compute_score(None, completion, ground_truth, **options)
    except SandboxUnavailableError:
        raise
    except Exception:  # noqa: BLE001 -- a bad verifier: score_batch's all-zero result with sandbox_error
        scores = score_batch([completion], [ground_truth], max_workers=1, **options)[0]
    return _record(completion, ground_truth, scores)


def code_metrics(records: Sequence[Mapping[str, Any]], *, rounds: int) -> dict[str, Any]:
    """Executable, Pass@1 and Efficiency (percentages) and the counts, from :func:`score_problem` records.

    >>> rec = {"runtime_reward": 1.0, "accuracy_reward": 1.0,
    ...        "timing": {"candidate": [1.0, 3.0], "reference": [2.0, 2.0]}}
    >>> code_metrics([rec, {"runtime_reward": 1.0, "accuracy_reward": 0.0}], rounds=2)["efficiency"]
    50.0
    """
    n = len(records)
    if n == 0:
        raise ValueError("code metrics need at least one scored problem")
    timed = [r.get("timing") for r in records]
    qualified = [
        (t["candidate"], t["reference"])
        for t in timed
        if t and len(t["candidate"]) == rounds and len(t["reference"]) == rounds
    ]
    efficiency = None
    if qualified:
        per_round = [sum(c[k] < r[k] for c, r in qualified) / len(qualified) for k in range(rounds)]
        efficiency = 100.0 * sum(per_round) / rounds
    return {
        "n": n,
        "executable": 100.0 * sum(float(r["runtime_reward"]) for r in records) / n,
        "pass@1": 100.0 * sum(float(r["accuracy_reward"]) for r in records) / n,
        "efficiency": efficiency,
        "n_qualified": len(qualified),
    }


def evaluate(
    completions: Sequence[str],
    ground_truths: Sequence[Any],
    *,
    rounds: int = 8,
    timeout_seconds: float = 10.0,
    max_workers: int | None = None,
    **options: Any,
) -> EvalReport:
    """Score one completion per problem; ``ground_truths`` are verifiers (``CodeTask.ground_truth``).

    Examples
    --------
    >>> report = evaluate([completion], [task.ground_truth])     # doctest: +SKIP
    >>> report.summary()["pass@1"]                                # doctest: +SKIP
    100.0
    """
    if not completions:
        raise ValueError("evaluate needs at least one completion")
    reward = {**reward_options(rounds=rounds, timeout_seconds=timeout_seconds), **options}
    scores = score_batch(completions, ground_truths, max_workers=max_workers, **reward)
    records = [_record(c, g, s) for c, g, s in zip(completions, ground_truths, scores, strict=True)]
    m = code_metrics(records, rounds=rounds)
    per_task = [{k: v for k, v in s.items() if not k.startswith("_")} for s in scores]
    return EvalReport(m["n"], m["executable"], m["pass@1"], m["efficiency"], m["n_qualified"], per_task)
