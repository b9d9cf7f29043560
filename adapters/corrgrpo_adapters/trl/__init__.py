"""CorrGRPO and every other ``corrgrpo_core`` estimator inside TRL's ``GRPOTrainer``.

Swapping ``trl.GRPOTrainer`` for ``CorrGRPOTrainer`` alone changes nothing (TRL's own ``GRPOConfig``
gives TRL's own advantages, computed by the core); switching the estimator is one more line::

    from corrgrpo_adapters.trl import CorrGRPOConfig as GRPOConfig, CorrGRPOTrainer as GRPOTrainer
    args = GRPOConfig(..., advantage_estimator="corrgrpo")   # or "grpo", "gdpo", "gdpo_corr", "dara", ...

Each ``reward_funcs`` entry is one reward component; ``reward_weights`` are the component weights.
TRL's own reward logging is kept, and the core's diagnostics are logged under ``corrgrpo/`` (see
``docs/adapters/trl.md``). Importing this package is cheap; TRL is imported on first use of a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._advantages import advantage_diagnostics, group_advantages

if TYPE_CHECKING:
    from ._compat import SUPPORTED_TRL, UnsupportedTRLError, check_trl_compatibility
    from ._config import TRL_EPS, AdvantagePlan, CorrGRPOConfig, advantage_plan
    from ._trainer import CorrGRPOTrainer

__all__ = [
    "SUPPORTED_TRL",
    "TRL_EPS",
    "AdvantagePlan",
    "CorrGRPOConfig",
    "CorrGRPOTrainer",
    "UnsupportedTRLError",
    "advantage_diagnostics",
    "advantage_plan",
    "check_trl_compatibility",
    "group_advantages",
]

_LAZY = {
    "SUPPORTED_TRL": "_compat",
    "UnsupportedTRLError": "_compat",
    "check_trl_compatibility": "_compat",
    "CorrGRPOConfig": "_config",
    "AdvantagePlan": "_config",
    "TRL_EPS": "_config",
    "advantage_plan": "_config",
    "CorrGRPOTrainer": "_trainer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    try:
        value = getattr(import_module(f"{__name__}.{module}"), name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("trl", "transformers", "torch", "accelerate"):
            raise ModuleNotFoundError(
                f"corrgrpo_adapters.trl.{name} needs TRL ({exc.name} is not installed); "
                "install it with: pip install 'corrgrpo-core[trl]'",
                name=exc.name,
            ) from exc
        raise
    globals()[name] = value
    return value
