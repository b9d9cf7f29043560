"""Policy-gradient objectives from per-token log-probabilities: PPO clip, DAPO, CISPO, GSPO.

Each public function is a thin layer (validation, defaults, docstring) over the shared
``_finish`` step, which adds the optional KL term, aggregates and computes the logged metrics.
All losses are to be minimised (they are the negated objectives).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from .._lib._compat import Array, namespace, stop_gradient
from .._lib._helpers import as_float_mask, float_dtype, masked_max, masked_mean, masked_min
from .._validation import check_choice, check_number, check_optional_number, choices
from ._aggregate import AggregationMode, _aggregate

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "KLKind",
    "PolicyLoss",
    "cispo_loss",
    "dapo_loss",
    "gspo_loss",
    "kl_penalty",
    "ppo_clip_loss",
]

KLKind = Literal["k1", "k2", "k3"]


class PolicyLoss(NamedTuple):
    """What every objective returns (a NamedTuple, so it passes through ``jax.jit``).

    Attributes
    ----------
    loss : array, shape ()
        Scalar loss to minimise (policy term plus ``kl_coef`` times the KL term), aggregated.
    token_loss : array, shape (N, T)
        Per-token loss before aggregation; 0 outside the mask.
    metrics : dict of str to 0-d array
        Detached diagnostics: ``clip_fraction`` (tokens whose gradient the clip changes),
        ``clip_fraction_low`` / ``clip_fraction_high`` (split by the bound that bites),
        ``ratio_mean`` / ``ratio_min`` / ``ratio_max`` (the importance ratio over valid tokens),
        ``approx_kl`` (mean of log pi_old - log pi, verl's ``ppo_kl``), ``policy_loss``
        (the aggregated policy term), plus ``kl`` and ``dual_clip_fraction`` when those terms are on.
    """

    loss: Array
    token_loss: Array
    metrics: dict[str, Array]


class _Inputs(NamedTuple):
    xp: ModuleType
    log_prob: Array
    log_ratio: Array  # log pi - log pi_old, unclamped
    advantages: Array  # broadcastable to (N, T)
    mask: Array  # floating {0, 1}, (N, T)


def _prepare(log_prob: Array, old_log_prob: Array, advantages: Array, mask: Array) -> _Inputs:
    xp = namespace(log_prob, old_log_prob, advantages, mask)
    float_dtype(xp, log_prob, old_log_prob, advantages)
    shape = tuple(log_prob.shape)
    if len(shape) != 2:
        raise ValueError(f"log_prob must have shape (N, T), got {shape}")
    if tuple(old_log_prob.shape) != shape or tuple(mask.shape) != shape:
        raise ValueError(
            f"log_prob, old_log_prob and mask must share one shape (N, T); got {shape}, "
            f"{tuple(old_log_prob.shape)} and {tuple(mask.shape)}"
        )
    adv_shape = tuple(advantages.shape)
    if adv_shape == shape[:1]:
        advantages = xp.expand_dims(advantages, axis=-1)
    elif adv_shape != shape:
        raise ValueError(f"advantages must have shape (N,) or (N, T) = {shape}; got {adv_shape}")
    old = stop_gradient(old_log_prob, xp)
    adv = stop_gradient(advantages, xp)
    return _Inputs(xp, log_prob, log_prob - old, adv, as_float_mask(mask, log_prob.dtype, xp))


def _clamp_log_ratio(log_ratio: Array, limit: float | None, xp: ModuleType) -> Array:
    bound = check_optional_number("log_ratio_limit", limit, strict=True)
    if bound is None:
        return log_ratio
    return xp.clip(log_ratio, -bound, bound)


def _fraction(condition: Array, m: Array, xp: ModuleType) -> Array:
    return masked_mean(xp.astype(condition, m.dtype), m, xp)


def kl_penalty(
    log_prob: Array, ref_log_prob: Array, /, *, kind: KLKind = "k3", bound: float | None = None
) -> Array:
    r"""Per-token estimate of KL(pi || pi_ref) from log-probabilities of the sampled tokens.

    With :math:`\delta = \log\pi_{ref} - \log\pi`:
    ``"k1"``: :math:`-\delta`; ``"k2"``: :math:`\delta^2/2`;
    ``"k3"`` (low-variance, verl's ``low_var_kl``, TRL's ``beta`` term): :math:`e^{\delta} - \delta - 1`.

    Parameters
    ----------
    log_prob, ref_log_prob : array, same shape
        Current-policy and reference log-probabilities. ``ref_log_prob`` gets no gradient.
    kind : {"k1", "k2", "k3"}, default "k3"
        Estimator.
    bound : float, optional
        Clip the estimate to ``[-bound, bound]``; verl clips k3 at 10 (and delta at 20). Default:
        no clipping, as in TRL.

    Returns
    -------
    array
        Same shape, namespace and dtype as ``log_prob``.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import kl_penalty
    >>> kl = kl_penalty(np.log(np.asarray([0.5])), np.log(np.asarray([0.25])))
    >>> round(float(kl[0]), 4)  # e^{-ln 2} + ln 2 - 1
    0.1931
    """
    xp = namespace(log_prob, ref_log_prob)
    float_dtype(xp, log_prob, ref_log_prob)
    if tuple(ref_log_prob.shape) != tuple(log_prob.shape):
        raise ValueError(
            f"log_prob and ref_log_prob shapes differ: {tuple(log_prob.shape)} vs {tuple(ref_log_prob.shape)}"
        )
    check_choice("kind", kind, choices(KLKind))
    limit = check_optional_number("bound", bound, strict=True)
    delta = stop_gradient(ref_log_prob, xp) - log_prob
    if kind == "k1":
        kl = -delta
    elif kind == "k2":
        kl = 0.5 * delta * delta
    else:  # "k3"
        if limit is not None:
            # verl clamps delta before exp for overflow safety; only matters when bound is on.
            delta = xp.clip(delta, -20.0, 20.0)
        kl = xp.exp(delta) - delta - 1.0
    if limit is not None:
        kl = xp.clip(kl, -limit, limit)
    return kl


class LossTail(TypedDict, total=False):
    """The keyword options every objective shares, declared once: the aggregation (see
    :func:`aggregate_loss`: ``aggregation``, ``num_tokens``, ``num_sequences``,
    ``loss_scale_factor``) and the KL term (``ref_log_prob``, ``kl_coef``, ``kl_kind``,
    ``kl_importance_weighted``); documented in :func:`ppo_clip_loss`, defaults in :class:`_Tail`."""

    aggregation: AggregationMode
    num_tokens: float | Array | None
    num_sequences: float | Array | None
    loss_scale_factor: float | None
    ref_log_prob: Array | None
    kl_coef: float
    kl_kind: KLKind
    kl_importance_weighted: bool


class _Tail(NamedTuple):
    """The options every objective shares (:class:`LossTail`), with their defaults."""

    aggregation: AggregationMode = "token-mean"
    num_tokens: float | Array | None = None
    num_sequences: float | Array | None = None
    loss_scale_factor: float | None = None
    ref_log_prob: Array | None = None
    kl_coef: float = 0.0
    kl_kind: KLKind = "k3"
    kl_importance_weighted: bool = False


def _tail(options: LossTail, **defaults: Any) -> _Tail:
    """The shared options of one call, over the objective's own ``defaults`` and :class:`_Tail`'s;
    a name that is not one of them is a TypeError, as for any unknown keyword."""
    unknown = set(options).difference(_Tail._fields)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    return _Tail(**{**defaults, **options})


def _finish(
    inp: _Inputs, pg_token: Array, ratio: Array, metrics: dict[str, Array], tail: _Tail
) -> PolicyLoss:
    """Add the KL term, aggregate, and collect metrics; ``ratio`` is the objective's (differentiable) ratio."""
    xp, m = inp.xp, inp.mask
    ref_log_prob, kl_coef = tail.ref_log_prob, tail.kl_coef

    def agg(x: Array) -> Array:
        return _aggregate(
            x,
            m,
            xp,
            mode=tail.aggregation,
            num_tokens=tail.num_tokens,
            num_sequences=tail.num_sequences,
            loss_scale_factor=tail.loss_scale_factor,
        )

    token_loss = pg_token
    policy = agg(pg_token)
    out = dict(metrics)
    if ref_log_prob is not None:
        if tuple(ref_log_prob.shape) != tuple(m.shape):
            raise ValueError(
                f"ref_log_prob must have shape {tuple(m.shape)}, got {tuple(ref_log_prob.shape)}"
            )
        kl = kl_penalty(inp.log_prob, ref_log_prob, kind=tail.kl_kind)
        if tail.kl_importance_weighted:
            kl = kl * ratio
        token_loss = token_loss + kl_coef * kl
        out["kl"] = stop_gradient(agg(kl), xp)
    elif kl_coef != 0.0:
        raise ValueError("kl_coef is non-zero but ref_log_prob was not given")
    loss = agg(token_loss)
    r = stop_gradient(ratio, xp)
    r = xp.broadcast_to(r, m.shape)
    out["policy_loss"] = stop_gradient(policy, xp)
    out["ratio_mean"] = masked_mean(r, m, xp)
    out["ratio_min"] = masked_min(r, m, xp)
    out["ratio_max"] = masked_max(r, m, xp)
    out["approx_kl"] = stop_gradient(masked_mean(-inp.log_ratio, m, xp), xp)
    masked_token_loss = xp.where(m > 0, token_loss, xp.zeros_like(token_loss))
    return PolicyLoss(loss, masked_token_loss, out)


def _clipped_surrogate(
    inp: _Inputs, ratio: Array, *, eps_low: float, eps_high: float, dual_clip: float | None
) -> tuple[Array, dict[str, Array]]:
    """max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)), optionally dual-clipped for A < 0."""
    xp, a, m = inp.xp, inp.advantages, inp.mask
    unclipped = -a * ratio
    clipped = -a * xp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    token = xp.maximum(unclipped, clipped)
    r = stop_gradient(ratio, xp)
    metrics = {
        "clip_fraction": _fraction(clipped > unclipped, m, xp),
        "clip_fraction_low": _fraction((r < 1.0 - eps_low) & (a < 0), m, xp),
        "clip_fraction_high": _fraction((r > 1.0 + eps_high) & (a > 0), m, xp),
    }
    if dual_clip is not None:
        cap = -a * check_number("dual_clip", dual_clip, minimum=1.0, strict=True)
        metrics["dual_clip_fraction"] = _fraction((a < 0) & (token > cap), m, xp)
        token = xp.where(a < 0, xp.minimum(token, cap), token)
    return token, metrics


def ppo_clip_loss(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    /,
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
    log_ratio_limit: float | None = 20.0,
    **tail: Unpack[LossTail],
) -> PolicyLoss:
    r"""PPO / GRPO clipped surrogate loss.

    .. math::

        r_{i,t} = \exp(\log\pi_\theta - \log\pi_{old}),\qquad
        \ell_{i,t} = \max\bigl(-A_{i,t} r_{i,t},\;
                     -A_{i,t}\,\mathrm{clip}(r_{i,t}, 1-\varepsilon_{low}, 1+\varepsilon_{high})\bigr)

    With ``dual_clip = c`` tokens with :math:`A < 0` are further capped at :math:`-cA`
    (verl's ``clip_ratio_c``, which verl's ``vanilla`` loss always applies with c = 3).

    Parameters
    ----------
    log_prob : array, shape (N, T)
        Log-probabilities of the sampled tokens under the policy being trained (carries gradient).
    old_log_prob : array, shape (N, T)
        Log-probabilities under the policy that sampled them (no gradient flows into it).
    advantages : array, shape (N,) or (N, T)
        Per-sequence or per-token advantages (no gradient flows into them).
    mask : array, shape (N, T)
        1 / True on response tokens.
    eps_low : float, default 0.2
        Lower clip range.
    eps_high : float, optional
        Upper clip range; defaults to ``eps_low`` (symmetric PPO clip).
    dual_clip : float, optional
        Dual-clip constant c > 1; off by default (TRL has none).
    aggregation : str, default "token-mean"
        See :func:`aggregate_loss`; ``num_tokens``, ``num_sequences``, ``loss_scale_factor`` are
        passed through to it.
    log_ratio_limit : float or None, default 20.0
        Clamp the log-ratio to +/- this before ``exp`` (verl does, TRL does not; only extreme
        ratios are affected).
    ref_log_prob : array, shape (N, T), optional
        Reference-policy log-probabilities; with ``kl_coef`` adds ``kl_coef * KL`` per token.
    kl_coef : float, default 0.0
        KL coefficient (TRL's ``beta``, verl's ``kl_loss_coef``).
    kl_kind : {"k1", "k2", "k3"}, default "k3"
        See :func:`kl_penalty`.
    kl_importance_weighted : bool, default False
        Multiply the per-token KL by the (differentiable) importance ratio, which makes its
        gradient the unbiased reverse-KL gradient off-policy. TRL does this by default
        (``use_bias_correction_kl=True``); verl does not.

    Returns
    -------
    PolicyLoss
        ``loss``, ``token_loss`` and ``metrics``.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import ppo_clip_loss
    >>> lp = np.log(np.asarray([[0.5, 0.9]]))
    >>> old = np.log(np.asarray([[0.25, 0.9]]))   # first token's ratio is 2: clipped at 1.2
    >>> out = ppo_clip_loss(lp, old, np.asarray([1.0]), np.asarray([[1, 1]]))
    >>> float(out.loss), float(out.metrics["clip_fraction"])
    (-1.1, 0.5)
    """
    high = eps_low if eps_high is None else eps_high
    return _ppo_clip(
        log_prob, old_log_prob, advantages, mask, eps_low, high, dual_clip, log_ratio_limit, _tail(tail)
    )


def _ppo_clip(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    eps_low: float,
    eps_high: float,
    dual_clip: float | None,
    log_ratio_limit: float | None,
    tail: _Tail,
) -> PolicyLoss:
    check_number("eps_low", eps_low)
    check_number("eps_high", eps_high)
    inp = _prepare(log_prob, old_log_prob, advantages, mask)
    ratio = inp.xp.exp(_clamp_log_ratio(inp.log_ratio, log_ratio_limit, inp.xp))
    token, metrics = _clipped_surrogate(inp, ratio, eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)
    return _finish(inp, token, ratio, metrics, tail)


def dapo_loss(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    /,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    dual_clip: float | None = None,
    log_ratio_limit: float | None = 20.0,
    **tail: Unpack[LossTail],
) -> PolicyLoss:
    r"""DAPO's loss: the clipped surrogate with Clip-Higher and token-level averaging.

    :func:`ppo_clip_loss` with DAPO's defaults ``eps_low=0.2``, ``eps_high=0.28`` and
    ``aggregation="token-mean"`` (:math:`\frac{1}{\sum_i |o_i|}\sum_{i,t}\ell_{i,t}`). DAPO trains
    without a KL term (``kl_coef=0``). Its other two parts are :func:`informative_groups`
    (dynamic sampling) and :func:`overlong_penalty` (soft overlong punishment). Parameters as in
    :func:`ppo_clip_loss`.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import dapo_loss
    >>> lp = np.log(np.asarray([[0.5]]))
    >>> old = np.log(np.asarray([[0.25]]))    # ratio 2, A > 0: capped at 1 + 0.28
    >>> float(dapo_loss(lp, old, np.asarray([1.0]), np.asarray([[1]])).loss)
    -1.28
    """
    return _ppo_clip(
        log_prob, old_log_prob, advantages, mask, eps_low, eps_high, dual_clip, log_ratio_limit, _tail(tail)
    )


CispoBound = Literal["relative", "absolute"]


def cispo_loss(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    /,
    *,
    bound: CispoBound = "relative",
    eps_low: float | None = None,
    eps_high: float | None = None,
    log_ratio_limit: float | None = 20.0,
    **tail: Unpack[LossTail],
) -> PolicyLoss:
    r"""CISPO loss: REINFORCE weighted by a clipped, stop-gradient importance ratio.

    .. math::

        \ell_{i,t} = -\,\mathrm{sg}[\hat r_{i,t}]\, A_{i,t} \log\pi_\theta(o_{i,t}),
        \qquad \nabla\ell_{i,t} = -\hat r_{i,t} A_{i,t} \nabla\log\pi_\theta(o_{i,t})

    No token loses its gradient; only the weight :math:`\hat r` is clipped. Two conventions exist:

    ``bound="relative"`` (verl's ``compute_policy_loss_cispo``; the MiniMax-M1 paper)
        :math:`\hat r = \mathrm{clip}(r, 1-\varepsilon_{low}, 1+\varepsilon_{high})`.
        Defaults: ``eps_high=0.2`` (weight cap 1.2, verl's CISPO example), ``eps_low=None``
        (no lower bound; verl's example sets ``clip_ratio_low=10`` for the same effect).
    ``bound="absolute"`` (TRL ``loss_type="cispo"``)
        :math:`\hat r = \min(r, \varepsilon_{high})`: ``eps_high`` is the cap itself, not 1 + eps.
        Default ``eps_high=5.0`` (the ScaleRL value TRL's docs recommend). ``eps_low`` must stay None.

    Note the loss *value* is proportional to :math:`\log\pi`, not to the ratio; only its gradient
    and the ordering of runs are meaningful. Other parameters as in :func:`ppo_clip_loss`.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import cispo_loss
    >>> lp = np.log(np.asarray([[0.5]]))
    >>> old = np.log(np.asarray([[0.25]]))  # ratio 2 -> weight 1.2 (relative) or 2.0 (absolute, cap 5)
    >>> out = cispo_loss(lp, old, np.asarray([1.0]), np.asarray([[1]]))
    >>> round(float(out.loss), 4), float(out.metrics["clip_fraction"])  # -1.2 * log 0.5
    (0.8318, 1.0)
    """
    check_choice("bound", bound, choices(CispoBound))
    if bound == "relative":
        high = check_number("eps_high", 0.2 if eps_high is None else eps_high)
        low = check_optional_number("eps_low", eps_low)
        lo, hi = (None if low is None else 1.0 - low), 1.0 + high
    else:  # "absolute"
        if eps_low is not None:
            raise ValueError(
                f"eps_low must be None with bound='absolute' (a cap from above only), got {eps_low!r}"
            )
        hi = check_number("eps_high", 5.0 if eps_high is None else eps_high, strict=True)
        lo = None
    inp = _prepare(log_prob, old_log_prob, advantages, mask)
    xp = inp.xp
    raw_ratio = xp.exp(_clamp_log_ratio(inp.log_ratio, log_ratio_limit, xp))
    ratio = stop_gradient(raw_ratio, xp)
    weight = xp.clip(ratio, lo, hi)
    token = -weight * inp.advantages * inp.log_prob
    m = inp.mask
    low = (ratio < lo) if lo is not None else xp.zeros_like(m) > 0
    high_hit = ratio > hi
    metrics = {
        "clip_fraction": _fraction(low | high_hit, m, xp),
        "clip_fraction_low": _fraction(low, m, xp),
        "clip_fraction_high": _fraction(high_hit, m, xp),
    }
    return _finish(inp, token, raw_ratio, metrics, _tail(tail))


def gspo_loss(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    /,
    *,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
    log_ratio_limit: float | None = 10.0,
    **tail: Unpack[LossTail],
) -> PolicyLoss:
    r"""GSPO loss (GSPO-token form): the clipped surrogate on a sequence-level ratio.

    .. math::

        s_i = \exp\Bigl(\tfrac{1}{|o_i|}\sum_t \log\tfrac{\pi_\theta(o_{i,t})}{\pi_{old}(o_{i,t})}\Bigr),\quad
        s_{i,t} = \mathrm{sg}[s_i]\,\frac{\pi_\theta(o_{i,t})}{\mathrm{sg}[\pi_\theta(o_{i,t})]},\quad
        \ell_{i,t} = \max\bigl(-A s_{i,t}, -A\,\mathrm{clip}(s_{i,t}, 1-\varepsilon_{low}, 1+\varepsilon_{high})\bigr)

    :math:`s_{i,t}` has the value :math:`s_i` but a per-token gradient; with sequence-level
    advantages and ``"seq-mean-token-mean"`` aggregation (the default) this is exactly the
    sequence-level GSPO objective. Defaults ``eps_low=3e-4``, ``eps_high=4e-4`` are the paper's.
    ``log_ratio_limit`` caps :math:`\log s` from above (verl uses 10). With one token per sequence
    GSPO is the PPO clip loss. Other parameters as in :func:`ppo_clip_loss`.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import gspo_loss
    >>> lp = np.log(np.asarray([[0.5, 0.5]]))
    >>> old = np.log(np.asarray([[0.25, 1.0]]))   # token ratios 2 and 0.5, s = 1
    >>> float(gspo_loss(lp, old, np.asarray([1.0]), np.asarray([[1, 1]])).loss)
    -1.0
    """
    check_number("eps_low", eps_low)
    check_number("eps_high", eps_high)
    limit = check_optional_number("log_ratio_limit", log_ratio_limit, strict=True)
    inp = _prepare(log_prob, old_log_prob, advantages, mask)
    xp, m = inp.xp, inp.mask
    seq_log_ratio = masked_mean(inp.log_ratio, m, xp, axis=-1)
    lp = inp.log_prob
    log_s = lp - stop_gradient(lp, xp) + stop_gradient(xp.expand_dims(seq_log_ratio, axis=-1), xp)
    if limit is not None:
        log_s = xp.clip(log_s, None, limit)
    ratio = xp.exp(log_s)
    token, metrics = _clipped_surrogate(inp, ratio, eps_low=eps_low, eps_high=eps_high, dual_clip=None)
    return _finish(inp, token, ratio, metrics, _tail(tail, aggregation="seq-mean-token-mean"))
