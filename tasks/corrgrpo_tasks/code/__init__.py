"""Code generation task: the paper's seven-component reward, run in a real sandbox.

Public API:

* ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict``: verl's
  convention (``score`` plus each of ``COMPONENTS``); ``compute_score_batch`` for verl's batch manager;
  ``score_batch`` for any list of completions (bounded parallel pool).
* ``COMPONENTS`` and ``DEFAULT_WEIGHTS`` (0.05, 0.05, 0.05, 0.25, 0.60, 0.30, 0.20).
* ``trl_reward_functions(...)``: one TRL reward function per component, sharing one scoring per batch.
* ``openrlhf_reward_func(queries, prompts, labels, **kwargs)``: ``{"rewards", "scores", "extra_logs"}``.
* ``corrgrpo_tasks.code.data``: dataset loaders and prompt conversion; ``corrgrpo_tasks.code.evaluate``:
  Executable / Pass@1 / Efficiency.

See ``docs/tasks/code.md``.
"""

from ._adapters import make_openrlhf_reward_func, openrlhf_reward_func, trl_reward_functions
from ._extract import extract_code, parse_verifier
from ._reward import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    CodeRewardConfig,
    compute_score,
    compute_score_batch,
    score_batch,
)

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "CodeRewardConfig",
    "compute_score",
    "compute_score_batch",
    "extract_code",
    "make_openrlhf_reward_func",
    "openrlhf_reward_func",
    "parse_verifier",
    "score_batch",
    "trl_reward_functions",
]
