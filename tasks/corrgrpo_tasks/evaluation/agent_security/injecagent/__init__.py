"""InjecAgent (Zhan et al., 2024): indirect prompt injection through tool responses, as the paper
evaluates it (base setting, prompted ReAct agent).

:func:`load_injecagent` reads a local checkout of the benchmark (layout in :mod:`._data`);
:func:`run_injecagent` generates the model's next step for every case (two stages for data stealing)
and judges it with :func:`judge_output`; :func:`injecagent_metrics` gives the benchmark's attack success
rates (ASR-valid and ASR-all for direct harm, data-stealing S1/S2/total, overall) and the valid-output
rate. The paper's InjecAgent numbers are total ASR (lower is better).
"""

from ._data import (
    ATTACKS,
    LAYOUT,
    SETTINGS,
    InjecAgentCase,
    InjecAgentData,
    InjecAgentDataError,
    load_cases,
    load_injecagent,
    load_tools,
)
from ._judge import SOFT_INVALID, judge_output, split_steps, to_react
from ._metrics import injecagent_metrics
from ._run import PROMPT, case_messages, run_injecagent

__all__ = [
    "ATTACKS",
    "LAYOUT",
    "PROMPT",
    "SETTINGS",
    "SOFT_INVALID",
    "InjecAgentCase",
    "InjecAgentData",
    "InjecAgentDataError",
    "case_messages",
    "injecagent_metrics",
    "judge_output",
    "load_cases",
    "load_injecagent",
    "load_tools",
    "run_injecagent",
    "split_steps",
    "to_react",
]
