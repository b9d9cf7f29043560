"""Estimators by name, and what each one *is*, declared once.

An :class:`EstimatorSpec` carries, besides the function, the facts that the rest of the library
reads instead of keeping lists of names: whether a group's advantages depend on that group alone
(chunked evaluation, slicing in ``corrgrpo explain``), whether the advantage is a positive group
factor times the centred weighted total (DAPO's filter criterion), whether the advantages sum to
zero in each group and which reference loop they must match (the conformance kit), which options
the diagnostics share, and which estimator is its form without normalisation (TRL's
``scale_rewards="none"``, verl's ``norm_adv_by_std_in_grpo=False``). A user's
:func:`register_estimator` declares the same facts once and gets the same behaviour everywhere.
The built-in estimators are registered, with their facts, on their functions in :mod:`._api`
(:func:`registered`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal, TypeVar

from ._lib._compat import Array
from ._validation import FilterCriterion, check_choice, choices, unknown_name

F = TypeVar("F", bound=Callable[..., Array])
Scope = Literal["group", "batch"]
Numerator = Literal["total", "components"]

# advantage_stats options that mean the same thing whatever the estimator is.
SHARED_DIAGNOSTIC_OPTIONS = ("ddof", "nan_policy", "zero_variance_rtol")
# ... and those that also define CorrGRPO's own denominator, for the estimators that use it.
CORRELATION_DIAGNOSTIC_OPTIONS = (*SHARED_DIAGNOSTIC_OPTIONS, "eps", "eps_placement", "min_correlation_sum")
# Options an adapter supplies itself: the weights from its reward weights, the namespace from the rewards.
_ADAPTER_OPTIONS = frozenset({"weights", "xp"})


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator, ``fn(scores, group_ids=None, **options)``, and the facts about it.

    Attributes
    ----------
    name, fn, summary
        Registry key, the function, one line for help texts.
    diagnostic_options
        The estimator options :func:`advantage_stats` takes with the same meaning: the diagnostics
        of a batch are computed with exactly those of the advantages (:meth:`diagnostic_kwargs`).
    scope
        ``"group"``: a group's advantages depend on that group's rows alone, so a batch may be
        evaluated in pieces of whole groups; ``"batch"`` (the safe default): a batch-level
        statistic couples the groups (GDPO's batch z-score, DARA's densities).
    batch_scope_when
        ``(option, value)`` pairs that make a group-scope estimator batch-scope (GRPO's
        ``std_scope="batch"``); see :meth:`group_local`.
    numerator
        ``"total"``: the advantage is a positive group factor times the centred weighted total
        (GRPO, Dr.GRPO, RLOO, CorrGRPO), so a group whose totals tie gets zero advantage and
        DAPO's filter drops it on the total; ``"components"`` (the default): each component is
        normalised before they are combined, and a group with tied totals can still carry signal.
    centred
        The advantages sum to zero over each group (a check of the conformance kit).
    unnormalised
        The registered estimator that is this one without its std or correlation normalisation
        (``"dr_grpo"`` for GRPO and CorrGRPO; the estimator itself for Dr.GRPO and RLOO), or None
        where there is none (the per-component normalisers).
    oracle
        A slow reference loop ``oracle(scores, group_ids, **eps options) -> advantages`` that the
        conformance kit compares the estimator with, or None.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> spec = cc.get_estimator("grpo")
    >>> spec.scope, spec.numerator, spec.filter_criterion, spec.unnormalised
    ('group', 'total', 'total', 'dr_grpo')
    >>> spec.group_local({"std_scope": "batch"})
    False
    """

    name: str
    fn: Callable[..., Array]
    summary: str
    diagnostic_options: tuple[str, ...] = SHARED_DIAGNOSTIC_OPTIONS
    scope: Scope = "batch"
    batch_scope_when: tuple[tuple[str, Any], ...] = ()
    numerator: Numerator = "components"
    centred: bool = False
    unnormalised: str | None = None
    oracle: Callable[..., Any] | None = None

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

    def group_local(self, options: Mapping[str, Any] | None = None) -> bool:
        """Whether, called with ``options``, a group's advantages depend on that group alone."""
        if self.scope != "group":
            return False
        return not options or not any(options.get(k, _MISSING) == v for k, v in self.batch_scope_when)

    @property
    def filter_criterion(self) -> FilterCriterion:
        """The DAPO dynamic-sampling criterion that matches the estimator (see ``numerator``)."""
        return "total" if self.numerator == "total" else "any_component"

    @cached_property
    def options(self) -> tuple[str, ...]:
        """The keyword options ``fn`` accepts."""
        params = inspect.signature(self.fn).parameters.values()
        return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)

    @cached_property
    def _option_set(self) -> frozenset[str]:
        return frozenset(self.options)

    def check_options(self, options: Mapping[str, Any]) -> None:
        """A ``TypeError`` naming the ``options`` that ``fn`` does not take, if any."""
        if options and not self._option_set.issuperset(options):
            unknown = sorted(set(options) - self._option_set)
            raise TypeError(
                f"estimator {self.name!r} takes no option(s) {', '.join(unknown)}; "
                f"its options: {', '.join(self.options)}"
            )

    @property
    def config_options(self) -> tuple[str, ...]:
        """The options a framework config may set: all but ``weights`` and ``xp``, which an adapter
        takes from its reward weights and from the rewards themselves."""
        return tuple(o for o in self.options if o not in _ADAPTER_OPTIONS)


