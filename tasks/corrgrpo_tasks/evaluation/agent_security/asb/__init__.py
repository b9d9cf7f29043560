"""Agent Security Bench (ASB; Zhang et al., 2025) with observation prompt injection, as the paper runs it.

:func:`load_asb` reads a local checkout (layout in :mod:`._data`); :func:`run_asb` plays each (agent, task,
attacker tool) OPI episode and the task's clean episode through ASB's plan-then-act protocol with
simulated tools (:func:`run_episode`), and :func:`asb_metrics` gives clean utility, utility under attack,
attack success rate and the paper's joint accuracy ``100 mean (1 - a)(c + u)/2``.
"""

from ._data import LAYOUT, ASBAgent, ASBDataError, AttackTool, NormalTool, load_asb
from ._run import (
    ATTACK_TYPES,
    PLAN_INSTRUCTION,
    asb_metrics,
    attack_payload,
    original_success,
    parse_plan,
    run_asb,
    run_episode,
)

__all__ = [
    "ATTACK_TYPES",
    "LAYOUT",
    "PLAN_INSTRUCTION",
    "ASBAgent",
    "ASBDataError",
    "AttackTool",
    "NormalTool",
    "asb_metrics",
    "attack_payload",
    "load_asb",
    "original_success",
    "parse_plan",
    "run_asb",
    "run_episode",
]
