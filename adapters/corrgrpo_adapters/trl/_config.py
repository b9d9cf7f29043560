"""``CorrGRPOConfig``: TRL's GRPOConfig plus the choice of core estimator and its options."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig  # type: ignore[attr-defined]

import corrgrpo_core as cc

__all__ = ["TRL_EPS", "AdvantagePlan", "CorrGRPOConfig", "advantage_plan"]

#: TRL's constant in (x - mean) / (std + eps); the TRL adapter's default eps for "grpo" and "gdpo".
TRL_EPS = 1e-4
_TRL_EPS_ESTIMATORS = ("grpo", "gdpo")
_SCALE_REWARDS = ("group", "batch", "none")
_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")

# Options the adapter supplies itself: weights are TRL's reward_weights; the result must be a plain array.
_RESERVED = {
    "weights": "set reward_weights instead",
    "xp": "the rewards' namespace is used",
    "std_scope": "set scale_rewards='batch' (or 'group') instead",
}
_NAMED_OPTIONS = {  # config field -> core option
    "advantage_eps": "eps",
    "advantage_eps_placement": "eps_placement",
    "advantage_min_correlation_sum": "min_correlation_sum",
    "advantage_nan_policy": "nan_policy",
}


@dataclass(frozen=True)
class AdvantagePlan:
    """Which core estimator computes the advantages, with which options, and how TRL names it.

    ``scale_rewards`` / ``multi_objective_aggregation`` are TRL's names for these advantages (what the
    trainer's attributes of those names read), or None when TRL has no equivalent (CorrGRPO, MO-GRPO,
    RLOO, ...).
    """

    estimator: str
    options: Mapping[str, Any]
    scale_rewards: str | None
    multi_objective_aggregation: str | None
    log_diagnostics: bool = True

    @property
    def trl_equivalent(self) -> bool:
        return self.multi_objective_aggregation is not None

    def diagnostic_options(self) -> dict[str, Any]:
        """The options the core's diagnostics share with these advantages (the registry decides)."""
        return cc.get_estimator(self.estimator).diagnostic_kwargs(self.options)


def _trl_plan(scale_rewards: Any, aggregation: str, nan_policy: str = "ignore") -> AdvantagePlan:
    """TRL's own estimator, as a core estimator: GRPOConfig(scale_rewards, multi_objective_aggregation)."""
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    if scale not in _SCALE_REWARDS:
        raise ValueError(
            f"scale_rewards={scale_rewards!r} is not one of TRL's {', '.join(map(repr, _SCALE_REWARDS))}"
        )
    if aggregation not in _AGGREGATIONS:
        raise ValueError(
            f"multi_objective_aggregation={aggregation!r} is not one of TRL's "
            f"{', '.join(map(repr, _AGGREGATIONS))}"
        )
    common = {"nan_policy": nan_policy}
    if aggregation == "normalize_then_sum":  # TRL's GDPO, which ignores scale_rewards
        return AdvantagePlan("gdpo", {"eps": TRL_EPS, **common}, scale, aggregation)
    if scale == "none":
        return AdvantagePlan("dr_grpo", common, scale, aggregation)
    return AdvantagePlan(
        "grpo",
        {"eps": TRL_EPS, **({"std_scope": "batch"} if scale == "batch" else {}), **common},
        scale,
        aggregation,
    )


def advantage_plan(args: GRPOConfig) -> AdvantagePlan:
    """The advantages a trainer built with ``args`` computes: ``CorrGRPOConfig.advantage_plan()``, or for
    TRL's own ``GRPOConfig`` exactly TRL's estimator (``scale_rewards``, ``multi_objective_aggregation``,
    TRL's eps 1e-4, rewards returned as None left out)."""
    if isinstance(args, CorrGRPOConfig):
        return args.advantage_plan()
    return _trl_plan(args.scale_rewards, args.multi_objective_aggregation)


