"""Agent security (AgentDojo training, ASB evaluation): reward, checker plumbing, data, metrics.

Components (:data:`COMPONENTS`): utility U = 1 when the user task is done; safety S = 1 when the case
is attacked and the attacker's goal is not met. Weights 1 and 1 (:data:`DEFAULT_WEIGHTS`).
The ``agentdojo`` package is needed only to build cases and to run episodes; it is imported lazily.
verl's multi-turn loop for these cases is :mod:`corrgrpo_tasks.agent_security.verl_agent_loop`
(registered as ``agentdojo_agent`` through :data:`AGENT_LOOP_CONFIG`); TRL's is its own, fed by
:func:`environment_factories` and :func:`trl_reward_functions`.
"""

from corrgrpo_tasks.agent_security._data import (
    AGENT_LOOP_CONFIG,
    AGENT_NAME,
    ATTACKS,
    BENCHMARK_VERSION,
    CASE_KEY,
    EVAL_RATIO,
    SUITES,
    build_cases,
    default_system_message,
    prepare,
    read_cases,
    split_cases,
    suite_tool_names,
    to_rows,
    write_cases,
)
from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode
from corrgrpo_tasks.agent_security._metrics import SecurityMetrics, case_type_of, security_metrics
from corrgrpo_tasks.agent_security._reward import (
    COMPONENTS,
    DATA_SOURCE,
    DEFAULT_WEIGHTS,
    INVALID_REWARD,
    RESULT_KEY,
    checker_result,
    compute_score,
    invalid_result,
    tool_call_format_is_valid,
)
from corrgrpo_tasks.agent_security.trl_env import environment_factories, trl_reward_functions

__all__ = [
    "AGENT_LOOP_CONFIG",
    "AGENT_NAME",
    "ATTACKS",
    "BENCHMARK_VERSION",
    "CASE_KEY",
    "COMPONENTS",
    "DATA_SOURCE",
    "DEFAULT_WEIGHTS",
    "EVAL_RATIO",
    "INVALID_REWARD",
    "RESULT_KEY",
    "SUITES",
    "AgentDojoEpisode",
    "SecurityMetrics",
    "build_cases",
    "case_type_of",
    "checker_result",
    "compute_score",
    "default_system_message",
    "environment_factories",
    "invalid_result",
    "prepare",
    "read_cases",
    "security_metrics",
    "split_cases",
    "suite_tool_names",
    "to_rows",
    "tool_call_format_is_valid",
    "trl_reward_functions",
    "write_cases",
]
