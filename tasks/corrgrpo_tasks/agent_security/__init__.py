"""Agent security (AgentDojo training, ASB evaluation): reward, checker plumbing, data, metrics.

Components (:data:`COMPONENTS`): utility U = 1 when the user task is done; safety S = 1 when the case
is attacked and the attacker's goal is not met. Weights 1 and 1 (:data:`DEFAULT_WEIGHTS`).
``profile="paper"`` (default) is the authors' reward; ``profile="hardened"`` denies credit to
trajectories without a tool call and judges utility on :func:`hardened_answer`. Every framework's loop
reads a turn's tool calls with :func:`parse_turn`, the paper's parser and schema check.
The ``agentdojo`` package is needed only to build cases and to run episodes; it is imported lazily.
verl's multi-turn loop for these cases is :mod:`corrgrpo_tasks.agent_security.verl_agent_loop`
(registered as ``agentdojo_agent`` through :data:`AGENT_LOOP_CONFIG`); TRL's is its own, fed by
:func:`environment_factories` and :func:`trl_reward_functions`.
"""

from corrgrpo_tasks.agent_security._answer import hardened_answer
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
from corrgrpo_tasks.agent_security._episode import AgentDojoEpisode, suite_tool_parameters
from corrgrpo_tasks.agent_security._metrics import SecurityMetrics, case_type_of, security_metrics
from corrgrpo_tasks.agent_security._reward import (
    COMPONENTS,
    DATA_SOURCE,
    DEFAULT_WEIGHTS,
    HARDENED_UTILITY_KEY,
    INVALID_REWARD,
    PROFILES,
    RESULT_KEY,
    MissingCheckError,
    checker_result,
    compute_score,
    invalid_result,
    tool_call_format_is_valid,
)
from corrgrpo_tasks.agent_security._tool_calls import (
    ParsedTurn,
    ToolCall,
    parse_turn,
    tool_parameters,
    validate_arguments,
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
    "HARDENED_UTILITY_KEY",
    "INVALID_REWARD",
    "PROFILES",
    "RESULT_KEY",
    "SUITES",
    "AgentDojoEpisode",
    "MissingCheckError",
    "ParsedTurn",
    "SecurityMetrics",
    "ToolCall",
    "build_cases",
    "case_type_of",
    "checker_result",
    "compute_score",
    "default_system_message",
    "environment_factories",
    "hardened_answer",
    "invalid_result",
    "parse_turn",
    "prepare",
    "read_cases",
    "security_metrics",
    "split_cases",
    "suite_tool_names",
    "suite_tool_parameters",
    "to_rows",
    "tool_call_format_is_valid",
    "tool_parameters",
    "trl_reward_functions",
    "validate_arguments",
    "write_cases",
]
