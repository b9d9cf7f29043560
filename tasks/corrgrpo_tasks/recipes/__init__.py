"""Launch recipes: one command per domain and framework, the paper's hyperparameters as defaults.

``python -m corrgrpo_tasks.recipes DOMAIN FRAMEWORK [--estimator NAME] [--dry-run] [name=value ...]
[-- framework-specific args]``. :func:`build_recipe` is pure (no framework import), so a dry run and the
tests need none of verl, TRL or OpenRLHF.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corrgrpo_tasks.domains import DOMAINS as _SPECS
from corrgrpo_tasks.domains import framework_names, get_domain, get_framework, parse_domain
from corrgrpo_tasks.domains import resolve as _resolve
from corrgrpo_tasks.recipes._builders import (
    OPENRLHF_OUR_FLAGS,
    VERL_REWARD_FILE,
    Recipe,
    openrlhf_args,
    trl_config,
    verl_overrides,
)
from corrgrpo_tasks.recipes._hparams import HParams, apply_overrides, defaults, estimator_names

# Views of the domain specs (corrgrpo_tasks.domains), kept for the recipes' callers.
DOMAINS: tuple[str, ...] = tuple(_SPECS)
FRAMEWORKS: tuple[str, ...] = framework_names()
SUPPORTED: dict[str, tuple[str, ...]] = {d.name: d.frameworks for d in _SPECS.values()}


def build_recipe(
    domain: str,
    framework: str,
    *,
    estimator: str = "corrgrpo",
    overrides: Sequence[str] | Mapping[str, Any] = (),
    extra: Sequence[str] = (),
    profile: str | None = None,
) -> Recipe:
    """Resolve the launch of ``domain`` on ``framework`` with ``estimator``.

    ``overrides`` change hyperparameters (``"lr=2e-6"`` strings or a mapping); ``extra`` is passed to
    the framework verbatim (verl hydra overrides, OpenRLHF flags, TRL ``GRPOConfig`` ``field=value``).
    ``profile`` (``"paper"``, the default, or ``"hardened"``) selects the reward's definition, as the
    ``profile=`` override does.

    >>> r = build_recipe("tool_calling", "verl", estimator="grpo", overrides=["lr=2e-6"])
    >>> r.config["overrides"]["algorithm.adv_estimator"], r.config["overrides"]["actor_rollout_ref.actor.optim.lr"]
    ('grpo', 2e-06)
    """
    spec = get_domain(domain)
    builder = get_framework(framework).builder
    if framework not in spec.frameworks:
        raise ValueError(f"{spec.name} runs on {list(spec.frameworks)}, not {framework}")
    known = estimator_names()
    if estimator not in known:
        raise ValueError(f"unknown estimator {estimator!r}; known: {list(known)}")
    hparams = apply_overrides(defaults(spec.name), overrides)
    if profile is not None:
        hparams = apply_overrides(hparams, {"profile": profile})
    if hparams.profile not in spec.profiles:
        raise ValueError(f"profile must be one of {list(spec.profiles)}, got {hparams.profile!r}")
    built: Recipe = _resolve(builder)(spec.name, estimator, hparams, tuple(extra))
    return built


__all__ = [
    "DOMAINS",
    "FRAMEWORKS",
    "OPENRLHF_OUR_FLAGS",
    "SUPPORTED",
    "VERL_REWARD_FILE",
    "HParams",
    "Recipe",
    "apply_overrides",
    "build_recipe",
    "defaults",
    "estimator_names",
    "openrlhf_args",
    "parse_domain",
    "trl_config",
    "verl_overrides",
]
