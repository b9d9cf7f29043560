"""verl plugin entry point (group ``verl.plugins``): loaded by every ``import verl``, in every process.

It registers, each when its verl module is imported:

* the estimators ``corrgrpo``, ``grpo_covariance_coefficient`` (alias), ``gdpo_corr``, ``mo_grpo`` and
  ``dara`` in ``verl.trainer.ppo.core_algos`` (``algorithm.adv_estimator=...``);
* the V1 trainer modes ``corrgrpo``, ``corrgrpo_colocate_async`` and ``corrgrpo_separate_async``
  (``trainer.v1.trainer_mode=...``), which hand reward components to the estimators;
* on the legacy trainer, a wrapper of ``ray_trainer.compute_advantage`` that hands them
  ``non_tensor_batch``, and one of ``compute_data_metrics`` that logs our ``corrgrpo/...`` metrics;
* a check after verl's ``validate_config``, so a bad corrgrpo config or a failed registration stops
  the driver before Ray starts.

verl logs a plugin that raises at DEBUG level and carries on, so nothing here raises at load time:
every failure is logged at ERROR level, remembered in :data:`FAILURES`, and raised again, with its
reason, by the config check, by the corrgrpo trainer modes and by placeholder estimators.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
import sys
import traceback
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .. import warn_outside_range
from . import _config
from ._import_hooks import after_import

logger = logging.getLogger("corrgrpo_adapters.verl")

#: step name -> reason, for every registration step that failed in this process.
FAILURES: dict[str, str] = {}
#: step names that completed in this process.
DONE: set[str] = set()
TAKEN = _config.TAKEN
ours = _config.ours


class PluginError(RuntimeError):
    """The corrgrpo verl plugin could not register what the config asks for."""


def failure_report() -> str:
    return "; ".join(f"{step}: {reason}" for step, reason in FAILURES.items())


def _guarded(step: str) -> Callable[[Callable[[ModuleType], None]], Callable[[ModuleType], None]]:
    def decorate(fn: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
        @functools.wraps(fn)
        def run(module: ModuleType) -> None:
            try:
                fn(module)
            except Exception as exc:  # noqa: BLE001 -- verl would hide it at DEBUG level
                FAILURES[step] = f"{type(exc).__name__}: {exc}"
                logger.error(
                    "corrgrpo verl plugin: %s failed: %s\n%s", step, FAILURES[step], traceback.format_exc()
                )
            else:
                DONE.add(step)

        return run

    return decorate


def _placeholder(name: str) -> Callable[..., Any]:
    def unavailable(**_: Any) -> Any:
        raise PluginError(
            f"advantage estimator {name!r} is unavailable: the corrgrpo verl plugin failed to "
            f"load ({failure_report()})"
        )

    return unavailable


@_guarded("estimators")
def _register_estimators(core_algos: ModuleType) -> None:
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    try:
        from . import _estimator
    except Exception:
        # Keep our names resolvable so that using them repeats the reason instead of verl's bare
        # "Unknown advantage estimator".
        for name in _config.ESTIMATORS:
            registry.setdefault(name, _placeholder(name))
        raise
    for name in _config.ESTIMATORS:
        current = registry.get(name)
        if getattr(current, "corrgrpo_estimator", None) == name:
            continue  # this process registered it already (the plugin loaded twice)
        if current is not None:
            # Another package owns this name: leave it theirs, register every other name, and say so.
            TAKEN[name] = _owner(current)
            logger.warning(
                "corrgrpo verl plugin: estimator name %r is registered to %s by another package; "
                "corrgrpo registered its other estimators and leaves %r to that package",
                name,
                TAKEN[name],
                name,
            )
            continue
        core_algos.register_adv_est(name)(_verl_estimator(_estimator, name))
    register_core_estimators(core_algos)
    import corrgrpo_core as cc

    # From now on, however late an estimator is registered in the core (a worker's own module, a
    # VERL_USE_EXTERNAL_MODULES module, a notebook), verl can select it by its name at once.
    cc.on_estimator_registered(_register_late)


def _register_late(spec: Any) -> None:
    """Mirror one estimator registered in the core after verl's ``core_algos`` into verl's registry.

    Never raises into the caller's ``register_estimator`` (which need not be about verl at all): a failure
    is logged and remembered, so the config check and the name itself repeat it.
    """
    core_algos = sys.modules.get("verl.trainer.ppo.core_algos")
    if core_algos is None:  # not reachable while subscribed; the import-time sweep would cover it
        return
    try:
        register_core_estimators(core_algos)
    except Exception as exc:  # noqa: BLE001 -- see the docstring
        step = f"estimator {spec.name}"
        FAILURES[step] = f"{type(exc).__name__}: {exc}"
        logger.error("corrgrpo verl plugin: %s failed: %s\n%s", step, FAILURES[step], traceback.format_exc())
        core_algos.ADV_ESTIMATOR_REGISTRY.setdefault(spec.name, _placeholder(spec.name))


def _verl_estimator(estimator_module: ModuleType, name: str) -> Callable[..., Any]:
    fn = functools.partial(estimator_module.advantages_for_verl, estimator=name)
    fn.corrgrpo_estimator = name  # type: ignore[attr-defined]
    return fn


def register_core_estimators(core_algos: ModuleType | None = None) -> list[str]:
    """Register in verl, under its own name, every estimator of the core's registry that verl cannot
    select yet: a user's ``corrgrpo_core.register_estimator(...)``, and built-ins verl has no name for
    (``dr_grpo``). Names verl already has (its own ``grpo``, ``rloo``, ``gdpo``, another package's) and
    core estimators reachable through :data:`ESTIMATORS` (``grpo`` as ``core_grpo``) are left alone.

    The plugin runs it when verl's ``core_algos`` is imported, and then for every later
    ``corrgrpo_core.register_estimator`` in the process (it subscribes to the core's registry), so a
    user never needs to call it; the driver's config check runs it once more. Returns the names it
    registered now.
    """
    import corrgrpo_core as cc

    from . import _estimator

    if core_algos is None:
        core_algos = importlib.import_module("verl.trainer.ppo.core_algos")
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    added = []
    for name in cc.estimator_names():
        if name in registry or name in _config.ESTIMATORS.values():
            continue
        core_algos.register_adv_est(name)(_verl_estimator(_estimator, name))
        _config.REGISTERED.add(name)
        added.append(name)
    return added


def _owner(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@_guarded("legacy trainer hooks")
def _patch_legacy_trainer(ray_trainer: ModuleType) -> None:
    from . import _legacy

    _legacy.patch(ray_trainer)


@_guarded("V1 trainer modes")
def _register_trainer_modes(v1: ModuleType) -> None:
    from . import _trainer

    _trainer.register(v1)
    _trainer.patch_multi_trajectories(v1.trainer_base)


@_guarded("config check")
def _patch_validate_config(config_module: ModuleType) -> None:
    original = config_module.validate_config
    if getattr(original, "corrgrpo_wrapped", False):
        return

    @functools.wraps(original)
    def validate_config(config: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(config, *args, **kwargs)
        check_config(config)
        return result

    validate_config.corrgrpo_wrapped = True  # type: ignore[attr-defined]
    vars(config_module)["validate_config"] = validate_config


def check_config(config: Any) -> _config.RewardSpec | None:
    """Validate the corrgrpo parts of a full verl config and the plugin's registration in this process.

    verl's ``validate_config`` calls this in the driver (``main_ppo``) once the plugin is loaded. Only our
    names are checked: an estimator that is not ours may be registered in the workers alone (a team's own,
    through ``VERL_USE_EXTERNAL_MODULES`` in Ray's runtime_env), which verl itself accepts.
    """
    algorithm = config.get("algorithm", {})
    trainer = config.get("trainer", {})
    name = str(algorithm.get("adv_estimator"))
    if "estimators" in DONE:  # a safety net: the subscription has registered them already
        register_core_estimators()
    mode = str(trainer.get("v1", {}).get("trainer_mode", "sync")) if trainer.get("use_v1", True) else None
    if name in TAKEN:
        logger.warning(
            "algorithm.adv_estimator=%s runs %s, which another package registered under that name before "
            "corrgrpo; corrgrpo's checks do not apply to it%s",
            name,
            TAKEN[name],
            " (corrgrpo's CorrGRPO is also registered as grpo_covariance_coefficient)"
            if name == "corrgrpo" and ours("grpo_covariance_coefficient")
            else "",
        )
    estimator_ours = ours(name)
    selected = estimator_ours or mode in _config.TRAINER_MODES
    # Trigger (and so check) the registrations this run needs here in the driver, before Ray starts; the
    # TaskRunner process repeats them when it imports the same modules.
    if selected:
        warn_outside_range("verl")
        # verl's trainer modules warn at import about optional engines and Ray's own deprecations; the
        # TaskRunner shows those when it imports them for real, so keep the driver's check quiet.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(
                "verl.trainer.ppo.v1" if mode is not None else "verl.trainer.ppo.ray_trainer"
            )
    if selected and FAILURES:
        raise PluginError(
            f"the config selects corrgrpo (adv_estimator={name}, trainer_mode={mode}) but the "
            f"corrgrpo verl plugin failed to load: {failure_report()}"
        )
    if selected and mode is not None:
        from verl.trainer.ppo.v1 import get_trainer_cls

        get_trainer_cls(mode)  # verl's error lists the registered modes
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    if name not in ADV_ESTIMATOR_REGISTRY:
        ours_now = _config.selectable()  # ours as registered in this process, the user's own included
        near = difflib.get_close_matches(name, ours_now, n=1, cutoff=0.8)
        if near:  # a misspelling of one of ours; anything else may be registered in the workers only
            raise _config.ConfigError(
                f"unknown algorithm.adv_estimator={name!r}; did you mean {near[0]!r}? corrgrpo's estimators: "
                f"{ours_now}"
            )
    return _config.check_trainer(config)


def install() -> None:
    after_import("verl.trainer.ppo.core_algos", _register_estimators)
    after_import("verl.trainer.ppo.ray_trainer", _patch_legacy_trainer)
    after_import("verl.trainer.ppo.v1", _register_trainer_modes)
    after_import("verl.utils.config", _patch_validate_config)
    # The estimators are cheap to register and the registry is consulted in any process, so load now.
    import verl.trainer.ppo.core_algos  # noqa: F401


try:
    install()
except Exception as exc:  # noqa: BLE001 -- verl would hide it at DEBUG level
    FAILURES["install"] = f"{type(exc).__name__}: {exc}"
    logger.error(
        "corrgrpo verl plugin failed to install: %s\n%s", FAILURES["install"], traceback.format_exc()
    )
