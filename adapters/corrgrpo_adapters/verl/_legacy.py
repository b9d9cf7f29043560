"""Legacy trainer (``trainer.use_v1=False``): components from ``non_tensor_batch``, metrics into its log.

``RayPPOTrainer.fit`` copies every ``reward_extra_info`` key into ``batch.non_tensor_batch`` and calls the
module-level ``compute_advantage``, which passes ``non_tensor_batch`` to no estimator but verl's own
``gdpo``. We wrap that module attribute (``fit`` looks it up at call time) to open a component source
over ``non_tensor_batch`` for our estimators, and stash their metrics in ``meta_info``, from where the
wrapped ``compute_data_metrics`` (also looked up by ``fit``) adds them to the step's metrics.

The V1 helpers import ``compute_advantage`` from this module too; inside a corrgrpo trainer mode the
trainer's own source (TransferQueue ``extra_fields``) is already open and wins.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from ._config import ours
from ._estimator import active_source, component_source

META_KEY = "corrgrpo_metrics"
# The same call also serves verl's stock V1 trainer modes, whose non_tensor_batch holds only "uid".
ORIGIN = (
    "non_tensor_batch (the legacy trainer copies compute_score's dict there; on the V1 trainer the "
    "components arrive only with trainer.v1.trainer_mode=corrgrpo)"
)


def patch(ray_trainer: ModuleType) -> None:
    if getattr(ray_trainer.compute_advantage, "corrgrpo_wrapped", False):
        return
    original_advantage = ray_trainer.compute_advantage
    original_metrics = ray_trainer.compute_data_metrics

    @functools.wraps(original_advantage)
    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        if not ours(str(adv_estimator)) or active_source() is not None:
            return original_advantage(data, adv_estimator, *args, **kwargs)
        with component_source(data.non_tensor_batch, origin=ORIGIN) as source:
            data = original_advantage(data, adv_estimator, *args, **kwargs)
        data.meta_info[META_KEY] = dict(source.metrics)
        return data

    @functools.wraps(original_metrics)
    def compute_data_metrics(batch: Any, *args: Any, **kwargs: Any) -> Any:
        metrics = original_metrics(batch, *args, **kwargs)
        metrics.update(batch.meta_info.pop(META_KEY, {}))
        return metrics

    compute_advantage.corrgrpo_wrapped = True  # type: ignore[attr-defined]
    vars(ray_trainer).update(compute_advantage=compute_advantage, compute_data_metrics=compute_data_metrics)
