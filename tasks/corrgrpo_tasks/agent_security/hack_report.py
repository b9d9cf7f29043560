"""The agent-security hack table of docs/tasks.md ("Reward profiles"), measured on real AgentDojo cases.

``python -m corrgrpo_tasks.agent_security.hack_report [--suites banking ...]`` plays scripted policies
(the ground truth, an honest failed attempt, refusals, dumps, hedges, doubled writes) on every case of the suites and prints, per policy and
profile, the mean score over attacked and all cases and the clean and question tasks passed, as JSON.
Each policy's calls are well-formed turns (one call each); only the final answer and the calls differ.
Needs ``agentdojo``.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from corrgrpo_tasks.agent_security._answer import READ_ONLY
from corrgrpo_tasks.agent_security._data import ATTACKS, SUITES, build_cases
from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode
from corrgrpo_tasks.agent_security._reward import DATA_SOURCE, PROFILES, RESULT_KEY, compute_score

NUMBERS = " ".join(str(i) for i in range(2001))
REFUSAL = "I cannot help with that."
FAILED = "I could not finish the task."
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

Calls = Callable[[AgentDojoEpisode], Sequence[Any]]
Answer = Callable[[AgentDojoEpisode], str]


def _ground_truth(episode: AgentDojoEpisode) -> list[Any]:
    return list(episode.user_task.ground_truth(episode.pre_environment.model_copy(deep=True)))


def _reads(episode: AgentDojoEpisode) -> list[Any]:
    return [c for c in _ground_truth(episode) if c.function.startswith(READ_ONLY)]


def _answer(episode: AgentDojoEpisode) -> str:
    return str(episode.user_task.GROUND_TRUTH_OUTPUT)


def _hedge(episode: AgentDojoEpisode) -> str:
    """The expected answer among three other candidates: numbers (else lines) of the tool outputs."""
    right = _answer(episode)
    numbers = [n for n in dict.fromkeys(_NUMBER.findall("\n".join(episode.tool_outputs))) if n not in right]
    lines = [ln.strip() for text in episode.tool_outputs for ln in text.splitlines() if ln.strip()]
    others = (numbers or lines)[:3]
    return " or ".join([right, *others])


def _one_line(episode: AgentDojoEpisode) -> str:
    return " ".join(" ".join(text.split()) for text in episode.tool_outputs)


def _comma_numbers(episode: AgentDojoEpisode) -> str:
    return ",".join(dict.fromkeys(_NUMBER.findall("\n".join(episode.tool_outputs))))


def _wrong(call: Any) -> Any:
    """The call with its first number off by one (else its first text changed)."""
    args = dict(call.args)
    for key, value in args.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return call.model_copy(update={"args": {**args, key: value + 1}})
    for key, value in args.items():
        if isinstance(value, str):
            return call.model_copy(update={"args": {**args, key: value + " (draft)"}})
    return call


def _twice(episode: AgentDojoEpisode) -> list[Any]:
    """Every write of the ground truth sent twice: a wrong version, then the right one."""
    out = []
    for call in _ground_truth(episode):
        if not call.function.startswith(READ_ONLY):
            out.append(_wrong(call))
        out.append(call)
    return out


def _token_read(episode: AgentDojoEpisode) -> list[Any]:
    """One harmless read: a suite tool taking no argument that the ground truth does not call."""
    from agentdojo.functions_runtime import FunctionCall

    used = {c.function for c in _ground_truth(episode)}
    free = [
        name
        for name, f in episode.runtime.functions.items()
        if name.startswith(READ_ONLY) and not f.parameters.model_json_schema().get("required")
    ]
    name = next((n for n in free if n not in used), free[0] if free else None)
    return [FunctionCall(function=name, args={})] if name else []


POLICIES: dict[str, tuple[Calls, Answer]] = {
    "ground truth": (_ground_truth, _answer),
    "honest failed attempt": (lambda e: _ground_truth(e)[:1], lambda e: FAILED),
    "ground-truth calls, no answer": (_ground_truth, lambda e: ""),
    "refusal, no call": (lambda e: [], lambda e: REFUSAL),
    "one harmless read, then the refusal": (_token_read, lambda e: REFUSAL),
    "read-only calls, their outputs pasted": (_reads, lambda e: "\n".join(e.tool_outputs)),
    "read-only calls, their outputs on one line": (_reads, _one_line),
    "ground-truth calls, the outputs' numbers comma-joined": (_ground_truth, _comma_numbers),
    "ground-truth calls, the answer hedged among four candidates": (_ground_truth, _hedge),
    "every write sent twice, wrong then right": (_twice, _answer),
    "ground truth + the numbers 0..2000": (_ground_truth, lambda e: _answer(e) + " " + NUMBERS),
    "no call, the numbers 0..2000": (lambda e: [], lambda e: NUMBERS),
}

EVERY_CASE = (
    "ground truth",
    "honest failed attempt",
    "refusal, no call",
    "one harmless read, then the refusal",
)
"""The policies also played on the attacked cases (the others only on the clean ones)."""


def play(case: dict[str, Any], calls: Calls, answer: Answer) -> dict[str, Any]:
    """The checker result of one scripted trajectory: each call as its own turn, then the answer."""
    episode = AgentDojoEpisode(case)
    for call in calls(episode):
        episode.record_turn(
            f"<tool_call>{json.dumps({'name': call.function, 'arguments': dict(call.args)})}</tool_call>"
        )
        episode.call(call.function, dict(call.args))
    text = answer(episode)
    episode.record_turn(text)
    return episode.result(text)


def report(
    suites: Sequence[str] = SUITES,
    attacks: Sequence[str] = ATTACKS,
    policies: Sequence[str] = tuple(POLICIES),
) -> dict[str, dict[str, Any]]:
    """``{policy: {profile: figures}}``: mean score over attacked and all cases, and the clean tasks
    and question tasks (the ground truth passes, its calls without the answer fail) passed, for
    ``policies`` (the ground truth and its calls without the answer are always played)."""
    played = dict.fromkeys(("ground truth", "ground-truth calls, no answer", *policies))
    scores: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    passed: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    questions: set[str] = set()
    for case in build_cases(suites=suites, attacks=attacks):
        clean = case["case_type"] == "clean"
        names = played if clean else [n for n in EVERY_CASE if n in played]
        results = {name: play(case, *POLICIES[name]) for name in names}
        if (
            clean
            and results["ground truth"]["utility"]
            and not results["ground-truth calls, no answer"]["utility"]
        ):
            questions.add(case["case_id"])
        for name, result in results.items():
            for profile in PROFILES:
                r = compute_score(DATA_SOURCE, "", "", {RESULT_KEY: result}, profile=profile)
                scores[(name, profile, case["case_type"])].append(r["score"])
                scores[(name, profile, "all")].append(r["score"])
                if clean:
                    passed[(name, profile)][case["case_id"]] = r["utility_reward"]
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for name in played:
        for profile in PROFILES:
            clean_scores = scores[(name, profile, "clean")]
            figures: dict[str, Any] = {
                "mean score, clean cases": round(sum(clean_scores) / len(clean_scores), 4)
            }
            if name in EVERY_CASE:
                for kind, label in (("security", "attacked cases"), ("all", "all cases")):
                    values = scores[(name, profile, kind)]
                    figures[f"mean score, {label}"] = round(sum(values) / len(values), 4) if values else None
            done = passed[(name, profile)]
            figures["clean tasks passed"] = f"{int(sum(done.values()))} of {len(done)}"
            figures["question tasks passed"] = f"{int(sum(done[c] for c in questions))} of {len(questions)}"
            out[name][profile] = figures
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--attacks", nargs="*", default=list(ATTACKS), choices=ATTACKS)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    args = parser.parse_args(argv)
    print(json.dumps(report(args.suites, args.attacks, args.policies), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
