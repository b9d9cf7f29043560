"""Estimators by name, for adapters that pick one from a config string."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from . import _api
from ._lib._compat import Array

# advantage_stats options that mean the same thing whatever the estimator is.
SHARED_DIAGNOSTIC_OPTIONS = ("ddof", "nan_policy", "zero_variance_rtol")
# ... and those that also define CorrGRPO's own denominator, for the estimators that use it.
CORRELATION_DIAGNOSTIC_OPTIONS = (*SHARED_DIAGNOSTIC_OPTIONS, "eps", "eps_placement", "min_correlation_sum")


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator: ``fn(scores, group_ids=None, **options)`` and a one-line summary.

    ``diagnostic_options`` names the estimator options that :func:`advantage_stats` takes with the
    same meaning: the diagnostics of a batch are computed with exactly those of the advantages
    (see :meth:`diagnostic_kwargs`); every adapter asks here instead of filtering on its own.
    """

    name: str
    fn: Callable[..., Array]
    summary: str
    diagnostic_options: tuple[str, ...] = SHARED_DIAGNOSTIC_OPTIONS

    def diagnostic_kwargs(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The subset of ``options`` (for this estimator) to pass on to :func:`advantage_stats`.

        Examples
        --------
        >>> import corrgrpo_core as cc
        >>> opts = {"eps": 1e-4, "nan_policy": "ignore", "min_correlation_sum": 0.5}
        >>> cc.get_estimator("corrgrpo").diagnostic_kwargs(opts) == opts
        True
        >>> cc.get_estimator("gdpo").diagnostic_kwargs({"eps": 1e-4, "nan_policy": "ignore"})
        {'nan_policy': 'ignore'}
        """
        return {k: v for k, v in options.items() if k in self.diagnostic_options}

    @cached_property
    def options(self) -> tuple[str, ...]:
        """The keyword options ``fn`` accepts."""
        params = inspect.signature(self.fn).parameters.values()
        return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


_REGISTRY: dict[str, EstimatorSpec] = {}


def register_estimator(
    name: str,
    fn: Callable[..., Array],
    summary: str,
    *,
    diagnostic_options: tuple[str, ...] = SHARED_DIAGNOSTIC_OPTIONS,
) -> EstimatorSpec:
    """Add an estimator under ``name`` (an existing name is an error).

    ``fn(scores, group_ids=None, **options)`` must follow the calling convention of the
    built-in estimators; adapters then find it by name.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> spec = cc.register_estimator("grpo_trl_eps", lambda s, g=None, **kw: cc.grpo_advantage(s, g, eps=1e-4, **kw),
    ...                              "GRPO with TRL's eps")
    >>> "grpo_trl_eps" in cc.estimator_names()
    True
    """
    if name in _REGISTRY:
        raise ValueError(f"an estimator named {name!r} is already registered")
    taken = EstimatorSpec(name, fn, summary).options  # only options fn takes can be shared
    spec = EstimatorSpec(name, fn, summary, tuple(o for o in diagnostic_options if o in taken))
    _REGISTRY[name] = spec
    return spec


def estimator_names() -> tuple[str, ...]:
    """The registered estimator names, sorted.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> cc.estimator_names()[:3]
    ('corrgrpo', 'dara', 'dr_grpo')
    """
    return tuple(sorted(_REGISTRY))


def get_estimator(name: str) -> EstimatorSpec:
    """The estimator registered under ``name``; unknown names list the known ones.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> cc.get_estimator("corrgrpo").summary
    'centred total reward over the correlation norm of the group (CorrGRPO)'
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown estimator {name!r}; known: {', '.join(estimator_names())}") from None


def compute_advantages(
    scores: Array, /, group_ids: Any = None, *, estimator: str = "corrgrpo", **options: Any
) -> Array:
    """Advantages from the estimator named ``estimator`` (see :func:`estimator_names`).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> np.round(cc.compute_advantages(s, estimator="grpo"), 4)
    array([-1.0954,  0.5477,  1.0954, -0.5477])
    """
    spec = get_estimator(estimator)
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise TypeError(
            f"estimator {estimator!r} takes no option(s) {', '.join(unknown)}; "
            f"its options: {', '.join(spec.options)}"
        )
    return spec.fn(scores, group_ids, **options)


for _name, _fn, _summary in (
    (
        "corrgrpo",
        _api.corr_normalized_advantage,
        "centred total reward over the correlation norm of the group (CorrGRPO)",
    ),
    ("grpo", _api.grpo_advantage, "group z-score of the weighted total reward (std_scope='batch': one batch std)"),
    ("dr_grpo", _api.dr_grpo_advantage, "centred total reward, no std division (Dr.GRPO)"),
    ("rloo", _api.rloo_advantage, "leave-one-out baseline (RLOO)"),
    ("mo_grpo", _api.mo_grpo_advantage, "sum of per-component group z-scores (MO-GRPO)"),
    ("gdpo", _api.gdpo_advantage, "per-component group z-scores summed, then batch z-scored (GDPO)"),
    ("gdpo_corr", _api.gdpo_corr_advantage, "GDPO with the batch std replaced by a correlation norm"),
    ("dara", _api.dara_advantage, "density-aware weights on GDPO or CorrGRPO (DARA)"),
):
    register_estimator(
        _name,
        _fn,
        _summary,
        diagnostic_options=CORRELATION_DIAGNOSTIC_OPTIONS if _name == "corrgrpo" else SHARED_DIAGNOSTIC_OPTIONS,
    )
