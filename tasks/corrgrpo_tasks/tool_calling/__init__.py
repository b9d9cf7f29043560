"""Tool calling (RLLA-4K training, API-Bank evaluation): the reward, its TRL form, and data loading.

Components, in the estimator's order (:data:`COMPONENTS`), with S the match fractions defined in
:func:`compute_score`: function name 0.5(2S-1), parameter names 2S-1, parameter values 1.5(2S-1), format
0/1. Weights are all 1 (:data:`DEFAULT_WEIGHTS`). ``profile="paper"`` (default) is the authors' reward
bit for bit; ``profile="hardened"`` (:data:`PROFILES`) closes its loopholes (hedged calls, calls hidden
in the thought, response text judged on wording rather than content).
"""

from corrgrpo_tasks.tool_calling._data import (
    RLLA_SPLIT_SEED,
    RLLA_TEST_FRACTION,
    TOOL_SYSTEM_PROMPT,
    from_api_bank,
    is_api_bank_record,
    load_api_bank,
    load_rlla,
    prepare,
    read_records,
    split_rlla,
    to_rows,
    validate_records,
)
from corrgrpo_tasks.tool_calling._responses import ResponseExample, make_response_examples
from corrgrpo_tasks.tool_calling._reward import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    PROFILES,
    RANGES,
    ParsedCalls,
    answer_text,
    compute_score,
    extract_prediction,
    format_reward,
    parse_tool_calls,
    response_facts,
    response_share,
)
from corrgrpo_tasks.tool_calling._trl import trl_reward_functions

DATA_SOURCES = ("rlla", "api_bank")

__all__ = [
    "COMPONENTS",
    "DATA_SOURCES",
    "DEFAULT_WEIGHTS",
    "PROFILES",
    "RANGES",
    "RLLA_SPLIT_SEED",
    "RLLA_TEST_FRACTION",
    "TOOL_SYSTEM_PROMPT",
    "ParsedCalls",
    "ResponseExample",
    "answer_text",
    "compute_score",
    "extract_prediction",
    "format_reward",
    "from_api_bank",
    "is_api_bank_record",
    "load_api_bank",
    "load_rlla",
    "make_response_examples",
    "parse_tool_calls",
    "prepare",
    "read_records",
    "response_facts",
    "response_share",
    "split_rlla",
    "to_rows",
    "trl_reward_functions",
    "validate_records",
]
