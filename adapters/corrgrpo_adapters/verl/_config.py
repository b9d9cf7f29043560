"""The adapter's settings, read from verl's ``algorithm`` config section and validated.

Everything here is plain Python (no verl, no torch, and corrgrpo_core only inside the functions that ask
its registry) so that the plugin shim can import this module and report a broken installation even when
the heavier modules fail to import. What an estimator is (its unnormalised form, its options) comes from
the core's registry, ``corrgrpo_core.get_estimator(name)``, never from a list kept here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import METRIC_PREFIX

# verl estimator name -> core estimator name. ``grpo_covariance_coefficient`` is the name the paper's own
# verl fork uses for CorrGRPO, so its launch scripts select our estimator unchanged. ``core_grpo`` is the
# core's GRPO under a name verl does not use: verl's GRPO maths (eps 1e-6 outside the std, ddof 1), a
# group of one gets 0, and the whole call costs less than verl's own ``grpo_vectorized``.
ESTIMATORS: Mapping[str, str] = {
    "core_grpo": "grpo",
    "corrgrpo": "corrgrpo",
    "grpo_covariance_coefficient": "corrgrpo",
    "gdpo_corr": "gdpo_corr",
    "mo_grpo": "mo_grpo",
    "dara": "dara",
}

# V1 trainer modes we register: our name -> the verl mode whose behaviour it keeps.
TRAINER_MODES: Mapping[str, str] = {
    "corrgrpo": "sync",
    "corrgrpo_colocate_async": "colocate_async",
    "corrgrpo_separate_async": "separate_async",
}

# ``algorithm.filter_groups.metric`` value that asks for component-aware DAPO filtering: a group is dropped
# only when every configured reward component is constant inside it, not when only the total ties.
COMPONENTS_FILTER_METRIC = "reward_components"

METRICS_PREFIX = METRIC_PREFIX  # the name every adapter logs under (corrgrpo_adapters)

#: our estimator names that another package registered first in this process -> its function (left to it).
TAKEN: dict[str, str] = {}


#: estimators of the core's registry beyond :data:`ESTIMATORS` (a user's ``register_estimator``, and
#: built-ins such as ``dr_grpo`` that verl has no name for), registered in verl under their core name.
REGISTERED: set[str] = set()


def selectable() -> list[str]:
    """Our estimator names that verl can select in this process, sorted: :data:`ESTIMATORS` less those another
    package took first, and the core's estimators registered under their own name (:data:`REGISTERED`, which
    grows with every ``corrgrpo_core.register_estimator``). What error messages suggest."""
    return sorted({n for n in ESTIMATORS if n not in TAKEN} | REGISTERED)


def ours(name: str) -> bool:
    """Whether ``name`` is one of our estimator names and not left to another package that took it first."""
    return (name in ESTIMATORS and name not in TAKEN) or name in REGISTERED


def core_estimator(name: str) -> str | None:
    """The core estimator that verl's estimator ``name`` runs, or None when it is not ours."""
    return ESTIMATORS.get(name, name if name in REGISTERED else None)


class ConfigError(ValueError):
    """A verl config that selects a corrgrpo estimator or trainer mode is inconsistent."""


@dataclass(frozen=True)
class RewardSpec:
    """What one advantage computation needs, taken from ``config.algorithm``.

    ``keys`` are ``reward_extra_info`` names (the keys of ``compute_score``'s returned dict), in column
    order; empty means a single component, the summed ``token_level_rewards``. ``core_estimator`` and
    ``core_kwargs`` are passed to ``corrgrpo_core.compute_advantages``.
    """

    verl_name: str
    core_estimator: str
    keys: tuple[str, ...] = ()
    weights: tuple[float, ...] | None = None
    core_kwargs: Mapping[str, Any] = field(default_factory=dict)


def _get(section: Any, name: str, default: Any = None) -> Any:
    # DictConfig, dict and AlgoConfig dataclasses all answer ``.get`` or attribute access.
    if isinstance(section, Mapping) or hasattr(section, "get"):
        return section.get(name, default)
    return getattr(section, name, default)


def _as_list(value: Any, name: str) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigError(
            f"algorithm.{name} must be a list, got {value!r}; write e.g. +algorithm.{name}='[acc,fmt]'"
        )
    return list(value)


def _list_option(algorithm: Any, name: str) -> list[Any] | None:
    """``algorithm.<name>``, or ``algorithm.gdpo_<name>`` (verl's GDPO and the paper's fork use those)."""
    value = _as_list(_get(algorithm, name), name)
    legacy = _as_list(_get(algorithm, f"gdpo_{name}"), f"gdpo_{name}")
    if value is not None and legacy is not None and value != legacy:
        raise ConfigError(
            f"algorithm.{name}={value} and algorithm.gdpo_{name}={legacy} disagree; set only one of them"
        )
    return value if value is not None else legacy


