"""Launch recipes: one command per domain and framework, the paper's hyperparameters as defaults.

``python -m corrgrpo_tasks.recipes DOMAIN FRAMEWORK [--estimator NAME] [--dry-run] [name=value ...]
[-- framework-specific args]``. :func:`build_recipe` is pure (no framework import), so a dry run and the
tests need none of verl, TRL or OpenRLHF.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corrgrpo_tasks.recipes._builders import (
    OPENRLHF_OUR_FLAGS,
    VERL_REWARD_FILE,
    Recipe,
    build_openrlhf,
    build_trl,
    build_verl,
    openrlhf_args,
    trl_config,
    verl_overrides,
)
from corrgrpo_tasks.recipes._hparams import (
    DOMAINS,
    FRAMEWORKS,
    SUPPORTED,
    HParams,
    apply_overrides,
    defaults,
    estimator_names,
)

_BUILDERS = {"verl": build_verl, "trl": build_trl, "openrlhf": build_openrlhf}


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
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; known: {list(DOMAINS)}")
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; known: {list(FRAMEWORKS)}")
    if framework not in SUPPORTED[domain]:
        raise ValueError(f"{domain} runs on {list(SUPPORTED[domain])}, not {framework}")
    known = estimator_names()
    if estimator not in known:
        raise ValueError(f"unknown estimator {estimator!r}; known: {list(known)}")
    hparams = apply_overrides(defaults(domain), overrides)
    if profile is not None:
        hparams = apply_overrides(hparams, {"profile": profile})
    return _BUILDERS[framework](domain, estimator, hparams, tuple(extra))


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
    "trl_config",
    "verl_overrides",
]
