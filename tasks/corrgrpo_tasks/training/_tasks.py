"""The tasks ``corrgrpo train`` can run: data, tokenizer pieces, TRL reward functions, held-out scoring.

``tool_calling``: the synthetic catalogue of :mod:`._tool_data`, scored by the project's RLLA reward
(four components on different scales). ``code``: one-line function bodies from a docstring and
examples (:mod:`._code_data`), scored by the project's seven-component sandboxed code reward.
``scales``: string reversal scored by three components on very different scales (:mod:`._scales`),
built to test the paper's Figure 2 situation; ``scales_mirror``: the same with the large component the
informative one and the small ones mostly noise.

Each task's system prompt states the output format its reward expects (as RLLA's and
LeetCodeDataset's prompts do), so a pretrained instruct model's first samples can earn format reward.
``profile`` picks the reward's definition for the two project rewards: ``"paper"`` (the authors') or
``"hardened"`` (their loopholes closed); the scales task has one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CODE_SYSTEM_PROMPT",
    "PROFILES",
    "SCALES_SYSTEM_PROMPT",
    "TASKS",
    "TOOL_SYSTEM_PROMPT",
    "TOOL_WARM_NORMALISE",
    "Task",
    "get_task",
]

PROFILES = ("paper", "hardened")
# The tool-calling warm start's demonstrations normalise this share of the values a request says its own
# way and copy the rest as said: a warm start in the 0.10-0.45 exact-match range whose remaining errors
# are one systematic skill the reward teaches (docs/experiments.md, the default run).
TOOL_WARM_NORMALISE = 0.15

TOOL_SYSTEM_PROMPT = (
    "Call one of the listed tools. Reply in exactly this format and nothing after it:\n"
    "<think>short reasoning</think>\n<tool_call>\n"
    '{"name": "tool_name", "parameters": {"argument": "value"}}\n</tool_call>'
)
CODE_SYSTEM_PROMPT = (
    "Complete the Python function. Return the whole function in one ```python code block and nothing else."
)
SCALES_SYSTEM_PROMPT = "Write the letters of the user's word in reverse order, and nothing else."


@dataclass(frozen=True)
class Task:
    """What the runner needs from a task."""

    name: str
    components: tuple[str, ...]
    weights: tuple[float, ...]
    success: str  # the per-sample 0/1 metric reported as held-out accuracy
    extra_metrics: tuple[str, ...]
    make_examples: Callable[[int, int, int], tuple[list[Any], list[Any]]]
    pieces: Callable[[], list[str]]
    reward_funcs: Callable[[], list[Callable[..., list[Any]]]]
    score: Callable[[Sequence[str], Sequence[str]], list[dict[str, float]]]
    system_prompt: str  # the default system turn: the output format the reward expects
    # Optional check of the RL samples a run scored: (text, ground truth, {component: value}) -> findings.
    audit: Callable[[list[tuple[str, str, dict[str, float]]]], dict[str, Any]] | None = None


def _tool_task(profile: str, normalise: float) -> Task:
    from corrgrpo_tasks.tool_calling import COMPONENTS, DEFAULT_WEIGHTS, compute_score, trl_reward_functions

    from ._tool_data import make_tool_examples, tool_pieces

    def score(completions: Sequence[str], truths: Sequence[str]) -> list[dict[str, float]]:
        return [
            compute_score("synthetic", c, t, profile=profile)
            for c, t in zip(completions, truths, strict=True)
        ]

    return Task(
        "tool_calling",
        COMPONENTS,
        DEFAULT_WEIGHTS,
        "exact_match",
        ("score",),
        lambda n, m, seed: make_tool_examples(n, m, seed=seed, normalise=normalise),
        tool_pieces,
        lambda: list(trl_reward_functions(profile=profile)),
        score,
        TOOL_SYSTEM_PROMPT,
    )


def _code_task(profile: str, normalise: float) -> Task:
    from corrgrpo_tasks.code import COMPONENTS, DEFAULT_WEIGHTS, score_batch, trl_reward_functions

    from ._code_data import audit_code_samples, code_pieces, make_code_examples

    def score(completions: Sequence[str], truths: Sequence[str]) -> list[dict[str, float]]:
        rows = score_batch(
            list(completions), list(truths), timing_rounds=2, timing_budget_seconds=0.2, profile=profile
        )
        for row in rows:
            row["passed"] = row["accuracy_reward"]
        return rows

    def rewards() -> list[Callable[..., list[Any]]]:
        return list(trl_reward_functions(timing_rounds=2, timing_budget_seconds=0.2, profile=profile))

    return Task(
        "code",
        COMPONENTS,
        DEFAULT_WEIGHTS,
        "passed",
        ("score", "sandbox_error", "timeout"),
        lambda n, m, seed: make_code_examples(n, m, seed=seed),
        code_pieces,
        rewards,
        score,
        CODE_SYSTEM_PROMPT,
        audit=audit_code_samples,
    )


def _scales_task(profile: str, normalise: float, *, mirror: bool = False) -> Task:
    from . import _scales

    one = _scales.score_mirror if mirror else _scales.score_reversal
    components = _scales.MIRROR_COMPONENTS if mirror else _scales.COMPONENTS

    def score(completions: Sequence[str], truths: Sequence[str]) -> list[dict[str, float]]:
        return [one(c, t) for c, t in zip(completions, truths, strict=True)]

    return Task(
        "scales_mirror" if mirror else "scales",
        components,
        (1.0,) * len(components),
        "exact_match",
        ("score",),
        lambda n, m, seed: _scales.make_scales_examples(n, m, seed=seed),
        list,
        lambda: _scales.scales_reward_functions(mirror=mirror),
        score,
        SCALES_SYSTEM_PROMPT,
    )


def _mirror_task(profile: str, normalise: float) -> Task:
    return _scales_task(profile, normalise, mirror=True)


TASKS: dict[str, Callable[[str, float], Task]] = {
    "tool_calling": _tool_task,
    "code": _code_task,
    "scales": _scales_task,
    "scales_mirror": _mirror_task,
}


def get_task(name: str, *, profile: str = "paper", normalise: float | None = None) -> Task:
    """Task ``name`` scored by its reward's ``profile``. ``normalise`` (tool calling only): the share of
    rephrased values the supervised demonstrations normalise (see ``make_tool_examples``); None: the
    task's (:data:`TOOL_WARM_NORMALISE`)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if name in ("scales", "scales_mirror") and profile != "paper":
        raise ValueError("the scales task has one reward definition: profile must be 'paper'")
    if name != "tool_calling":
        if normalise is not None:
            raise ValueError(f"normalise applies to the tool_calling task only, got {normalise} for {name}")
        return TASKS[name](profile, 1.0)
    if normalise is None:
        normalise = TOOL_WARM_NORMALISE
    if not 0.0 <= normalise <= 1.0:
        raise ValueError(f"normalise must be in [0, 1], got {normalise}")
    return TASKS[name](profile, normalise)
