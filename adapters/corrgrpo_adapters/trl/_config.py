"""``CorrGRPOConfig``: TRL's GRPOConfig plus the choice of core estimator and its options."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig  # type: ignore[attr-defined]

import corrgrpo_core as cc

__all__ = ["CorrGRPOConfig"]

# Options the adapter supplies itself: weights are TRL's reward_weights; the result must be a plain array.
_RESERVED = {"weights": "set reward_weights instead", "xp": "the rewards' namespace is used",
             "return_stats": "diagnostics are logged by log_advantage_diagnostics"}
_NAMED_OPTIONS = {  # config field -> core option
    "advantage_eps": "eps",
    "advantage_eps_placement": "eps_placement",
    "advantage_min_correlation_sum": "min_correlation_sum",
    "advantage_nan_policy": "nan_policy",
}


@dataclass
class CorrGRPOConfig(GRPOConfig):
    r"""Configuration for :class:`CorrGRPOTrainer`: every ``GRPOConfig`` option, plus the estimator.

    The advantages come from ``corrgrpo_core.compute_advantages(rewards, estimator=advantage_estimator,
    weights=reward_weights, **options)`` on TRL's gathered per-function reward matrix, one component per
    ``reward_funcs`` entry. Options left at ``None`` take the core estimator's own default.

    TRL's built-in estimator switches ``scale_rewards`` and ``multi_objective_aggregation`` must stay at
    their defaults: the estimator name replaces them (``"dr_grpo"`` for ``scale_rewards="none"``,
    ``"gdpo"`` for ``"normalize_then_sum"``). To reproduce TRL's numbers exactly with ``"grpo"`` or
    ``"gdpo"``, set ``advantage_eps=1e-4`` (TRL's constant; the core defaults to 1e-6).

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
        metadata={"help": "Estimator eps (None: the core default, 1e-6). TRL's built-in estimator uses 1e-4."},
    )
    advantage_eps_placement: str | None = field(
        default=None,
        metadata={"help": "'inside' or 'outside' the square root (None: the estimator's default)."},
    )
    advantage_min_correlation_sum: float | None = field(
        default=None,
        metadata={"help": "Floor on the correlation sum (corrgrpo, gdpo_corr, dara); guards against the blow-up "
                  "of anti-correlated components. None: the core default, 0."},
    )
    advantage_nan_policy: str = field(
        default="ignore",
        metadata={"help": "'ignore': rewards returned as None are left out of their component's statistics and "
                  "rows where every function returned None get advantage 0 (TRL's rule); 'raise': error."},
    )
    advantage_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Further estimator options as a dict or JSON string, e.g. {\"variant\": \"sym\"} for "
                  "dara."},
    )
    log_advantage_diagnostics: bool = field(
        default=True,
        metadata={"help": "Log the core's diagnostics (c_q, correlation sum, denominator shares, ...) under "
                  "'corrgrpo/'."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[no-untyped-call]
        if isinstance(self.advantage_kwargs, str):
            self.advantage_kwargs = json.loads(self.advantage_kwargs)
        if self.advantage_kwargs is not None and not isinstance(self.advantage_kwargs, dict):
            raise TypeError(f"advantage_kwargs must be a dict or a JSON object, got {self.advantage_kwargs!r}")
        if self.scale_rewards != "group":
            raise ValueError(
                f"scale_rewards={self.scale_rewards!r} configures TRL's built-in estimator, which "
                "advantage_estimator replaces; leave it at 'group' (use advantage_estimator='dr_grpo' for no "
                "std scaling)")
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r} configures TRL's built-in "
                "estimator, which advantage_estimator replaces; leave it at 'sum_then_normalize' (use "
                "advantage_estimator='gdpo' for normalize_then_sum)")
        self.advantage_options()  # validates the names now rather than at the first training step

    def advantage_options(self) -> dict[str, Any]:
        """The keyword options passed to the core estimator (weights excluded: they are the trainer's
        ``reward_weights``)."""
        spec = cc.get_estimator(self.advantage_estimator)
        options: dict[str, Any] = {}
        for name, option in _NAMED_OPTIONS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if option not in spec.options:
                raise ValueError(f"{name} is set, but estimator {spec.name!r} takes no {option!r} option "
                                 f"(its options: {', '.join(spec.options)})")
            options[option] = value
        extra = self.advantage_kwargs if isinstance(self.advantage_kwargs, dict) else {}
        for option, value in extra.items():
            if option in _RESERVED:
                raise ValueError(f"advantage_kwargs cannot set {option!r}: {_RESERVED[option]}")
            if option in options:
                raise ValueError(f"advantage_kwargs sets {option!r}, which has its own config field "
                                 f"advantage_{option}")
            if option not in spec.options:
                raise ValueError(f"advantage_kwargs sets {option!r}, but estimator {spec.name!r} takes no such "
                                 f"option (its options: {', '.join(spec.options)})")
            options[option] = value
        return options
