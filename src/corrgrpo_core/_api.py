"""Public estimators: docstring, validation and dispatch, one route per estimator.

Each public estimator is registered by :func:`_estimator` with the facts about it (what it *is*:
group or batch scope, total or per-component numerator, its oracle, ...; see
:class:`EstimatorSpec`), once, on its function. The function's body checks the estimator's own
options and returns its pure function in :mod:`._estimators`, the one place its formula is
written, bound to them; :func:`_run` prepares the batch (:func:`._batch.prepare`) and evaluates
the formula on it, in pieces of whole groups where the estimator is group-local.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ParamSpec, cast

from . import _estimators as est
from . import _oracles, _registry
from ._batch import prepare, resolve_rtol
from ._diagnostics import AdvantageStats, check_stats_finite, empty_stats, stats_from_parts
from ._lib._compat import Array, Namespace
from ._validation import (
    DARA_BASES,
    DARA_VARIANTS,
    EPS_PLACEMENTS,
    STD_SCOPES,
    DaraBase,
    DaraVariant,
    EpsPlacement,
    NanPolicy,
    SingletonPolicy,
    StdScope,
    check_choice,
    check_int,
    check_number,
)

IdsLike = Array | Sequence[int] | None
WeightsLike = Array | Sequence[float] | None
# The facts shared by GRPO's family: a group's advantages depend on it alone, and are a positive
# group factor times the centred weighted total (so they sum to zero over the group).
_CENTRED_TOTAL: dict[str, Any] = {"scope": "group", "numerator": "total", "centred": True}


# An estimator's pure function in :mod:`._estimators`, bound to its options: ``formula(batch, rtol=...)``.
Formula = Callable[..., Array]
P = ParamSpec("P")
# The options of every estimator that say how to read the batch: :func:`_run` takes them.
_BATCH_OPTIONS = ("weights", "nan_policy", "singleton", "xp", "zero_variance_rtol")


def _estimator(name: str, summary: str, **facts: Any) -> Callable[[Callable[P, Formula]], Callable[P, Array]]:
    """The public estimator ``name`` made from ``bind`` and registered with its ``facts``
    (:func:`._registry.registered`).

    ``bind`` has the estimator's signature and docstring; its body checks the estimator's own
    options and returns its formula bound to them. The options that say how to read the batch
    (:data:`_BATCH_OPTIONS`, with ``bind``'s defaults) go to :func:`_run`, which evaluates the formula.
    """

    def wrap(bind: Callable[P, Formula]) -> Callable[P, Array]:
        signature = inspect.signature(bind)
        defaults = {o: signature.parameters[o].default for o in _BATCH_OPTIONS}

        @functools.wraps(bind)
        def estimator(scores: Array, /, group_ids: IdsLike = None, **options: Any) -> Array:
            formula = bind(scores, group_ids, **options)  # type: ignore[arg-type]
            return _run(spec, formula, scores, group_ids, {**defaults, **options})

        estimator.__signature__ = signature.replace(return_annotation="Array")  # type: ignore[attr-defined]
        public = cast("Callable[P, Array]", estimator)
        _registry.registered(name, summary, **facts)(public)
        spec = _registry.get_estimator(name)  # (with its facts complete)
        return public

    return wrap


def _run(
    spec: _registry.EstimatorSpec,
    formula: Formula,
    scores: Array,
    group_ids: IdsLike,
    options: dict[str, Any],
) -> Array:
    """Prepare the batch and evaluate the estimator's ``formula`` on it: over a large batch in host
    memory in cache-sized pieces of whole groups where the estimator, with these ``options``, is
    group-local (``spec``)."""
    batch = prepare(
        scores,
        group_ids,
        weights=options["weights"],
        nan_policy=options["nan_policy"],
        singleton=options["singleton"],
        xp=options["xp"],
        host=True,
    )
    if batch.empty:
        return batch.handed_back(
            batch.xp.zeros((*batch.raw.shape[:-1], 1), dtype=batch.dtype, device=batch.device)
        )
    rtol = resolve_rtol(options["zero_variance_rtol"], batch.xp, batch.dtype)
    if batch.whole:  # (most calls: no pieces to join)
        return batch.handed_back(formula(batch, rtol=rtol))
    out = batch.output()
    for piece in batch.pieces(group_local=spec.group_local(options)):
        out.add(formula(piece, rtol=rtol))  # the formula, on the batch whole or a piece of whole groups
    return out.result()


def _eps(eps: float, placement: str, name: str = "eps_placement") -> float:
    check_choice(name, placement, EPS_PLACEMENTS)
    return check_number("eps", eps)


def _z_options(eps: float, eps_placement: str, ddof: int) -> tuple[float, int]:
    """eps and ddof of a normalised estimator, checked in one call."""
    return _eps(eps, eps_placement), check_int("ddof", ddof)


@_estimator(
    "corrgrpo",
    "centred total reward over the correlation norm of the group (CorrGRPO)",
    diagnostic_options=_registry.CORRELATION_DIAGNOSTIC_OPTIONS,
    unnormalised="dr_grpo",
    oracle=_oracles.corrgrpo_oracle,
    **_CENTRED_TOTAL,
)
def corrgrpo_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "inside",
    ddof: int = 1,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    min_correlation_sum: float = 0.0,
    xp: Namespace | None = None,
) -> Formula:
    r"""CorrGRPO advantages: the centred total reward over the correlation norm of its group.

    .. math:: A_i = \frac{\sum_k (x_{ik} - \bar x_k)}{\sqrt{\max(\sum_{l,m} \rho_{lm}, f) + \epsilon}}

    with :math:`x_{ik} = w_k R_{ik}` (weights applied before any statistic), :math:`\rho` the
    group's sample Pearson matrix with zero rows and columns for components that do not vary,
    and :math:`f` = ``min_correlation_sum``. The correlation sum is computed as the group
    variance of the summed z-scores (no K x K matrix). ``corr_normalized_advantage`` (the name
    in the paper's code) is the same function.

    Parameters
    ----------
    scores
        ``(n, K)`` one group, ``(B, n, K)`` B groups of n rollouts, or ``(N, K)`` with
        ``group_ids``. Any array-API array (numpy, torch, jax, cupy, array-api-strict).
    group_ids
        Integer group of each row for a ragged batch (any order, any group sizes).
    weights
        One weight per component (negative allowed), applied before any statistic.
    eps, eps_placement
        ``"inside"`` the square root (the reference code, default) or ``"outside"`` (the paper).
    ddof
        Delta degrees of freedom of the variances (1: sample statistics, as every framework).
        Pearson correlations do not depend on it.
    singleton
        ``"zero"``: a group of one rollout gets advantage 0; ``"raise"``: error.
    zero_variance_rtol
        A component is constant in a group when its standard deviation is at most this times
        its root mean square. Default: 64 machine epsilons of the working dtype; 0 gives the
        reference code's exact ``var > 0`` test.
    nan_policy
        ``"raise"`` (default) names the rows with NaN; ``"ignore"`` leaves NaN entries out of
        their component's statistics, and rows with every component NaN get 0 (TRL's None).
    min_correlation_sum
        Floor f on the correlation sum, against the blow-up of anti-correlated components
        (default 0 = paper fidelity).

    Returns
    -------
    Advantages with the scores' leading shape and floating dtype, on the same device.

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> np.round(cc.corrgrpo_advantage(s), 4)
    array([-1.8607,  0.9304,  1.8607, -0.9304])
    """
    eps, ddof = _z_options(eps, eps_placement, ddof)
    floor = check_number("min_correlation_sum", min_correlation_sum)
    return partial(est.corrgrpo, eps=eps, eps_placement=eps_placement, ddof=ddof, min_correlation_sum=floor)


corr_normalized_advantage = corrgrpo_advantage


def advantage_stats(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "inside",
    ddof: int = 1,
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    min_correlation_sum: float = 0.0,
    degenerate_threshold: float = 0.01,
    xp: Namespace | None = None,
) -> AdvantageStats:
    """Diagnostics of a reward batch under CorrGRPO versus GRPO (see :class:`AdvantageStats`).

    Options mean what they mean in :func:`corrgrpo_advantage`. A group is *degenerate*
    when some component varies but the correlation sum is below ``degenerate_threshold``:
    its advantages are amplified by up to 1/sqrt(eps).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> st = cc.advantage_stats(s)
    >>> round(float(st.c_q[0]), 3), np.round(st.variance_share[0], 3).tolist()
    (1.699, [0.011, 0.011, 0.911])
    """
    eps = _eps(eps, eps_placement)
    ddof = check_int("ddof", ddof)
    floor = check_number("min_correlation_sum", min_correlation_sum)
    threshold = check_number("degenerate_threshold", degenerate_threshold)
    batch = prepare(scores, group_ids, weights=weights, nan_policy=nan_policy, singleton="zero", xp=xp)
    if batch.empty:
        return empty_stats(batch)
    rtol = resolve_rtol(zero_variance_rtol, batch.xp, batch.dtype)
    (batch,) = batch.pieces()
    parts = est.corr_parts(batch, ddof=ddof, rtol=rtol)
    den = est.corr_denominator(
        parts, eps=eps, eps_placement=eps_placement, min_correlation_sum=floor, xp=batch.xp
    )
    return check_stats_finite(
        stats_from_parts(
            batch,
            parts,
            den,
            eps=eps,
            eps_placement=eps_placement,
            ddof=ddof,
            rtol=rtol,
            degenerate_threshold=threshold,
        )
    )


@_estimator(
    "grpo",
    "group z-score of the weighted total reward (std_scope='batch': one batch std)",
    batch_scope_when={"std_scope": "batch"},
    unnormalised="dr_grpo",
    oracle=_oracles.grpo_oracle,
    **_CENTRED_TOTAL,
)
def grpo_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "outside",
    ddof: int = 1,
    std_scope: StdScope = "group",
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    xp: Namespace | None = None,
) -> Formula:
    r"""GRPO: :math:`A_i = (R_i - \bar R) / (s_R + \epsilon)`, :math:`R_i = \sum_k w_k x_{ik}`.

    ``eps=1e-6`` outside the square root matches verl (TRL uses 1e-4, OpenRLHF 1e-9). Groups
    whose total does not vary, and groups of one, get 0 (verl gives a singleton R / (1 + eps)).
    ``std_scope="batch"`` keeps the group mean but divides by one standard deviation of R over
    the whole batch (TRL's ``scale_rewards="batch"``); the batch's rows must then all be passed
    in one call. Other options as in :func:`corrgrpo_advantage`.

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> np.round(cc.grpo_advantage(s), 4)
    array([-1.0954,  0.5477,  1.0954, -0.5477])
    >>> np.round(cc.grpo_advantage(np.stack([s, 2 * s]), std_scope="batch"), 4)
    array([[-0.6693,  0.3347,  0.6693, -0.3347],
           [-1.3387,  0.6693,  1.3387, -0.6693]])
    """
    eps, ddof = _z_options(eps, eps_placement, ddof)
    check_choice("std_scope", std_scope, STD_SCOPES)
    pure = est.grpo if std_scope == "group" else est.grpo_batch_std
    return partial(pure, eps=eps, eps_placement=eps_placement, ddof=ddof)


@_estimator(
    "dr_grpo",
    "centred total reward, no std division (Dr.GRPO)",
    unnormalised="dr_grpo",
    oracle=_oracles.dr_grpo_oracle,
    **_CENTRED_TOTAL,
)
def dr_grpo_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    xp: Namespace | None = None,
) -> Formula:
    r"""Dr.GRPO: the centred total reward :math:`A_i = R_i - \bar R` (no std division).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> cc.dr_grpo_advantage(np.array([[1.0], [3.0]]))
    array([-1.,  1.])
    """
    return est.dr_grpo


@_estimator(
    "rloo",
    "leave-one-out baseline (RLOO)",
    unnormalised="rloo",
    oracle=_oracles.rloo_oracle,
    **_CENTRED_TOTAL,
)
def rloo_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    xp: Namespace | None = None,
) -> Formula:
    r"""RLOO: :math:`A_i = R_i - \frac{1}{n-1}\sum_{j \ne i} R_j = \frac{n}{n-1}(R_i - \bar R)`.

    Groups of one get 0 (verl keeps A = R there).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> cc.rloo_advantage(np.array([[1.0], [2.0], [6.0]]))
    array([-3. , -1.5,  4.5])
    """
    return est.rloo


@_estimator(
    "mo_grpo",
    "sum of per-component group z-scores (MO-GRPO)",
    scope="group",
    centred=True,
    oracle=_oracles.mo_grpo_oracle,
)
def mo_grpo_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "outside",
    ddof: int = 1,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    xp: Namespace | None = None,
) -> Formula:
    r"""MO-GRPO: the weighted sum of per-component group z-scores, :math:`\sum_k w_k z_{ik}`.

    :math:`z_{ik} = (R_{ik} - \bar R_k) / (s_k + \epsilon)`, 0 for a constant component. The
    weights multiply the z-scores (weighting before a z-score would only keep their sign).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> np.round(cc.mo_grpo_advantage(np.array([[0.0, 10.0], [1.0, 30.0]])), 4)
    array([-1.4142,  1.4142])
    """
    eps, ddof = _z_options(eps, eps_placement, ddof)
    return partial(est.mo_grpo, eps=eps, eps_placement=eps_placement, ddof=ddof)


@_estimator(
    "gdpo",
    "per-component group z-scores summed, then batch z-scored (GDPO)",
    centred=True,  # H sums to 0 over each group, so its batch mean is 0
    oracle=_oracles.gdpo_oracle,
)
def gdpo_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "outside",
    ddof: int = 1,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    xp: Namespace | None = None,
) -> Formula:
    r"""GDPO: MO-GRPO's :math:`H_i = \sum_k w_k z_{ik}`, then a z-score over the whole batch.

    :math:`A_i = (H_i - \bar H_B) / (s_{B}(H) + \epsilon)` over every row passed (per response,
    as TRL's ``normalize_then_sum``; verl's GDPO whitens per token).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> np.round(cc.gdpo_advantage(s), 4)
    array([-1.1534, -0.4119,  1.1534,  0.4119])
    """
    eps, ddof = _z_options(eps, eps_placement, ddof)
    return partial(est.gdpo, eps=eps, eps_placement=eps_placement, ddof=ddof)


@_estimator("gdpo_corr", "GDPO with the batch std replaced by a correlation norm", centred=True)
def gdpo_corr_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "inside",
    group_eps_placement: EpsPlacement = "outside",
    ddof: int = 1,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    min_correlation_sum: float = 0.0,
    xp: Namespace | None = None,
) -> Formula:
    r"""GDPO with the batch std replaced by the correlation norm of :math:`U_k = w_k z_k`.

    :math:`A_i = (H_i - \bar H_B) / \sqrt{\sum_{l,m} \rho^B_{lm}(U) + \epsilon}`, the batch
    Pearson matrix taken per response (the reference centres per token; see docs/method.md).
    ``group_eps_placement`` is for the group z-scores, ``eps_placement`` for the batch norm.

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> np.round(cc.gdpo_corr_advantage(s), 3)
    array([-1.153, -0.412,  1.153,  0.412])
    """
    eps, ddof = _z_options(eps, eps_placement, ddof)
    check_choice("group_eps_placement", group_eps_placement, EPS_PLACEMENTS)
    floor = check_number("min_correlation_sum", min_correlation_sum)
    return partial(
        est.gdpo_corr,
        eps=eps,
        group_eps_placement=group_eps_placement,
        eps_placement=eps_placement,
        ddof=ddof,
        min_correlation_sum=floor,
    )


@_estimator("dara", "density-aware weights on GDPO or CorrGRPO (DARA)")
def dara_advantage(
    scores: Array,
    /,
    group_ids: IdsLike = None,
    *,
    weights: WeightsLike = None,
    variant: DaraVariant = "asym",
    base: DaraBase = "gdpo",
    max_weight: float = 5.0,
    eps: float = 1e-6,
    eps_placement: EpsPlacement | None = None,
    ddof: int = 1,
    singleton: SingletonPolicy = "zero",
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
    min_correlation_sum: float = 0.0,
    xp: Namespace | None = None,
) -> Formula:
    r"""DARA: density-aware weights :math:`d_k = \min(w_{max}, \sqrt{\max_j \pi_j / \pi_k})`.

    :math:`\pi_k` is the share of groups in which component k varies. ``variant="sym"``
    scales each component by :math:`d_k`; ``"asym"`` (DARA's main method) only its positive
    part. ``base="gdpo"`` applies this to group z-scores and batch-normalises (the DARA paper);
    ``base="corrgrpo"`` applies it to centred components over CorrGRPO's correlation norm.
    ``eps_placement`` defaults to ``"outside"`` for the GDPO base, ``"inside"`` for CorrGRPO's.

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> s = np.array([[.1, .18, .8], [.18, .1, 7.28], [.82, .9, 8], [.9, .82, 1.52]])
    >>> bool(np.allclose(cc.dara_advantage(s), cc.gdpo_advantage(s)))  # equal densities: GDPO
    True
    """
    check_choice("variant", variant, DARA_VARIANTS)
    check_choice("base", base, DARA_BASES)
    placement = eps_placement or ("outside" if base == "gdpo" else "inside")
    eps, ddof = _z_options(eps, placement, ddof)
    floor = check_number("min_correlation_sum", min_correlation_sum)
    top = check_number("max_weight", max_weight, minimum=1.0)
    return partial(
        est.dara,
        variant=variant,
        base=base,
        max_weight=top,
        eps=eps,
        eps_placement=placement,
        ddof=ddof,
        min_correlation_sum=floor,
    )
