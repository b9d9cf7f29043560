"""Step 0 of the pre-registered study (issue 33 item 3), from recorded rollouts and no training: CorrGRPO's only
lever is the per-group weight c_q, so how c_q ranks against the alignment of each group's advantages with
the learnable signal says, before any run, which way CorrGRPO - GRPO should go.

* per group: c_q (the core's ``advantage_stats``: CorrGRPO's advantage over GRPO's in the group), the
  correlation sum, whether the group is degenerate (some component varies, correlation sum below 0.01),
  and the *alignment*: Spearman's rank correlation, within the group, of the total reward (the order both
  GRPO and CorrGRPO give the group's samples) with the learnable signal (``SIGNALS``);
* per step: the count of degenerate (zero-correlation-sum) groups against the policy entropy of the step.

Read from ``rollouts/ESTIMATOR-seedS.csv`` (or ``.csv.gz``) and ``steps.csv`` of a ``corrgrpo train`` folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SIGNALS", "group_rows", "spearman", "step0", "step_rows", "summary"]

# The learnable part of each task's reward, as a function of one rollout row's components.
SIGNALS: dict[str, tuple[str, ...]] = {
    "scales": ("match_reward", "prefix_reward"),  # the judge is 90% noise
    "scales_mirror": ("judge_reward",),  # 8 (0.9 m + 0.1 u): the small components are 90% noise
    "tool_calling": ("values_reward",),  # names and format sit at their maxima
}


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get mean ranks); NaN where either side is constant.

    >>> spearman([1, 2, 3, 4], [1, 3, 2, 4]), spearman([1, 2, 3], [3, 2, 1]), spearman([1, 1], [1, 2])
    (0.8, -1.0, nan)
    """
    rx, ry = _ranks(list(x)), _ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan


def group_rows(
    rollouts: Sequence[Mapping[str, Any]], components: Sequence[str], task: str
) -> list[dict[str, Any]]:
    """One row per group of a run's rollouts: step, group, c_q, correlation sum, degenerate, alignment."""
    import numpy as np

    import corrgrpo_core as cc

    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rollouts:
        groups.setdefault(str(row["group"]), []).append(row)
    names = list(groups)
    scores = np.array([[float(r[c]) for c in components] for g in names for r in groups[g]])
    ids = np.array([i for i, g in enumerate(names) for _ in groups[g]])
    stats = cc.advantage_stats(scores, ids)
    c_q, corr = np.asarray(stats.c_q).reshape(-1), np.asarray(stats.correlation_sum).reshape(-1)
    degenerate = np.asarray(stats.degenerate).reshape(-1)
    out, start = [], 0
    for g in names:
        rows = groups[g]
        total = [sum(float(r[c]) for c in components) for r in rows]
        signal = [sum(float(r[c]) for c in SIGNALS[task]) for r in rows]
        out.append(
            {
                "step": int(float(rows[0]["step"])),
                "group": g,
                "c_q": float(c_q[start]),
                "correlation_sum": float(corr[start]),
                "degenerate": bool(degenerate[start]),
                "total_varies": len(set(total)) > 1,
                "alignment": spearman(total, signal),
            }
        )
        start += len(rows)
    return out


def step_rows(
    groups: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per training step: the groups whose total varies, the degenerate ones among them, the entropy."""
    entropy = {int(s["step"]): float(s.get("entropy", math.nan)) for s in steps}
    by_step: dict[int, list[Mapping[str, Any]]] = {}
    for g in groups:
        by_step.setdefault(int(g["step"]), []).append(g)
    return [
        {
            "step": step,
            "varying_groups": sum(bool(g["total_varies"]) for g in rows),
            "degenerate_groups": sum(bool(g["degenerate"]) for g in rows),
            "entropy": entropy.get(step, math.nan),
        }
        for step, rows in sorted(by_step.items())
    ]


def step0(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every run of a ``corrgrpo train`` folder: (group rows, step rows), each tagged with estimator and seed."""
    from ._records import load_csv
    from ._run import load_records
    from ._tasks import get_task

    records = load_records(folder)
    task = records.config["task"]
    components = get_task(task).components
    all_groups, all_steps = [], []
    for path in sorted((folder / "rollouts").glob("*-seed*.csv*")):  # .csv or .csv.gz
        estimator, _, seed = path.name.split(".")[0].rpartition("-seed")
        tag = {"task": task, "estimator": estimator, "seed": int(seed)}
        groups = group_rows(load_csv(path), components, task)
        steps = [s for s in records.steps if s["estimator"] == estimator and int(s["seed"]) == int(seed)]
        all_groups += [{**tag, **g} for g in groups]
        all_steps += [{**tag, **s} for s in step_rows(groups, steps)]
    return all_groups, all_steps


def _by(
    rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> dict[tuple[Any, ...], list[Mapping[str, Any]]]:
    out: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        out.setdefault(tuple(row[k] for k in keys), []).append(row)
    return out


def summary(groups: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: per run and per task, Spearman(c_q, alignment) over the groups whose total varies and
    whose alignment is defined; degenerate groups per varying group; Spearman over steps of the count of
    degenerate groups against the entropy, and the count by entropy third."""
    lines = [
        (
            "| task | estimator | seed | groups | Spearman(c_q, alignment) | mean alignment | degenerate / varying groups "
            "| Spearman(degenerate groups, entropy) over steps | degenerate per step, entropy thirds high / mid / low |"
        ),
        "|---" * 9 + "|",
    ]
    step_runs = _by(steps, ("task", "estimator", "seed"))
    for key, rows in [*_by(groups, ("task", "estimator", "seed")).items(), *_by(groups, ("task",)).items()]:
        used = [r for r in rows if r["total_varies"] and not math.isnan(float(r["alignment"]))]
        rho = (
            spearman([float(r["c_q"]) for r in used], [float(r["alignment"]) for r in used])
            if used
            else math.nan
        )
        varying = [r for r in rows if r["total_varies"]]
        degenerate = sum(bool(r["degenerate"]) for r in varying)
        s = step_runs.get(key, []) if len(key) == 3 else [r for r in steps if r["task"] == key[0]]
        s = [r for r in s if not math.isnan(float(r["entropy"]))]
        rho_e = spearman([r["degenerate_groups"] for r in s], [r["entropy"] for r in s]) if s else math.nan
        ordered = sorted(s, key=lambda r: -float(r["entropy"]))
        thirds = [ordered[i * len(ordered) // 3 : (i + 1) * len(ordered) // 3] for i in range(3)]
        per = " / ".join(
            f"{sum(r['degenerate_groups'] for r in t) / len(t):.3f} ({min(r['entropy'] for r in t):.2f}-"
            f"{max(r['entropy'] for r in t):.2f})"
            for t in thirds
            if t
        )
        label = (*key, "all", "all") if len(key) == 1 else key
        mean_align = sum(float(r["alignment"]) for r in used) / len(used) if used else math.nan
        lines.append(
            f"| {label[0]} | {label[1]} | {label[2]} | {len(used)} | {rho:.3f} | {mean_align:.3f} | "
            f"{degenerate}/{len(varying)} | {rho_e:.3f} | {per} |"
        )
    return "\n".join(lines)