@dataclass
class CorrGRPOConfig(GRPOConfig):
    r"""Configuration for :class:`CorrGRPOTrainer`: every ``GRPOConfig`` option, plus the estimator.

    The advantages come from ``corrgrpo_core.compute_advantages(rewards, estimator=advantage_estimator,
    weights=reward_weights, **options)`` on TRL's gathered per-function reward matrix, one component per
    ``reward_funcs`` entry. Options left at ``None`` take the core estimator's own default.

    TRL's own switches map onto the estimator where they mean something for it: ``scale_rewards="batch"``
    with ``"grpo"`` is one batch-wide std; ``scale_rewards="none"`` (or False) with ``"grpo"`` or
    ``"corrgrpo"`` is their unnormalised form, ``"dr_grpo"``; ``multi_objective_aggregation=
    "normalize_then_sum"`` goes with ``"gdpo"`` (which, as in TRL, ignores ``scale_rewards``). Any other
    combination is an error naming the estimator that does what was asked. ``"grpo"`` and ``"gdpo"``
    default to TRL's eps, 1e-4, so they reproduce TRL's advantages; see :func:`advantage_plan`.

    Example::

        args = CorrGRPOConfig(output_dir="out", advantage_estimator="corrgrpo",
                              reward_weights=[1.0, 0.5], advantage_min_correlation_sum=0.1)
    """

    advantage_estimator: str = field(
        default="corrgrpo",
        metadata={"help": "Advantage estimator from corrgrpo_core: " + ", ".join(cc.estimator_names()) + "."},
    )
    advantage_eps: float | None = field(
        default=None,
        metadata={"help": "Estimator eps (None: TRL's 1e-4 for grpo and gdpo, else the core default, 1e-6)."},
    )
    advantage_eps_placement: str | None = field(
        default=None,
        metadata={"help": "'inside' or 'outside' the square root (None: the estimator's default)."},
    )
    advantage_min_correlation_sum: float | None = field(
        default=None,
        metadata={
            "help": "Floor on the correlation sum (corrgrpo, gdpo_corr, dara); guards against the blow-up "
            "of anti-correlated components. None: the core default, 0."
        },
    )
    advantage_nan_policy: str = field(
        default="ignore",
        metadata={
            "help": "'ignore': rewards returned as None are left out of their component's statistics and "
            "rows where every function returned None get advantage 0 (TRL's rule); 'raise': error."
        },
    )
    advantage_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": 'Further estimator options as a dict or JSON string, e.g. {"variant": "sym"} for dara.'
        },
    )
    log_advantage_diagnostics: bool = field(
        default=True,
        metadata={
            "help": "Log the core's diagnostics (c_q, correlation sum, denominator shares, ...) under "
            "'corrgrpo/'."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[no-untyped-call]
        if isinstance(self.advantage_kwargs, str):
            self.advantage_kwargs = json.loads(self.advantage_kwargs)
        if self.advantage_kwargs is not None and not isinstance(self.advantage_kwargs, dict):
            raise TypeError(
                f"advantage_kwargs must be a dict or a JSON object, got {self.advantage_kwargs!r}"
            )
        self.advantage_plan()  # validates names and combinations now rather than at the first training step

    def advantage_plan(self) -> AdvantagePlan:
        """The core estimator and options these settings select, TRL's switches included (see the class
        docstring); an error names the estimator to use where a switch conflicts with the estimator."""
        name = self.advantage_estimator
        cc.get_estimator(name)  # unknown names list the known ones
        scale, aggregation = self.scale_rewards, self.multi_objective_aggregation
        if aggregation not in _AGGREGATIONS:
            raise ValueError(
                f"multi_objective_aggregation={aggregation!r} is not one of TRL's "
                f"{', '.join(map(repr, _AGGREGATIONS))}"
            )
        if scale not in _SCALE_REWARDS:
            raise ValueError(
                f"scale_rewards={scale!r} is not one of TRL's {', '.join(map(repr, _SCALE_REWARDS))}"
            )
        estimator, extra = name, {}
        trl_names: tuple[str | None, str | None] = (None, None)
        if aggregation == "normalize_then_sum" or name == "gdpo":  # TRL's GDPO, which ignores scale_rewards
            if name != "gdpo":
                raise ValueError(
                    f"multi_objective_aggregation='normalize_then_sum' is TRL's GDPO, which conflicts with "
                    f"advantage_estimator={name!r}; set advantage_estimator='gdpo' (TRL's normalize_then_sum; "
                    "'gdpo_corr' is its correlation-normalised form) and leave multi_objective_aggregation alone"
                )
            trl_names = (scale, "normalize_then_sum")
        elif scale == "none":
            # the estimator's form without the std / correlation norm, as the core's registry declares it
            # (dr_grpo for grpo and corrgrpo; dr_grpo and rloo are their own)
            unnormalised = cc.get_estimator(name).unnormalised
            if unnormalised is not None:
                estimator = unnormalised
                trl_names = ("none", aggregation) if unnormalised == "dr_grpo" else (None, None)
            else:
                raise ValueError(
                    f"scale_rewards='none' (no std scaling) conflicts with advantage_estimator={name!r}, which "
                    "normalises every reward component; for TRL's unscaled advantages set "
                    "advantage_estimator='dr_grpo'"
                )
        elif scale == "batch":
            if name != "grpo":
                raise ValueError(
                    f"scale_rewards='batch' (one standard deviation over the whole batch) conflicts with "
                    f"advantage_estimator={name!r}; for TRL's batch scaling set advantage_estimator='grpo'"
                )
            extra, trl_names = {"std_scope": "batch"}, ("batch", aggregation)
        elif name in ("grpo", "dr_grpo"):
            trl_names = ("group" if name == "grpo" else "none", aggregation)
        try:
            options = {**self.advantage_options(estimator), **extra}
        except ValueError as exc:
            if estimator == name:
                raise
            raise ValueError(
                f"{exc} (scale_rewards={scale!r} turns advantage_estimator={name!r} into {estimator!r})"
            ) from None
        if estimator in _TRL_EPS_ESTIMATORS and self.advantage_eps is None:
            options.setdefault("eps", TRL_EPS)
        return AdvantagePlan(estimator, options, *trl_names, log_diagnostics=self.log_advantage_diagnostics)

    def advantage_options(self, estimator: str | None = None) -> dict[str, Any]:
        """The keyword options passed to the core estimator (weights excluded: they are the trainer's
        ``reward_weights``); ``estimator`` defaults to ``advantage_estimator``."""
        spec = cc.get_estimator(estimator or self.advantage_estimator)
        options: dict[str, Any] = {}
        for name, option in _NAMED_OPTIONS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if option not in spec.options:
                raise ValueError(
                    f"{name} is set, but estimator {spec.name!r} takes no {option!r} option "
                    f"(its options: {', '.join(spec.config_options)})"
                )
            options[option] = value
        extra = self.advantage_kwargs if isinstance(self.advantage_kwargs, dict) else {}
        for option, value in extra.items():
            if option in _RESERVED:
                raise ValueError(f"advantage_kwargs cannot set {option!r}: {_RESERVED[option]}")
            if option in options:
                raise ValueError(
                    f"advantage_kwargs sets {option!r}, which has its own config field advantage_{option}"
                )
            if option not in spec.options:
                raise ValueError(
                    f"advantage_kwargs sets {option!r}, but estimator {spec.name!r} takes no such "
                    f"option (its options: {', '.join(spec.config_options)})"
                )
            options[option] = value
        return options
