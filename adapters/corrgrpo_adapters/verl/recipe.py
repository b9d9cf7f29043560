"""The ``algorithm.*`` overrides that select a core estimator in a verl launch (plain Python: no verl).

What a launcher (``corrgrpo_tasks.recipes``) needs to know about verl's estimators, kept beside the plugin
that registers them: verl ships ``grpo``, ``rloo`` and ``gdpo`` under the core's names, and a recipe uses
verl's own there, as the paper's baselines did (``grpo`` and ``rloo`` see the scalar ``score``, ``gdpo``
the components, on the legacy trainer only). Every other core estimator is the plugin's, under its core
name, reading every reward component; one that is another estimator without its normalisation (the core
registry's ``unnormalised``, e.g. Dr.GRPO for CorrGRPO) selects that one with
``algorithm.norm_adv_by_std_in_grpo=False``.

>>> estimator_overrides("dr_grpo", ("acc", "fmt"), (1.0, 1.0))["algorithm.adv_estimator"]
'corrgrpo'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._config import ESTIMATORS

__all__ = ["VERL_OWN", "estimator_overrides"]

VERL_OWN: tuple[str, ...] = ("grpo", "rloo", "gdpo")
"""Core estimator names verl also ships; a recipe selects verl's own."""


def _list(values: Sequence[Any]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def _normalised_form(estimator: str) -> str | None:
    """The plugin's estimator (verl name = core name) that is ``estimator`` plus a normalisation, if any."""
    import corrgrpo_core as cc

    for name in dict.fromkeys(ESTIMATORS.values()):
        if name != estimator and name not in VERL_OWN and cc.get_estimator(name).unnormalised == estimator:
            return name
    return None


def estimator_overrides(
    estimator: str, reward_keys: Sequence[str], weights: Sequence[float], *, legacy_trainer: bool = True
) -> dict[str, Any]:
    """verl's overrides selecting the core estimator ``estimator`` over the reward components
    ``reward_keys`` (weighted by ``weights``), on verl's legacy trainer or its V1 trainer."""
    import corrgrpo_core as cc

    if estimator not in cc.estimator_names():
        raise ValueError(f"no verl estimator for {estimator!r}; known: {list(cc.estimator_names())}")
    if estimator in ("grpo", "rloo"):
        return {"algorithm.adv_estimator": estimator}
    if estimator == "gdpo":
        if not legacy_trainer:
            raise ValueError("verl's own gdpo runs on the legacy trainer only; keep verl_legacy_trainer=true")
        return {
            "algorithm.adv_estimator": "gdpo",
            "+algorithm.gdpo_reward_keys": _list(reward_keys),
            "+algorithm.gdpo_reward_weights": _list(weights),
        }
    normalised = _normalised_form(estimator)
    chosen: dict[str, Any] = {
        "algorithm.adv_estimator": normalised or estimator,
        "+algorithm.reward_keys": _list(reward_keys),
        "+algorithm.reward_weights": _list(weights),
    }
    if normalised:
        chosen["algorithm.norm_adv_by_std_in_grpo"] = False
    if not legacy_trainer:
        chosen["trainer.v1.trainer_mode"] = "corrgrpo"
    return chosen
