"""The estimators as pure functions of a prepared :class:`Batch` (no validation here).

Every function returns advantages shaped like the batch's rows with a trailing axis of 1.
Notation: x_ik is component k of row i after weighting, c_ik its centred value within the
group, z_ik = c_ik / s_k the group z-score (zero for a component that does not vary).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._batch import Batch
from ._lib._compat import Array, Namespace
from ._stats import Moments, batch_moments, group_moments


def denominator(spread_sq: Array, eps: float, placement: str, xp: Namespace) -> Array:
    """sqrt(S + eps) ("inside", the reference code) or sqrt(S) + eps ("outside", the paper)."""
    if placement == "inside":
        return xp.sqrt(spread_sq + eps)
    return xp.sqrt(spread_sq) + eps


def safe_divide(num: Array, den: Array, xp: Namespace) -> Array:
    """num / den, and 0 where den is 0 (only possible with eps = 0)."""
    ok = den > 0
    return xp.where(ok, num / xp.where(ok, den, xp.ones_like(den)), xp.zeros_like(num))


def _zscores(m: Moments, eps: float, placement: str, xp: Namespace) -> Array:
    """GDPO-style z-scores (x - mean) / (std + eps), zero for components that do not vary."""
    return xp.where(
        m.varies, safe_divide(m.centred, denominator(m.var, eps, placement, xp), xp), xp.zeros_like(m.centred)
    )


def _sum_k(x: Array, xp: Namespace) -> Array:
    return xp.sum(x, axis=-1, keepdims=True)


def _rows_only(batch: Batch, adv: Array) -> Array:
    """Zero the rows that have no valid component (NaN policy "ignore")."""
    xp = batch.xp
    if batch.row_valid is None:
        return adv
    return xp.where(batch.row_valid, adv, xp.zeros_like(adv))


# --- single-scalar (total reward) estimators -------------------------------------------------


def total_moments(batch: Batch, *, ddof: int, rtol: float) -> Moments:
    """Group moments of the weighted total R_i = sum_k w_k x_ik (NaN entries count as 0)."""
    return group_moments(
        _sum_k(batch.weighted, batch.xp), batch.row_valid, batch.groups, ddof=ddof, rtol=rtol
    )


def grpo(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """(R - mean_g R) / (std_g R + eps); zero for groups whose total does not vary."""
    return _zscores(total_moments(batch, ddof=ddof, rtol=rtol), eps, eps_placement, batch.xp)


def dr_grpo(batch: Batch, *, rtol: float) -> Array:
    """R - mean_g R."""
    return total_moments(batch, ddof=0, rtol=rtol).centred


def rloo(batch: Batch, *, rtol: float) -> Array:
    """R_i - mean_{j != i} R_j = n / (n - 1) (R_i - mean_g R); zero for groups of one."""
    xp = batch.xp
    m = total_moments(batch, ddof=0, rtol=rtol)
    many = m.count > 1
    factor = xp.where(
        many, m.count / xp.where(many, m.count - 1, xp.ones_like(m.count)), xp.zeros_like(m.count)
    )
    return m.centred * factor


# --- CorrGRPO -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorrParts:
    """Pieces of the CorrGRPO advantage, shared with the diagnostics."""

    components: Moments  # group moments of the weighted components
    numerator: Array  # centred total, sum_k c_ik
    correlation_sum: Array  # sum_{l,m} rho_lm of the group, per row (before the floor)


def corr_parts(batch: Batch, *, ddof: int, rtol: float) -> CorrParts:
    """Numerator and correlation sum, via sum_{l,m} rho_lm = Var_g(sum_k z_ik).

    The identity holds because z is centred and scaled with the same ddof as the variance of
    its row sums, so the K x K Pearson matrix is never formed.
    """
    xp = batch.xp
    m = group_moments(batch.weighted, batch.valid, batch.groups, ddof=ddof, rtol=rtol)
    zsum = _sum_k(m.z, xp)
    rows = (
        batch.groups.count
        if batch.row_valid is None
        else batch.groups.group_sum(xp.astype(batch.row_valid, zsum.dtype))
    )
    dof = rows - ddof
    corr = xp.where(
        dof > 0,
        batch.groups.group_sum(zsum * zsum) / xp.where(dof > 0, dof, xp.ones_like(dof)),
        xp.zeros_like(zsum),
    )
    return CorrParts(components=m, numerator=_sum_k(m.centred, xp), correlation_sum=corr)


def corr_denominator(
    parts: CorrParts, *, eps: float, eps_placement: str, min_correlation_sum: float, xp: Namespace
) -> Array:
    floor = xp.maximum(parts.correlation_sum, xp.full_like(parts.correlation_sum, min_correlation_sum))
    return denominator(floor, eps, eps_placement, xp)


def corrgrpo(
    batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float, min_correlation_sum: float
) -> Array:
    """sum_k c_ik / sqrt(max(sum_{l,m} rho_lm, floor) + eps)."""
    xp = batch.xp
    parts = corr_parts(batch, ddof=ddof, rtol=rtol)
    den = corr_denominator(
        parts, eps=eps, eps_placement=eps_placement, min_correlation_sum=min_correlation_sum, xp=xp
    )
    return _rows_only(batch, safe_divide(parts.numerator, den, xp))


# --- per-component z-score family (MO-GRPO, GDPO, GDPO-corr, DARA) --------------------------


def component_zscores(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """Unweighted group z-scores of each component, (rows, K)."""
    m = group_moments(batch.raw, batch.valid, batch.groups, ddof=ddof, rtol=rtol)
    return _zscores(m, eps, eps_placement, batch.xp)


def batch_zscore(batch: Batch, h: Array, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """(h - mean_B h) / (std_B h + eps) over the rows that have a valid component."""
    xp = batch.xp
    m = batch_moments(h, batch.row_valid, batch.groups, ddof=ddof, rtol=rtol)
    return _rows_only(batch, _zscores(m, eps, eps_placement, xp))


def mo_grpo(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """sum_k w_k z_ik."""
    z = component_zscores(batch, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)
    return _rows_only(batch, _sum_k(z * batch.weights, batch.xp))


def gdpo(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """Batch z-score of sum_k w_k z_ik."""
    h = mo_grpo(batch, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)
    return batch_zscore(batch, h, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)


def gdpo_corr(
    batch: Batch,
    *,
    eps: float,
    group_eps_placement: str,
    eps_placement: str,
    ddof: int,
    rtol: float,
    min_correlation_sum: float,
) -> Array:
    """(H - mean_B H) / sqrt(Var_B(sum_k u_ik) + eps), u the batch z-scores of U_k = w_k z_k."""
    xp = batch.xp
    z = component_zscores(batch, eps=eps, eps_placement=group_eps_placement, ddof=ddof, rtol=rtol)
    u = z * batch.weights
    valid = None if batch.row_valid is None else xp.broadcast_to(batch.row_valid, u.shape)
    m = batch_moments(u, valid, batch.groups, ddof=ddof, rtol=rtol)
    zsum = _sum_k(m.z, xp)
    rows = m.count[..., :1]
    dof = rows - ddof
    corr = xp.where(
        dof > 0,
        batch.groups.batch_sum(zsum * zsum) / xp.where(dof > 0, dof, xp.ones_like(dof)),
        xp.zeros_like(rows),
    )
    corr = xp.maximum(corr, xp.full_like(corr, min_correlation_sum))
    return _rows_only(
        batch, safe_divide(_sum_k(m.centred, xp), denominator(corr, eps, eps_placement, xp), xp)
    )


def dara_weights(batch: Batch, varies: Array, *, max_weight: float) -> Array:
    """Density weights min(max_weight, sqrt(max_j pi_j / pi_k)), pi_k = share of groups where k varies.

    Components that vary in no group (pi_k = 0) keep weight 1.
    """
    xp = batch.xp
    per_row = 1.0 / batch.groups.count  # each group sums to 1 over its rows
    groups = batch.groups.batch_sum(xp.broadcast_to(per_row, (*varies.shape[:-1], 1)))
    pi = batch.groups.batch_sum(xp.astype(varies, per_row.dtype) * per_row) / groups
    top = xp.max(pi, axis=-1, keepdims=True)
    has = pi > 0
    ratio = xp.where(has, top / xp.where(has, pi, xp.ones_like(pi)), xp.ones_like(pi))
    return xp.minimum(xp.sqrt(ratio), xp.full_like(ratio, max_weight))


def _dara_calibrate(values: Array, density: Array, variant: str, xp: Namespace) -> Array:
    if variant == "sym":
        return density * values
    zero = xp.zeros_like(values)
    return density * xp.maximum(values, zero) + xp.minimum(values, zero)


def dara(
    batch: Batch,
    *,
    variant: str,
    base: str,
    max_weight: float,
    eps: float,
    eps_placement: str,
    ddof: int,
    rtol: float,
    min_correlation_sum: float,
) -> Array:
    """DARA: density-weighted components, Sym (w z) or Asym (w max(z, 0) + min(z, 0)).

    base="gdpo": S_i = sum_k w_k calibrate(z_ik), then a batch z-score (the DARA paper).
    base="corrgrpo": sum_k calibrate(c_ik) over CorrGRPO's correlation-norm denominator.
    """
    xp = batch.xp
    if base == "gdpo":
        m = group_moments(batch.raw, batch.valid, batch.groups, ddof=ddof, rtol=rtol)
        density = dara_weights(batch, m.varies, max_weight=max_weight)
        z = _zscores(m, eps, eps_placement, xp)
        s = _sum_k(batch.weights * _dara_calibrate(z, density, variant, xp), xp)
        return batch_zscore(batch, s, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)
    parts = corr_parts(batch, ddof=ddof, rtol=rtol)
    density = dara_weights(batch, parts.components.varies, max_weight=max_weight)
    num = _sum_k(_dara_calibrate(parts.components.centred, density, variant, xp), xp)
    den = corr_denominator(
        parts, eps=eps, eps_placement=eps_placement, min_correlation_sum=min_correlation_sum, xp=xp
    )
    return _rows_only(batch, safe_divide(num, den, xp))
