"""What the launcher hands to every Ray worker: the estimator, the reward components, the core's options.

The configuration travels as JSON in one environment variable of the Ray ``runtime_env``, so that a
worker process (which shares no memory with the driver) rebuilds exactly the object the driver
validated.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CONFIG_ENV_VAR", "POLICY_LOSSES", "AdapterConfig"]

#: Environment variable that carries :meth:`AdapterConfig.to_json` into the Ray workers.
CONFIG_ENV_VAR = "CORRGRPO_OPENRLHF_CONFIG"

#: ``"openrlhf"`` keeps OpenRLHF's own policy loss (``--actor.policy_loss_type``); ``"cispo"`` swaps
#: in the core's CISPO objective.
POLICY_LOSSES = ("openrlhf", "cispo")

OptionValue = bool | int | float | str | None


@dataclasses.dataclass(frozen=True)
class AdapterConfig:
    """How the patched OpenRLHF computes advantages and (optionally) the policy loss.

    Parameters
    ----------
    estimator
        A name from ``corrgrpo_core.estimator_names()``.
    reward_keys
        Keys of ``Experience.info`` (the reward function's ``extra_logs``) that form the reward
        components, in order. ``"reward"`` is OpenRLHF's scalar reward after its length penalties.
    weights
        One weight per component, or ``None`` for the core's default.
    options
        Further keyword arguments for the core estimator (``eps``, ``ddof``, ``nan_policy``, ...).
    policy_loss
        ``"openrlhf"`` (default: OpenRLHF's own loss) or ``"cispo"``.
    log_stats
        Whether the core's diagnostics go into ``Experience.info`` (and so into OpenRLHF's logs).
    user_setup_hook
        A ``worker_process_setup_hook`` the user asked for; it runs before ours in every worker.
    """

    estimator: str
    reward_keys: tuple[str, ...]
    weights: tuple[float, ...] | None = None
    options: Mapping[str, OptionValue] = dataclasses.field(default_factory=dict)
    policy_loss: str = "openrlhf"
    log_stats: bool = True
    user_setup_hook: str | None = None

    def __post_init__(self) -> None:
        # Frozen dataclass: normalise containers once so equality and JSON round trips are exact.
        object.__setattr__(self, "reward_keys", tuple(self.reward_keys))
        if self.weights is not None:
            object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        object.__setattr__(self, "options", dict(self.options))
        self._validate()

    def _validate(self) -> None:
        import corrgrpo_core as cc

        names = cc.estimator_names()
        if self.estimator not in names:
            raise ValueError(f"unknown estimator {self.estimator!r}; choose one of {', '.join(names)}")
        if not self.reward_keys:
            raise ValueError("at least one reward component key is needed (Experience.info keys)")
        if len(set(self.reward_keys)) != len(self.reward_keys):
            raise ValueError(f"reward component keys repeat: {list(self.reward_keys)}")
        if self.weights is not None:
            if len(self.weights) != len(self.reward_keys):
                raise ValueError(
                    f"{len(self.weights)} weight(s) for {len(self.reward_keys)} reward component(s) "
                    f"{list(self.reward_keys)}; give one weight per component"
                )
            if not all(math.isfinite(w) for w in self.weights):
                raise ValueError(f"weights must be finite, got {list(self.weights)}")
        if self.policy_loss not in POLICY_LOSSES:
            raise ValueError(
                f"unknown policy loss {self.policy_loss!r}; choose one of {', '.join(POLICY_LOSSES)}"
            )
        if self.policy_loss == "cispo":
            from .objective import require_cispo

            require_cispo()
        reserved = {"weights", "group_ids", "estimator"} & set(self.options)
        if reserved:
            raise ValueError(f"option(s) {sorted(reserved)} are set by the adapter itself")
        # Let the core judge option names and values (its errors name the problem) on a tiny batch,
        # so a typo fails at launch rather than after the first rollout.
        import numpy as np

        probe = np.linspace(0.0, 1.0, 4 * len(self.reward_keys)).reshape(4, -1) ** 2
        try:
            cc.compute_advantages(probe, np.array([0, 0, 1, 1]), **self.core_kwargs())
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"the core rejects estimator {self.estimator!r} with {self.options}: {exc}"
            ) from exc

    def core_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``corrgrpo_core.compute_advantages`` besides scores and group ids."""
        kwargs: dict[str, Any] = dict(self.options)
        kwargs["estimator"] = self.estimator
        if self.weights is not None:
            kwargs["weights"] = list(self.weights)
        return kwargs

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AdapterConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{CONFIG_ENV_VAR} is not valid JSON: {exc}") from exc
        fields = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or not set(data) <= fields or "estimator" not in data:
            raise ValueError(f"{CONFIG_ENV_VAR} does not hold an adapter configuration: {text[:200]!r}")
        return cls(**data)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AdapterConfig:
        environ = os.environ if environ is None else environ
        text = environ.get(CONFIG_ENV_VAR)
        if text is None:
            raise RuntimeError(
                f"{CONFIG_ENV_VAR} is not set in this process; start training with the corrgrpo-openrlhf "
                "launcher, which puts it into every Ray worker"
            )
        return cls.from_json(text)


def parse_option(text: str) -> tuple[str, OptionValue]:
    """``NAME=VALUE`` with VALUE read as JSON when it parses (numbers, true/false/null), else a string."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise ValueError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    if isinstance(value, list | dict):
        raise TypeError(f"option {name} takes a single value, got {raw!r}")
    return name, value


def parse_options(items: Sequence[str]) -> dict[str, OptionValue]:
    options: dict[str, OptionValue] = {}
    for item in items:
        name, value = parse_option(item)
        if name in options:
            raise ValueError(f"option {name} given twice")
        options[name] = value
    return options
