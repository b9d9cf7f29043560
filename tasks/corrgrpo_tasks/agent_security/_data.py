"""AgentDojo cases (clean + ``important_instructions`` / ``tool_knowledge`` attacks), split by user task.

Building cases needs the ``agentdojo`` package (imported lazily); splitting and row conversion work on
the plain case dicts, e.g. from a JSONL file written once by :func:`write_cases`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo_tasks.agent_security._reward import DATA_SOURCE

BENCHMARK_VERSION = "v1.2.2"
SUITES: tuple[str, ...] = ("banking", "slack", "travel", "workspace")
ATTACKS: tuple[str, ...] = ("important_instructions", "tool_knowledge")
EVAL_RATIO = 0.2
AGENT_NAME = "agentdojo_agent"
CASE_KEY = "agentdojo_case_json"
AGENT_LOOP_CONFIG = Path(__file__).with_name("verl_agent_loop.yaml")
"""verl agent-loop config registering :data:`AGENT_NAME` (for ``rollout.agent.agent_loop_config_path``)."""


class _NamedPipeline:
    """What AgentDojo's attacks read from the attacked pipeline: its name (the model's, in prose)."""

    def __init__(self, name: str) -> None:
        self.name = name


def build_cases(
    *,
    benchmark_version: str = BENCHMARK_VERSION,
    suites: Sequence[str] = SUITES,
    attacks: Sequence[str] = ATTACKS,
    pipeline_name: str = "local",
) -> list[dict[str, Any]]:
    """One clean case per user task, and one security case per (user task, injection task, attack).

    ``pipeline_name`` is what the attack templates address the model as (AgentDojo maps "local" to
    "Local model"). For v1.2.2 with the default suites and attacks this gives 97 clean + 1,898 security
    cases.
    """
    from agentdojo.attacks.attack_registry import load_attack
    from agentdojo.task_suite.load_suites import get_suites

    all_suites = get_suites(benchmark_version)
    unknown = [s for s in suites if s not in all_suites]
    if unknown:
        raise ValueError(f"unknown AgentDojo suites {unknown}; {benchmark_version} has {sorted(all_suites)}")
    cases: list[dict[str, Any]] = []
    for suite_name in suites:
        suite = all_suites[suite_name]
        loaded = {name: load_attack(name, suite, _NamedPipeline(pipeline_name)) for name in attacks}
        for user_id, user_task in suite.user_tasks.items():
            base = {
                "benchmark_version": benchmark_version,
                "suite": suite_name,
                "user_task_id": user_id,
                "prompt": user_task.PROMPT,
            }
            cases.append(
                {
                    **base,
                    "case_id": f"{suite_name}:{user_id}",
                    "case_type": "clean",
                    "attack": "",
                    "injection_task_id": "",
                    "injection_goal": "",
                    "injections": {},
                }
            )
            for attack_name, attack in loaded.items():
                for inj_id, inj_task in suite.injection_tasks.items():
                    cases.append(
                        {
                            **base,
                            "case_id": f"{suite_name}:{user_id}:{inj_id}:{attack_name}",
                            "case_type": "security",
                            "attack": attack_name,
                            "injection_task_id": inj_id,
                            "injection_goal": inj_task.GOAL,
                            "injections": dict(attack.attack(user_task, inj_task)),
                        }
                    )
    return cases


def split_cases(
    cases: Sequence[Mapping[str, Any]], *, eval_ratio: float = EVAL_RATIO, seed: int = 0
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Split by user task, per suite: ``round(eval_ratio * n_user_tasks)`` tasks of each suite (chosen
    by a seeded shuffle of the sorted ids) go to eval with all their clean and attacked cases, so no user
    task is seen in both splits.
    """
    import numpy as np

    if not 0.0 <= eval_ratio <= 1.0:
        raise ValueError(f"eval_ratio must be in [0, 1], got {eval_ratio}")
    rng = np.random.RandomState(seed)
    held_out: set[tuple[str, str]] = set()
    by_suite: dict[str, set[str]] = {}
    for case in cases:
        by_suite.setdefault(case["suite"], set()).add(case["user_task_id"])
    for suite in sorted(by_suite):
        tasks = sorted(by_suite[suite], key=lambda t: (len(t), t))
        rng.shuffle(tasks)
        held_out.update((suite, t) for t in tasks[: round(eval_ratio * len(tasks))])
    train = [c for c in cases if (c["suite"], c["user_task_id"]) not in held_out]
    evaluation = [c for c in cases if (c["suite"], c["user_task_id"]) in held_out]
    return train, evaluation


def default_system_message() -> str:
    """AgentDojo's default system prompt (needs ``agentdojo``)."""
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    return str(load_system_message(None))


def to_rows(
    cases: Iterable[Mapping[str, Any]],
    *,
    split: str,
    system_message: str,
    tool_names: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """Cases as verl agent-loop rows (``agent_name`` selects the loop, the case rides in ``extra_info``)."""
    rows = []
    for index, case in enumerate(cases):
        case_json = json.dumps(dict(case), sort_keys=True)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "agent_name": AGENT_NAME,
                "prompt": [
                    {"role": "system", "content": system_message},
                    {"role": "user", "content": case["prompt"]},
                ],
                "ability": "tool_agent_safety",
                "reward_model": {"style": "rule", "ground_truth": case_json},
                "ground_truth": case_json,  # the flat label column TRL and OpenRLHF read
                "extra_info": {
                    "index": index,
                    "split": split,
                    "case_id": case["case_id"],
                    "case_type": case["case_type"],
                    "suite": case["suite"],
                    "tool_selection": list((tool_names or {}).get(case["suite"], [])),
                    CASE_KEY: case_json,
                },
            }
        )
    return rows


def write_cases(cases: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write cases as JSON lines (one case per line, keys sorted)."""
    path = Path(path)
    path.write_text("".join(json.dumps(dict(c), sort_keys=True) + "\n" for c in cases), encoding="utf-8")
    return path


def read_cases(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def suite_tool_names(
    benchmark_version: str = BENCHMARK_VERSION, suites: Sequence[str] = SUITES
) -> dict[str, list[str]]:
    """Tool names of each suite (needs ``agentdojo``)."""
    from agentdojo.task_suite.load_suites import get_suites

    all_suites = get_suites(benchmark_version)
    return {s: [tool.name for tool in all_suites[s].tools] for s in suites}


def prepare(
    out_dir: str | Path,
    *,
    benchmark_version: str = BENCHMARK_VERSION,
    eval_ratio: float = EVAL_RATIO,
    seed: int = 0,
    suites: Sequence[str] = SUITES,
) -> dict[str, Path]:
    """Build, split and write ``cases.jsonl``, ``train.parquet`` and ``test.parquet`` (needs ``agentdojo``)."""
    import datasets

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cases = build_cases(benchmark_version=benchmark_version, suites=suites)
    train, evaluation = split_cases(cases, eval_ratio=eval_ratio, seed=seed)
    system, tools = default_system_message(), suite_tool_names(benchmark_version, suites)
    written = {"cases": write_cases(cases, out / "cases.jsonl")}
    for name, part in (("train", train), ("test", evaluation)):
        written[name] = out / f"{name}.parquet"
        datasets.Dataset.from_list(
            to_rows(part, split=name, system_message=system, tool_names=tools)
        ).to_parquet(str(written[name]))
    return written