def reward_keys(algorithm: Any) -> tuple[str, ...]:
    keys = _list_option(algorithm, "reward_keys")
    if keys is None:
        return ()
    if not keys:
        raise ConfigError(
            "algorithm.reward_keys is empty; list the compute_score dict keys to combine, "
            "or drop the option to use the single summed reward"
        )
    bad = [k for k in keys if not isinstance(k, str) or not k]
    if bad:
        raise ConfigError(f"algorithm.reward_keys must be non-empty strings, got {bad}")
    duplicated = sorted({k for k in keys if keys.count(k) > 1})
    if duplicated:
        raise ConfigError(f"algorithm.reward_keys lists {duplicated} more than once")
    return tuple(keys)


def _reward_weights(algorithm: Any, keys: tuple[str, ...]) -> tuple[float, ...] | None:
    weights = _list_option(algorithm, "reward_weights")
    if weights is None:
        return None
    if not keys:
        raise ConfigError(
            f"algorithm.reward_weights={weights} is set but algorithm.reward_keys is not; "
            "weights apply to named reward components"
        )
    if len(weights) != len(keys):
        raise ConfigError(
            f"algorithm.reward_weights has {len(weights)} entries but algorithm.reward_keys "
            f"has {len(keys)} ({list(keys)}); give one weight per key"
        )
    try:
        values = tuple(float(w) for w in weights)
    except (TypeError, ValueError):
        raise ConfigError(f"algorithm.reward_weights must be numbers, got {weights}") from None
    if not all(math.isfinite(w) for w in values):
        raise ConfigError(f"algorithm.reward_weights must be finite, got {weights}")
    return values


def reward_spec(algorithm: Any, estimator: str | None = None) -> RewardSpec:
    """Validate the adapter's options in verl's ``algorithm`` section and return them.

    ``estimator`` defaults to ``algorithm.adv_estimator``; it must be one of :data:`ESTIMATORS` or an
    estimator of the core's registry that the plugin registered in verl under its own name
    (:data:`REGISTERED`).
    Options: ``reward_keys`` / ``reward_weights`` (``gdpo_reward_keys`` / ``gdpo_reward_weights``, the
    names verl's GDPO and the paper's fork use, are accepted too), ``norm_adv_by_std_in_grpo`` (verl's own
    flag) and ``estimator_kwargs`` (a dict passed to the core estimator, e.g. ``{eps: 1e-4}``).
    """
    name = str(estimator if estimator is not None else _get(algorithm, "adv_estimator"))
    core = core_estimator(name)
    if core is None:
        raise ConfigError(f"{name!r} is not a corrgrpo estimator; choose one of {selectable()}")
    keys = reward_keys(algorithm)
    weights = _reward_weights(algorithm, keys)
    if not bool(_get(algorithm, "norm_adv_by_std_in_grpo", True)):
        # verl's GRPO then skips the division by the group std and keeps the centred score (Dr.GRPO); the
        # registry names each estimator's form without normalisation (``EstimatorSpec.unnormalised``).
        # Those that normalise every component have none: the flag is rejected, not silently ignored.
        unnormalised = _unnormalised(core)
        if unnormalised is None:
            raise ConfigError(
                f"algorithm.norm_adv_by_std_in_grpo=False has no meaning for {name!r}, which "
                "normalises every component before combining them; remove the flag or use "
                f"one of {[n for n in selectable() if (c := core_estimator(n)) and _unnormalised(c)]}"
            )
        core = unnormalised
    extra = _get(algorithm, "estimator_kwargs")
    if extra is None:
        extra = {}
    if not isinstance(extra, Mapping) and not hasattr(extra, "items"):
        raise ConfigError(f"algorithm.estimator_kwargs must be a dict, got {extra!r}")
    kwargs = {str(k): v for k, v in extra.items()}
    for reserved in ("weights", "group_ids", "estimator"):
        if reserved in kwargs:
            raise ConfigError(
                f"algorithm.estimator_kwargs may not set {reserved!r}; it comes from "
                "algorithm.reward_weights and the batch"
            )
    _check_core_options(core, kwargs, len(keys) or 1, weights)
    return RewardSpec(verl_name=name, core_estimator=core, keys=keys, weights=weights, core_kwargs=kwargs)


def _unnormalised(core: str) -> str | None:
    """The core estimator that is ``core`` without its normalisation, as the core's registry declares it."""
    try:
        import corrgrpo_core as cc
    except ImportError as exc:
        raise ConfigError(f"corrgrpo_core failed to import ({exc}); reinstall corrgrpo-core") from exc
    return cc.get_estimator(core).unnormalised


