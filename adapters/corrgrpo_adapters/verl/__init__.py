"""CorrGRPO and the other corrgrpo_core estimators as a verl (0.9.x) plugin.

Installing ``corrgrpo-core[verl]`` declares the ``verl.plugins`` entry point
``corrgrpo_adapters.verl.plugin``, which every ``import verl`` loads. Switch an existing verl GRPO run
with ``algorithm.adv_estimator=corrgrpo +algorithm.reward_keys='[acc,fmt]' trainer.v1.trainer_mode=corrgrpo``;
see ``docs/adapters/verl.md``. ``python -m corrgrpo_adapters.verl`` checks the registration on a node.

This package imports nothing heavy itself: verl, torch and the core load with the plugin.
"""

from ._config import (
    COMPONENTS_FILTER_METRIC,
    ESTIMATORS,
    TRAINER_MODES,
    ConfigError,
    RewardSpec,
    check_trainer,
    reward_spec,
)

__all__ = [
    "COMPONENTS_FILTER_METRIC",
    "ESTIMATORS",
    "TRAINER_MODES",
    "ConfigError",
    "RewardSpec",
    "check_trainer",
    "reward_spec",
]