_MISSING = object()
_REGISTRY: dict[str, EstimatorSpec] = {}
# Called with each spec that register_estimator adds from then on (a framework adapter mirrors the
# registry into its framework's own, however late the estimator comes).
_LISTENERS: list[Callable[[EstimatorSpec], None]] = []


def register_estimator(
    name: str,
    fn: Callable[..., Array],
    summary: str,
    *,
    diagnostic_options: tuple[str, ...] = SHARED_DIAGNOSTIC_OPTIONS,
    scope: Scope = "batch",
    batch_scope_when: Mapping[str, Any] | None = None,
    numerator: Numerator = "components",
    centred: bool = False,
    unnormalised: str | None = None,
    oracle: Callable[..., Any] | None = None,
) -> EstimatorSpec:
    """Add an estimator under ``name`` (an existing name is an error), with the facts about it.

    ``fn(scores, group_ids=None, **options)`` must follow the calling convention of the
    built-in estimators; adapters then find it by name. The keyword facts (see
    :class:`EstimatorSpec`) default to the safe side: batch scope (never evaluated in pieces),
    per-component numerator (DAPO's filter keeps every group in which some component varies),
    no zero-sum claim, no unnormalised form.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> spec = cc.register_estimator("centred_total", cc.dr_grpo_advantage, "Dr.GRPO under another name",
    ...                              scope="group", numerator="total", centred=True)
    >>> from corrgrpo_core.objectives import filter_criterion_for
    >>> filter_criterion_for("centred_total"), spec.group_local()
    ('total', True)
    """
    if name in _REGISTRY:
        raise ValueError(f"an estimator named {name!r} is already registered")
    scope = check_choice("scope", scope, choices(Scope))
    numerator = check_choice("numerator", numerator, choices(Numerator))
    if unnormalised is not None and unnormalised != name and unnormalised not in _REGISTRY:
        raise unknown_name("estimator (unnormalised)", unnormalised, _REGISTRY)
    taken = EstimatorSpec(name, fn, summary).options  # only options fn takes can be shared
    spec = EstimatorSpec(
        name,
        fn,
        summary,
        diagnostic_options=tuple(o for o in diagnostic_options if o in taken),
        scope=scope,
        batch_scope_when=tuple((batch_scope_when or {}).items()),
        numerator=numerator,
        centred=bool(centred),
        unnormalised=unnormalised,
        oracle=oracle,
    )
    _REGISTRY[name] = spec
    for listener in tuple(_LISTENERS):  # a listener may unsubscribe itself
        listener(spec)
    return spec


def registered(name: str, summary: str, *, unnormalised: str | None = None, **facts: Any) -> Callable[[F], F]:
    """A decorator: :func:`register_estimator` the function under ``name`` with ``facts``, and
    return it unchanged, so that the built-in estimators declare what they are where they are
    defined. ``unnormalised`` may name one defined further down the module (the built-ins are
    registered on import, before any listener; ``tests/core/test_registry.py`` checks the names)."""

    def register(fn: F) -> F:
        spec = register_estimator(name, fn, summary, **facts)
        if unnormalised is not None:
            _REGISTRY[name] = replace(spec, unnormalised=unnormalised)
        return fn

    return register


def on_estimator_registered(listener: Callable[[EstimatorSpec], None]) -> Callable[[], None]:
    """Call ``listener(spec)`` after each later :func:`register_estimator`; returns the unsubscribe.

    For adapters whose framework keeps its own registry by name (verl's plugin mirrors every core
    estimator into verl's, also one registered after verl was loaded). Listeners run in the order
    they subscribed, once the estimator is registered; an exception from one reaches the caller of
    ``register_estimator`` (the estimator stays registered). Subscribing a listener again does nothing.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> seen = []
    >>> stop = cc.on_estimator_registered(lambda spec: seen.append(spec.name))
    >>> _ = cc.register_estimator("rloo_again", cc.rloo_advantage, "RLOO under another name")
    >>> stop()
    >>> seen
    ['rloo_again']
    """
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)

    def unsubscribe() -> None:
        if listener in _LISTENERS:
            _LISTENERS.remove(listener)

    return unsubscribe


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
        raise unknown_name("estimator", name, _REGISTRY) from None


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
    spec.check_options(options)
    return spec.fn(scores, group_ids, **options)