def _check_core_options(core: str, kwargs: dict[str, Any], k: int, weights: tuple[float, ...] | None) -> None:
    """Unknown ``estimator_kwargs`` names and bad values fail here, at config time, not at the first step.

    The core is imported lazily (this module stays importable when it is broken; the plugin reports that).
    """
    try:
        import numpy as np

        import corrgrpo_core as cc
    except ImportError:
        return
    spec = cc.get_estimator(core)
    unknown = sorted(set(kwargs) - set(spec.config_options))
    if unknown:
        raise ConfigError(
            f"algorithm.estimator_kwargs sets {unknown}, which estimator {core!r} does not take; "
            f"its options: {', '.join(spec.config_options)}"
        )
    try:
        key = (core, tuple(sorted(kwargs.items())), k, weights)
        hash(key)
    except TypeError:  # an unhashable option value: probed every time
        key = None
    if key is not None and key in _PROBED:
        return
    probe = np.arange(4 * k, dtype=np.float64).reshape(2, 2, k) % 3  # two groups of two
    try:
        cc.compute_advantages(probe, estimator=core, weights=weights, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"algorithm.estimator_kwargs={kwargs} is rejected by estimator {core!r}: {exc}"
        ) from None
    if key is not None and len(_PROBED) < 256:
        _PROBED.add(key)


#: Options the core accepted on a probe batch (``_check_core_options``): verl validates the spec on every
#: advantage call, and the probe, a core call of its own, cost as much as the call at L = 1.
_PROBED: set[tuple[Any, ...]] = set()


def check_trainer(config: Any) -> RewardSpec | None:
    """Cross-check a full verl config (``algorithm``, ``trainer``) before anything starts.

    Returns the reward spec when a corrgrpo estimator is selected (and registered as ours), else ``None``.
    Raises :class:`ConfigError` when reward components would never reach the estimator (V1 trainer with
    verl's own trainer mode), when ``reward_keys`` would be ignored (an estimator that is not ours), or when
    component-aware filtering is asked for without the components.
    """
    algorithm, trainer = _get(config, "algorithm"), _get(config, "trainer")
    use_v1 = bool(_get(trainer, "use_v1", True))
    v1 = _get(trainer, "v1") or {}
    mode = str(_get(v1, "trainer_mode", "sync"))
    filter_groups = _get(algorithm, "filter_groups") or {}
    component_filter = (
        bool(_get(filter_groups, "enable", False))
        and _get(filter_groups, "metric") == COMPONENTS_FILTER_METRIC
    )
    name = str(_get(algorithm, "adv_estimator"))
    spec = reward_spec(algorithm) if ours(name) else None
    keys = spec.keys if spec is not None else reward_keys(algorithm)
    our_mode = use_v1 and mode in TRAINER_MODES
    own_keys = _as_list(_get(algorithm, "reward_keys"), "reward_keys")
    if spec is None and own_keys and not component_filter and core_estimator(name) is None:
        raise ConfigError(
            f"algorithm.reward_keys={own_keys} is read only by the corrgrpo estimators; "
            f"algorithm.adv_estimator={name} would ignore it and train on the summed reward. Choose one of "
            f"{selectable()}"
            + (" (verl's own gdpo reads +algorithm.gdpo_reward_keys)" if name == "gdpo" else "")
            + ", or remove reward_keys"
        )
    if spec is not None and spec.keys and use_v1 and not our_mode:
        raise ConfigError(
            f"algorithm.adv_estimator={name} with reward_keys={list(spec.keys)} on verl's V1 trainer needs "
            f"trainer.v1.trainer_mode={_our_mode(mode)} (verl's own '{mode}' mode does not pass reward "
            "components to advantage estimators); or run the legacy trainer with trainer.use_v1=False"
        )
    if component_filter:
        if not keys:
            raise ConfigError(
                f"algorithm.filter_groups.metric={COMPONENTS_FILTER_METRIC} needs "
                "+algorithm.reward_keys=[...] naming the components to check"
            )
        if not our_mode:
            raise ConfigError(
                f"algorithm.filter_groups.metric={COMPONENTS_FILTER_METRIC} is implemented by "
                f"the corrgrpo trainer modes; set trainer.v1.trainer_mode={_our_mode(mode)} "
                "(group filtering exists only on verl's V1 trainer)"
            )
    return spec


def _our_mode(mode: str) -> str:
    return next((ours for ours, base in TRAINER_MODES.items() if base == mode), "corrgrpo")
