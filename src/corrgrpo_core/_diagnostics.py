"""Diagnostics users log next to their reward curves: c_q, correlation sums, denominator shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._lib._compat import Array, Namespace

if TYPE_CHECKING:
    from ._batch import Batch
    from ._estimators import CorrParts


DEGENERATE_THRESHOLD = 0.01
"""A group is degenerate when its correlation sum is below this while its total varies: the paper's
CorrGRPO advantage is then over 1/sqrt(0.01) = 10 times the centred total (Dr.GRPO's advantage),
which is what it equals with one varying component (correlation sum 1)."""


@dataclass(frozen=True)
class AdvantageStats:
    """Per-row diagnostics (each row carries its group's values).

    Shapes are the scores' leading shape, with a trailing K for per-component fields.

    Attributes
    ----------
    group_size
        Rollouts in the row's group.
    covariance_sum
        GRPO's denominator squared: the group variance of the weighted total,
        :math:`\\sum_{l,m} \\Sigma_{lm}`.
    correlation_sum
        CorrGRPO's :math:`\\sum_{l,m} \\rho_{lm}` (before any floor).
    c_q
        The factor with :math:`A^{corr} = c_q A^{grpo}` (same eps convention on both sides).
    variance_share
        Each component's variance as a share of the covariance sum (the paper's 91.1%).
    advantage_contribution
        Each component's centred value over the CorrGRPO denominator; sums to the advantage.
    zero_variance_count
        Components that do not vary in the group.
    degenerate
        The group's correlation sum (before any floor) is below ``degenerate_threshold``
        (default :data:`DEGENERATE_THRESHOLD`) while its weighted total varies: the paper's
        CorrGRPO advantage is then more than 1/sqrt(threshold) = 10 times the centred total,
        up to 1/sqrt(eps) (see docs/method.md, "Degenerate groups").
    total_std
        Group standard deviation of the weighted total (DAPO's dynamic-sampling criterion).
    total_varies
        Whether the weighted total varies in the group (the core's scale-relative test).
    """

    group_size: Array
    covariance_sum: Array
    correlation_sum: Array
    c_q: Array
    variance_share: Array
    advantage_contribution: Array
    zero_variance_count: Array
    degenerate: Array
    total_std: Array
    total_varies: Array
    xp: Namespace = field(repr=False)  # the fields' array namespace (a module: not shown)

    @property
    def advantage(self) -> Array:
        """Per row: the CorrGRPO advantage these diagnostics describe (any floor applied), the sum
        of :attr:`advantage_contribution` over the components."""
        return self.xp.sum(self.advantage_contribution, axis=-1)

    @property
    def zero_signal(self) -> Array:
        """Per row: no reward component varies in the group (a singleton included), so every
        estimator gives the group's rows advantage 0."""
        return self.zero_variance_count >= self.variance_share.shape[-1]

    def summary(self, component_names: Sequence[str] | None = None) -> dict[str, float]:
        """Flat metrics for a logger, each group counted once.

        Keys: ``groups``, ``singleton_groups``, ``zero_signal_groups`` (share of groups in which
        no component varies: every estimator's advantages are 0 there), ``degenerate_groups``
        (share of groups that are :attr:`degenerate`), ``degenerate/max_abs_advantage`` and
        ``degenerate/c_q_max`` (largest |A| and c_q over the degenerate groups, 0 when there are
        none), ``max_abs_advantage`` (largest |CorrGRPO advantage| in the batch),
        ``c_q/mean|min|max``, ``correlation_sum/mean``, ``covariance_sum/mean``,
        ``zero_variance_components/mean``, and per component ``denominator_share/<name>`` (mean
        variance share) and ``advantage_contribution/<name>`` (mean absolute contribution).
        """
        xp = self.xp
        size = xp.reshape(self.group_size, (-1,))
        k = self.variance_share.shape[-1]
        names = list(component_names) if component_names is not None else [str(i) for i in range(k)]
        if len(names) != k:
            raise ValueError(f"component_names has {len(names)} names for {k} components")
        if size.shape[0] == 0:
            return {"groups": 0.0}
        per_group = 1.0 / size
        groups = float(xp.sum(per_group))

        def mean(v: Array) -> float:
            return float(xp.sum(xp.reshape(v, (-1,)) * per_group)) / groups

        def count(v: Array) -> float:
            return float(xp.sum(xp.astype(xp.reshape(v, (-1,)), per_group.dtype) * per_group))

        def largest(v: Array, where: Array) -> float:  # 0 when nothing is selected
            v = xp.reshape(v, (-1,))
            return float(xp.max(xp.where(xp.reshape(where, (-1,)), v, xp.zeros_like(v))))

        c_q = xp.reshape(self.c_q, (-1,))
        abs_advantage = xp.abs(xp.reshape(self.advantage, (-1,)))
        out = {
            "groups": groups,
            "singleton_groups": count(size < 2),
            "zero_signal_groups": count(self.zero_signal) / groups,
            "degenerate_groups": count(self.degenerate) / groups,
            "degenerate/max_abs_advantage": largest(abs_advantage, self.degenerate),
            "degenerate/c_q_max": largest(c_q, self.degenerate),
            "max_abs_advantage": float(xp.max(abs_advantage)),
            "c_q/mean": mean(c_q),
            "c_q/min": float(xp.min(c_q)),
            "c_q/max": float(xp.max(c_q)),
            "correlation_sum/mean": mean(self.correlation_sum),
            "covariance_sum/mean": mean(self.covariance_sum),
            "zero_variance_components/mean": mean(self.zero_variance_count),
        }
        share = xp.reshape(self.variance_share, (-1, k))
        contribution = xp.abs(xp.reshape(self.advantage_contribution, (-1, k)))
        for i, name in enumerate(names):
            out[f"denominator_share/{name}"] = mean(share[:, i])
            out[f"advantage_contribution/{name}"] = float(xp.mean(contribution[:, i]))
        return out


def stats_from_parts(
    batch: Batch,
    parts: CorrParts,
    corr_den: Array,
    *,
    eps: float,
    eps_placement: str,
    ddof: int,
    rtol: float,
    degenerate_threshold: float = 0.01,  # = DEGENERATE_THRESHOLD (a literal: the signature is shared)
) -> AdvantageStats:
    """Assemble :class:`AdvantageStats` from the pieces CorrGRPO computed anyway."""
    from ._estimators import denominator, divisor, total_moments, unscaled

    xp = batch.xp
    unit = batch.unit  # the weighted scores were multiplied by this power of two (1 almost always)
    total = total_moments(batch, ddof=ddof, rtol=rtol)
    covariance_sum = total.var  # in units of unit**2
    grpo_den = denominator(covariance_sum, eps, eps_placement, xp, unit)
    comps = parts.components
    lead = batch.lead_shape
    k = batch.raw.shape[-1]
    rows = (*batch.raw.shape[:-1], 1)
    int_dtype = xp.__array_namespace_info__().default_dtypes(device=batch.device)["integral"]
    zero = xp.sum(xp.astype(~comps.varies, int_dtype), axis=-1, keepdims=True)
    corr = parts.correlation_sum
    corr_nonzero = divisor(corr_den, corr_den > 0, xp)  # 0 where the denominator is 0 (eps = 0)

    def per_row(v: Array) -> Array:
        return xp.reshape(xp.broadcast_to(v, rows), lead)

    def per_comp(v: Array) -> Array:
        return xp.reshape(xp.broadcast_to(v, batch.raw.shape), (*lead, k))

    return AdvantageStats(
        group_size=per_row(batch.groups.count),
        covariance_sum=per_row(
            unscaled(unscaled(covariance_sum, unit, "covariance_sum"), unit, "covariance_sum")
        ),
        correlation_sum=per_row(corr),
        c_q=per_row(unscaled(grpo_den / corr_nonzero, unit, "c_q")),
        variance_share=per_comp(comps.var / divisor(covariance_sum, covariance_sum > 0, xp)),
        advantage_contribution=per_comp(
            unscaled(comps.centred / corr_nonzero, unit, "advantage_contribution")
            * xp.astype(parts.components.scope.expand(parts.spread_g), corr.dtype)
        ),
        zero_variance_count=per_row(zero),
        degenerate=per_row(total.varies & (corr < degenerate_threshold)),
        total_std=per_row(unscaled(total.std, unit, "total_std")),
        total_varies=per_row(total.varies),
        xp=xp,
    )


def empty_stats(batch: Batch) -> AdvantageStats:
    """The diagnostics of a batch without rows: every field empty."""
    xp = batch.xp
    lead, k = batch.lead_shape, batch.raw.shape[-1]
    int_dtype = xp.__array_namespace_info__().default_dtypes(device=batch.device)["integral"]

    def empty(*shape: int, dtype: object = batch.raw.dtype) -> Array:
        return xp.zeros(shape, dtype=dtype, device=batch.device)

    return AdvantageStats(
        group_size=empty(*lead),
        covariance_sum=empty(*lead),
        correlation_sum=empty(*lead),
        c_q=empty(*lead),
        variance_share=empty(*lead, k),
        advantage_contribution=empty(*lead, k),
        zero_variance_count=empty(*lead, dtype=int_dtype),
        degenerate=empty(*lead, dtype=xp.bool),
        total_std=empty(*lead),
        total_varies=empty(*lead, dtype=xp.bool),
        xp=xp,
    )


def check_stats_finite(stats: AdvantageStats) -> AdvantageStats:
    """Raise, naming the field, when a diagnostic overflows its dtype (never a silent inf)."""
    from ._lib._compat import is_lazy_array

    xp = stats.xp
    for name in ("covariance_sum", "c_q", "advantage_contribution", "total_std"):
        value = getattr(stats, name)
        if not is_lazy_array(value) and not bool(xp.all(xp.isfinite(value))):
            raise ValueError(
                f"advantage_stats: {name} overflows {value.dtype} (the rewards' spread is too large to "
                "represent it); rescale the rewards"
            )
    return stats
