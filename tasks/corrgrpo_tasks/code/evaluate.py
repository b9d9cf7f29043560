"""Held-out evaluation through the same sandbox: Executable, Pass@1 and Efficiency as the paper defines.

* Executable: share of completions that run without a runtime error (a wrong answer still counts as
  executable; syntax errors, crashes and timeouts do not).
* Pass@1: share of completions (one greedy sample per problem) that pass all tests.
* Efficiency: among qualified programs (candidate and reference both pass all tests, with positive finite
  run times), the percentage strictly faster than the reference, measured in ``rounds`` alternating
  reruns of both on the same core and averaged over the rounds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ._reward import score_batch

__all__ = ["EvalReport", "evaluate"]


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
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if not completions:
        raise ValueError("evaluate needs at least one completion")
    # Every qualified pair needs all rounds: no time budget, only the wall-clock limit.
    scores = score_batch(
        completions,
        ground_truths,
        max_workers=max_workers,
        timeout_seconds=timeout_seconds,
        timing_rounds=rounds,
        timing_min_rounds=rounds,
        timing_budget_seconds=float("inf"),
        keep_timing=True,
        **options,
    )
    n = len(scores)
    executable = 100.0 * sum(s["runtime_reward"] for s in scores) / n
    passed = 100.0 * sum(s["accuracy_reward"] for s in scores) / n
    paired: list[Any] = [s["_timing"] for s in scores if s.get("_timing") is not None]
    qualified = [(c, r) for c, r in paired if len(c) == rounds and len(r) == rounds]
    efficiency = None
    if qualified:
        per_round = [sum(c[k] < r[k] for c, r in qualified) / len(qualified) for k in range(rounds)]
        efficiency = 100.0 * sum(per_round) / rounds
    per_task = [{k: v for k, v in s.items() if k != "_timing"} for s in scores]
    return EvalReport(n, executable, passed, efficiency, len(qualified), per_task)
