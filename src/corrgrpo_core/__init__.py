"""Multi-reward advantage estimators for GRPO-style reinforcement learning, on any array-API backend.

>>> import numpy as np, corrgrpo_core as cc
>>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
>>> np.round(cc.corrgrpo_advantage(s), 4)
array([-1.8607,  0.9304,  1.8607, -0.9304])
"""

from . import objectives
from ._api import (
    advantage_stats,
    corr_normalized_advantage,
    corrgrpo_advantage,
    dara_advantage,
    dr_grpo_advantage,
    gdpo_advantage,
    gdpo_corr_advantage,
    grpo_advantage,
    mo_grpo_advantage,
    rloo_advantage,
)
from ._diagnostics import AdvantageStats
from ._group_stats import GroupStats, group_stats
from ._groups import dense_group_size, group_labels, run_length
from ._registry import (
    EstimatorSpec,
    compute_advantages,
    estimator_names,
    get_estimator,
    on_estimator_registered,
    register_estimator,
)
from ._tokens import broadcast_to_tokens
from ._validation import DaraBase, DaraVariant, EpsPlacement, NanPolicy, SingletonPolicy, StdScope

__version__ = "0.1.0"

__all__ = [
    "AdvantageStats",
    "DaraBase",
    "DaraVariant",
    "EpsPlacement",
    "EstimatorSpec",
    "GroupStats",
    "NanPolicy",
    "SingletonPolicy",
    "StdScope",
    "__version__",
    "advantage_stats",
    "broadcast_to_tokens",
    "compute_advantages",
    "corr_normalized_advantage",
    "corrgrpo_advantage",
    "dara_advantage",
    "dense_group_size",
    "dr_grpo_advantage",
    "estimator_names",
    "gdpo_advantage",
    "gdpo_corr_advantage",
    "get_estimator",
    "group_labels",
    "group_stats",
    "grpo_advantage",
    "mo_grpo_advantage",
    "objectives",
    "on_estimator_registered",
    "register_estimator",
    "rloo_advantage",
    "run_length",
]
