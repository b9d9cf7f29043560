"""The conformance kit: strategies, reference loops and invariant checks for advantage estimators.

Anyone reimplementing CorrGRPO (another framework, language or kernel) can run
:func:`check_advantage_estimator` against their function. Needs ``hypothesis``
(``pip install corrgrpo-core[test]``).
"""

from .._oracles import (
    ORACLES,
    corrgrpo_oracle,
    dr_grpo_oracle,
    gdpo_oracle,
    grpo_oracle,
    mo_grpo_oracle,
    rloo_oracle,
)
from ._checks import check_advantage_estimator, check_batch
from ._strategies import RewardBatch, reward_batches, weights_for

__all__ = [
    "ORACLES",
    "RewardBatch",
    "check_advantage_estimator",
    "check_batch",
    "corrgrpo_oracle",
    "dr_grpo_oracle",
    "gdpo_oracle",
    "grpo_oracle",
    "mo_grpo_oracle",
    "reward_batches",
    "rloo_oracle",
    "weights_for",
]
