"""The estimators as pure functions of a prepared :class:`Batch` (no validation here).

Every function returns advantages shaped like the batch's rows with a trailing axis of 1.
Notation: x_ik is component k of row i after weighting, c_ik its centred value within the
group, z_ik = c_ik / s_k the group z-score (zero for a component that does not vary).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ._batch import Batch, max_abs
from ._lib._compat import Array, Namespace, array_namespace, is_lazy_array
from ._stats import Moments, _sum_k, batch_moments, group_moments


def denominator(spread_sq: Array, eps: float, placement: str, xp: Namespace, unit: float = 1.0) -> Array:
    """sqrt(S + eps) ("inside", the reference code) or sqrt(S) + eps ("outside", the paper).

    ``unit``: S is the spread of data multiplied by this power of two (see ``Batch.scale``); the
    result is then in those units, and equals the unscaled denominator times ``unit`` exactly.
    """
    if unit != 1.0:
        scaled = eps * unit if placement == "outside" else eps * unit * unit
        if not math.isfinite(scaled):  # tiny data scaled up, eps dominates: unscale S instead
            return denominator(spread_sq / unit / unit, eps, placement, xp) * unit
        eps = scaled
    if placement == "inside":
        return xp.sqrt(spread_sq + eps)
    return xp.sqrt(spread_sq) + eps


def unscaled(x: Array, unit: float, what: str = "the advantages") -> Array:
    """A value of degree one in the data, back in the caller's units (exact: a power of two).

    Data scaled down because it was huge can give a value beyond the dtype's range: an error
    naming it, never a silent inf.
    """
    if unit == 1.0:
        return x
    xp = array_namespace(x)
    if unit < 1.0 and not is_lazy_array(x) and math.prod(x.shape):
        top = max_abs(x, xp)
        largest = float(xp.finfo(x.dtype).max)
        if top > largest * unit:
            raise ValueError(
                f"{what} overflow {x.dtype}: their magnitude, {top:.4g} * 2**{-math.frexp(unit)[1] + 1}, "
                f"exceeds its largest value {largest:.4g}; rescale the rewards"
            )
        if unit == 0.0:  # the two rescalings' product underflowed, and x passed the check: all zero
            return x
    return x / unit


def divisor(den: Array, ok: Array, xp: Namespace) -> Array:
    """``den`` where ``ok``, inf elsewhere: the library's one zero-denominator convention.

    A quotient whose denominator is zero or undefined (no variation, no degrees of freedom left,
    eps = 0) is defined as 0; dividing a finite value by this divisor gives exactly that, with the
    guard applied once to the small scope-level array instead of to every row
    (:func:`corrgrpo_core._stats.moments` writes its ``1 / std`` the same way).
    """
    return xp.where(ok, den, float("inf"))


def _zscore_den(m: Moments, eps: float, placement: str, xp: Namespace, unit: float = 1.0) -> Array:
    """Scope level: the z-score denominator, inf where the z-score is 0 (no variation).

    A component that varies has a positive variance (``varies_g`` includes ``var > 0``), so its
    denominator is positive whatever eps >= 0 and its placement: no second test."""
    return divisor(denominator(m.var_g, eps, placement, xp, unit), m.varies_g, xp)


def _zscores(
    m: Moments, eps: float, placement: str, xp: Namespace, unit: float = 1.0, *, consume: bool = False
) -> Array:
    """GDPO-style z-scores (x - mean) / (std + eps), zero for components that do not vary
    (``consume``: written over ``m``'s own values, for a caller that uses ``m`` no further)."""
    return m.divided(_zscore_den(m, eps, placement, xp, unit), consume=consume)


def _rows_only(batch: Batch, adv: Array) -> Array:
    """Zero the rows that have no valid component (NaN policy "ignore")."""
    xp = batch.xp
    if batch.row_valid is None:
        return adv
    return xp.where(batch.row_valid, adv, 0.0)


# --- single-scalar (total reward) estimators -------------------------------------------------


def total_moments(batch: Batch, *, ddof: int, rtol: float, last: bool = False) -> Moments:
    """Group moments of the weighted total R_i = sum_k w_k x_ik (NaN entries count as 0); ``last``:
    the caller reads the batch no further (the moments may then work over its arrays)."""
    total = batch.groups.kernel.sum_k(batch.weighted)
    own = last and batch.consumable(total)
    return group_moments(total, batch.row_valid, batch.groups, ddof=ddof, rtol=rtol, own=own)


def grpo(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """(R - mean_g R) / (std_g R + eps); zero for groups whose total does not vary."""
    m = total_moments(batch, ddof=ddof, rtol=rtol, last=True)
    return _zscores(m, eps, eps_placement, batch.xp, batch.unit, consume=True)


def grpo_batch_std(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """(R - mean_g R) / (std_B R + eps): centred in the group, one standard deviation of R over the
    whole batch (TRL's ``scale_rewards="batch"``); zero when R does not vary over the batch."""
    xp = batch.xp
    centred = total_moments(batch, ddof=ddof, rtol=rtol).centred
    spread = batch_moments(_sum_k(batch.weighted, xp), batch.row_valid, batch.groups, ddof=ddof, rtol=rtol)
    den = _zscore_den(spread, eps, eps_placement, xp, batch.unit)
    return _rows_only(batch, centred / den)


def dr_grpo(batch: Batch, *, rtol: float) -> Array:
    """R - mean_g R."""
    return unscaled(total_moments(batch, ddof=0, rtol=rtol, last=True).centred, batch.unit)


def rloo(batch: Batch, *, rtol: float) -> Array:
    """R_i - mean_{j != i} R_j = n / (n - 1) (R_i - mean_g R); zero for groups of one."""
    xp = batch.xp
    m = total_moments(batch, ddof=0, rtol=rtol, last=True)
    factor = m.count / divisor(m.count - 1, m.count > 1, xp)
    return unscaled(m.centred * factor, batch.unit)


# --- CorrGRPO -------------------------------------------------------------------------------


# Treated as immutable (never assigned after it is made); not ``frozen``: a frozen dataclass's
# constructor costs several times more, microseconds on every call of a small batch.
@dataclass(eq=False)
class CorrParts:
    """Pieces of the CorrGRPO advantage, shared with the diagnostics."""

    components: Moments  # group moments of the weighted components
    correlation_sum_g: Array  # sum_{l,m} rho_lm of each group, group level (before the floor)
    spread_g: Array  # group level: the group has degrees of freedom left (rows > ddof)

    @property
    def correlation_sum(self) -> Array:
        """Per row: the correlation sum of the row's group."""
        return self.components.scope.expand(self.correlation_sum_g)


def correlation_sum(m: Moments, rows_g: Array, ddof: int) -> tuple[Array, Array]:
    r"""Scope level (group or batch): :math:`\sum_{l,m} \rho_{lm} = \mathrm{Var}(\sum_k z_{ik})` over the
    scope of ``m``, whose rows are ``rows_g``; and whether the scope has degrees of freedom left
    (rows > ddof; the sum is 0 where not). The row sums of the z-scores are freed here."""
    dof = rows_g - ddof
    spread = dof > 0
    return m.scope.reduce_sq(m.z_row_sum()) / divisor(dof, spread, m.scope.xp), spread


def corr_denominator_g(
    correlation_sum_g: Array, *, eps: float, eps_placement: str, min_correlation_sum: float, xp: Namespace
) -> Array:
    """Scope level: the correlation norm, :func:`denominator` of the floored correlation sum."""
    return denominator(xp.maximum(correlation_sum_g, min_correlation_sum), eps, eps_placement, xp)


def corr_divisor(
    correlation_sum_g: Array,
    spread_g: Array,
    *,
    eps: float,
    eps_placement: str,
    min_correlation_sum: float,
    xp: Namespace,
) -> Array:
    """Scope level: the correlation norm as a :func:`divisor`, inf where the advantage is 0: no spread
    (rows <= ddof: 0, as GRPO gives, not the numerator over sqrt(eps)), or a zero norm (eps = 0)."""
    den = corr_denominator_g(
        correlation_sum_g,
        eps=eps,
        eps_placement=eps_placement,
        min_correlation_sum=min_correlation_sum,
        xp=xp,
    )
    return divisor(den, (den > 0) & spread_g, xp)


def corr_parts(batch: Batch, *, ddof: int, rtol: float, last: bool = False) -> CorrParts:
    """Numerator and correlation sum, via sum_{l,m} rho_lm = Var_g(sum_k z_ik) (``last``: as in
    :func:`total_moments`).

    The identity holds because z is centred and scaled with the same ddof as the variance of
    its row sums, so the K x K Pearson matrix is never formed. With missing entries it does not
    hold; the correlations are then taken over pairwise-complete rows (:func:`pairwise_correlation_sum`).
    """
    xp = batch.xp
    g = batch.groups
    x = batch.weighted
    m = group_moments(x, batch.valid, g, ddof=ddof, rtol=rtol, own=last and batch.consumable(x))
    rows = g.count_g if batch.row_valid is None else g.reduce(xp.astype(batch.row_valid, m.var_g.dtype))
    corr, spread = correlation_sum(m, rows, ddof)
    if batch.valid is not None:
        # The identity holds in a group where every row is whole or wholly missing (the pairwise-complete
        # rows are then its present rows); it keeps S's error relative, where the pairwise sum's is
        # absolute (K^2 u), which matters at S = 0 (duplicated and negated rewards).
        whole = xp.astype(xp.all(batch.valid, axis=-1, keepdims=True), corr.dtype)
        partly = g.reduce(xp.astype(batch.row_valid, corr.dtype) - whole) > 0
        pairwise = pairwise_correlation_sum(m, batch.valid, g, rtol=rtol)
        corr = xp.where(spread, xp.where(partly, pairwise, corr), 0.0)
    return CorrParts(components=m, correlation_sum_g=corr, spread_g=spread)


def pairwise_correlation_sum(m: Moments, valid: Array, scope: Any, *, rtol: float) -> Array:
    r"""Scope level: :math:`\sum_{l,m} \rho_{lm}`, each Pearson correlation over the rows where both
    components are present (pairwise-complete rows, as ``pandas.DataFrame.corr``).

    :math:`\rho_{ll}` is 1 for a component that varies over its own present rows, else 0; an
    off-diagonal :math:`\rho_{lm}` is 0 when fewer than two rows have both, or when either does
    not vary on them. Without missing entries this equals the z-score identity's value.
    """
    xp = array_namespace(m.shifted)
    c = m.centred  # 0 where missing
    v = xp.astype(valid, c.dtype)
    varies = xp.astype(m.varies_g, c.dtype)
    total = xp.sum(varies, axis=-1, keepdims=True)
    k = c.shape[-1]
    for a in range(k):
        for b in range(a + 1, k):
            both = v[..., a : a + 1] * v[..., b : b + 1]
            n = scope.reduce(both)
            safe_n = divisor(n, n > 0, xp)
            ca, cb = c[..., a : a + 1] * both, c[..., b : b + 1] * both
            da = (ca - scope.expand(scope.reduce(ca) / safe_n)) * both
            db = (cb - scope.expand(scope.reduce(cb) / safe_n)) * both
            va, vb = scope.reduce(da * da), scope.reduce(db * db)
            # varies on these rows: spread above rtol times the root mean square (as group_moments)
            ok = (
                (n > 1)
                & (va > rtol * rtol * scope.reduce(ca * ca))
                & (vb > rtol * rtol * scope.reduce(cb * cb))
                & (va > 0)
                & (vb > 0)
            )
            rho = scope.reduce(da * db) / divisor(xp.sqrt(va) * xp.sqrt(vb), ok, xp)
            total = total + 2.0 * (rho * varies[..., a : a + 1] * varies[..., b : b + 1])
    return total


def corr_denominator(
    parts: CorrParts, *, eps: float, eps_placement: str, min_correlation_sum: float, xp: Namespace
) -> Array:
    """Per row: the CorrGRPO denominator of the row's group (for the diagnostics)."""
    den = corr_denominator_g(
        parts.correlation_sum_g,
        eps=eps,
        eps_placement=eps_placement,
        min_correlation_sum=min_correlation_sum,
        xp=xp,
    )
    return parts.components.scope.expand(den)


def corr_advantage(
    parts: CorrParts,
    numerator: Array | None,
    *,
    eps: float,
    eps_placement: str,
    min_correlation_sum: float,
    xp: Namespace,
) -> Array:
    """numerator / correlation norm per row (a new array; see :func:`corr_divisor`). ``numerator``
    None: the centred total, divided as it is summed (no row-level numerator beside the advantages)."""
    div = corr_divisor(
        parts.correlation_sum_g,
        parts.spread_g,
        eps=eps,
        eps_placement=eps_placement,
        min_correlation_sum=min_correlation_sum,
        xp=xp,
    )
    if numerator is None:  # (the caller's parts are used no further)
        return parts.components.row_sum(div=div, consume=True)
    return parts.components.scope.shift_divide(numerator, None, div)


def corrgrpo(
    batch: Batch,
    *,
    eps: float,
    eps_placement: str,
    ddof: int,
    rtol: float,
    min_correlation_sum: float,
) -> Array:
    """CorrGRPO, the generic route: sum_k c_ik / sqrt(max(sum_{l,m} rho_lm, floor) + eps), 0 for
    rows without a valid component, in the caller's units."""
    xp = batch.xp
    parts = corr_parts(batch, ddof=ddof, rtol=rtol, last=True)
    adv = corr_advantage(
        parts,
        None,
        eps=eps,
        eps_placement=eps_placement,
        min_correlation_sum=min_correlation_sum,
        xp=xp,
    )
    return _rows_only(batch, unscaled(adv, batch.unit))


# --- per-component z-score family (MO-GRPO, GDPO, GDPO-corr, DARA) --------------------------


def _weighted_zscores(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Moments:
    """Group moments of the unweighted components, whose ``inv_std_g`` is replaced by w_k / (std + eps).

    The z-scores are in units of ``batch.weight_scale`` (the weights' power-of-two rescaling).
    """
    xp = batch.xp
    m = group_moments(batch.raw, batch.valid, batch.groups, ddof=ddof, rtol=rtol)
    w = 1.0 if batch.weights is None else batch.weights
    return replace(m, scale_g=w / _zscore_den(m, eps, eps_placement, xp, batch.scale))


def batch_zscore(batch: Batch, h: Array, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """(h - mean_B h) / (std_B h + eps) over the rows that have a valid component (written over
    ``h``, an array of the caller's that it reads no further)."""
    xp = batch.xp
    m = batch_moments(h, batch.row_valid, batch.groups, ddof=ddof, rtol=rtol, own=True)
    return _rows_only(batch, _zscores(m, eps, eps_placement, xp, consume=True))


def mo_grpo(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """sum_k w_k z_ik."""
    m = _weighted_zscores(batch, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)
    return _rows_only(batch, unscaled(m.z_row_sum(), batch.weight_scale))


# --- batch-scope estimators as passes over pieces of whole groups -------------------------------


# Treated as immutable (never assigned after it is made); not ``frozen`` (see CorrParts).
@dataclass(eq=False)
class Passes:
    """A batch-scope estimator whose groups are coupled only through batch statistics, written as
    passes that pieces of whole groups can take in turn (``corrgrpo_core.group_stats`` does, so
    that a large batch is held as one or K numbers a row, not as the formula's temporaries).

    ``sums(piece)`` are the batch sums a piece contributes (added over the pieces); ``rows(piece,
    sums)`` each row's values from its own group and the batch's ``sums`` (None: no sums, or on a
    whole batch, computed from it); ``finish(batch, values)`` the batch-level rest, on every row's
    values at once, written over them (None: the values are the advantages). On a whole batch the
    estimator is ``finish(batch, rows(batch, None))``: one formula, whole or in pieces.
    """

    rows: Callable[[Batch, Array | None], Array]
    finish: Callable[[Batch, Array], Array] | None = None
    sums: Callable[[Batch], Array] | None = None

    def __call__(self, batch: Batch) -> Array:
        values = self.rows(batch, None)
        return values if self.finish is None else self.finish(batch, values)


def gdpo_passes(*, eps: float, eps_placement: str, ddof: int, rtol: float) -> Passes:
    """GDPO: H = MO-GRPO's sum_k w_k z_ik per row, then its batch z-score."""
    return Passes(
        rows=lambda piece, _: mo_grpo(piece, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol),
        finish=partial(batch_zscore, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol),
    )


def gdpo(batch: Batch, *, eps: float, eps_placement: str, ddof: int, rtol: float) -> Array:
    """Batch z-score of sum_k w_k z_ik."""
    return gdpo_passes(eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)(batch)


def gdpo_corr_passes(
    *,
    eps: float,
    group_eps_placement: str,
    eps_placement: str,
    ddof: int,
    rtol: float,
    min_correlation_sum: float,
) -> Passes:
    """GDPO-corr: U_k = w_k z_k per row (the group z-scores), then the batch's correlation norm."""

    def rows(piece: Batch, _: Array | None) -> Array:
        return _weighted_zscores(piece, eps=eps, eps_placement=group_eps_placement, ddof=ddof, rtol=rtol).z

    def finish(batch: Batch, u: Array) -> Array:
        xp = batch.xp
        valid = None if batch.row_valid is None else xp.broadcast_to(batch.row_valid, u.shape)
        # (u: ours, read no further: centred in place)
        m = batch_moments(u, valid, batch.groups, ddof=ddof, rtol=rtol, own=True)
        # U is complete (a missing reward has z = 0, its group mean), so the z-score identity holds.
        corr, spread = correlation_sum(m, m.count_g[..., :1], ddof)
        floor = min_correlation_sum
        div = corr_divisor(
            corr, spread, eps=eps, eps_placement=eps_placement, min_correlation_sum=floor, xp=xp
        )
        return _rows_only(batch, unscaled(m.row_sum(div=div, consume=True), batch.weight_scale))

    return Passes(rows=rows, finish=finish)


def gdpo_corr(batch: Batch, **options: Any) -> Array:
    """(H - mean_B H) / sqrt(Var_B(sum_k u_ik) + eps), u the batch z-scores of U_k = w_k z_k (the
    options of :func:`gdpo_corr_passes`)."""
    return gdpo_corr_passes(**options)(batch)


def dara_shares(batch: Batch, varies: Array) -> Array:
    """DARA's batch sums, (K + 1,): the number of groups, then the number in which each component
    varies (``varies``: a :class:`Moments`' broadcast, one row per group where groups are dense,
    else one per row, which then counts 1 / its group's size). Sums over pieces of whole groups
    add up to the whole batch's."""
    xp = batch.xp
    if batch.groups.dense:  # (B, 1, K): each group once
        ones = xp.ones_like(varies[..., :1], dtype=batch.dtype)
        groups, varying = batch.groups.batch_sum(ones), batch.groups.batch_sum(xp.astype(varies, batch.dtype))
    else:
        per_row = 1.0 / batch.groups.count  # each group sums to 1 over its rows
        groups = batch.groups.batch_sum(xp.broadcast_to(per_row, (*varies.shape[:-1], 1)))
        varying = batch.groups.batch_sum(xp.astype(varies, per_row.dtype) * per_row)
    return xp.reshape(xp.concat([groups, varying], axis=-1), (-1,))


def dara_weights(batch: Batch, varies: Array, *, max_weight: float, shares: Array | None = None) -> Array:
    """Density weights min(max_weight, sqrt(max_j pi_j / pi_k)), pi_k = share of groups where k varies
    (from the batch's :func:`dara_shares`, or ``shares`` where given), broadcastable against ``varies``.

    Components that vary in no group (pi_k = 0) keep weight 1.
    """
    xp = batch.xp
    counts = dara_shares(batch, varies) if shares is None else shares
    pi = counts[1:] / counts[:1]
    top = xp.max(pi, axis=-1, keepdims=True)
    has = pi > 0
    ratio = xp.where(has, top / xp.where(has, pi, 1.0), 1.0)
    return xp.reshape(xp.minimum(xp.sqrt(ratio), max_weight), (1,) * (varies.ndim - 1) + (-1,))


def _dara_calibrate(values: Array, density: Array, variant: str, xp: Namespace) -> Array:
    """Sym: d_k v_ik; Asym: d_k max(v_ik, 0) + min(v_ik, 0). A new array (two row-level temporaries
    at a time, not three: the product and the sum are taken in place)."""
    if variant == "sym":
        return density * values
    calibrated = xp.maximum(values, 0.0)
    calibrated *= density
    calibrated += xp.minimum(values, 0.0)
    return calibrated


def dara_passes(
    *,
    variant: str,
    base: str,
    max_weight: float,
    eps: float,
    eps_placement: str,
    ddof: int,
    rtol: float,
    min_correlation_sum: float,
) -> Passes:
    """DARA: the densities from the batch's shares of groups (:func:`dara_shares`), then each
    row's calibrated components; base="gdpo" batch z-scores their weighted sum."""

    def gdpo_rows(piece: Batch, shares: Array | None) -> Array:  # S_i = sum_k w_k calibrate(z_ik)
        xp = piece.xp
        m = group_moments(piece.raw, piece.valid, piece.groups, ddof=ddof, rtol=rtol)
        density = dara_weights(piece, m.varies, max_weight=max_weight, shares=shares)
        z = _zscores(m, eps, eps_placement, xp, piece.scale, consume=True)  # (m: read no further)
        del m  # (its values are z now)
        calibrated = _dara_calibrate(z, density, variant, xp)
        del z  # (before the weights' product)
        weighted = calibrated if piece.weights is None else piece.weights * calibrated
        del calibrated  # (the row-level arrays are freed before the batch statistics)
        return unscaled(_sum_k(weighted, xp), piece.weight_scale)

    def corrgrpo_rows(piece: Batch, shares: Array | None) -> Array:
        xp = piece.xp
        parts = corr_parts(piece, ddof=ddof, rtol=rtol)
        density = dara_weights(piece, parts.components.varies, max_weight=max_weight, shares=shares)
        num = _sum_k(_dara_calibrate(parts.components.centred, density, variant, xp), xp)
        floor = min_correlation_sum
        adv = corr_advantage(
            parts, num, eps=eps, eps_placement=eps_placement, min_correlation_sum=floor, xp=xp
        )
        return _rows_only(piece, unscaled(adv, piece.unit))

    def sums(piece: Batch) -> Array:  # the varying components of the moments each base takes
        x = piece.raw if base == "gdpo" else piece.weighted
        return dara_shares(piece, group_moments(x, piece.valid, piece.groups, ddof=ddof, rtol=rtol).varies)

    if base != "gdpo":
        return Passes(rows=corrgrpo_rows, sums=sums)
    finish = partial(batch_zscore, eps=eps, eps_placement=eps_placement, ddof=ddof, rtol=rtol)
    return Passes(rows=gdpo_rows, finish=finish, sums=sums)


def dara(batch: Batch, **options: Any) -> Array:
    """DARA: density-weighted components, Sym (w z) or Asym (w max(z, 0) + min(z, 0)), with the
    options of :func:`dara_passes`.

    base="gdpo": S_i = sum_k w_k calibrate(z_ik), then a batch z-score (the DARA paper).
    base="corrgrpo": sum_k calibrate(c_ik) over CorrGRPO's correlation-norm denominator.
    """
    return dara_passes(**options)(batch)


# The batch-scope estimators' :class:`Passes`, by formula.
_PASSES: dict[Callable[..., Array], Callable[..., Passes]] = {
    gdpo: gdpo_passes,
    gdpo_corr: gdpo_corr_passes,
    dara: dara_passes,
}


def passes(formula: Callable[..., Array], rtol: float) -> Passes | None:
    """The :class:`Passes` of a batch-scope estimator's formula bound to its options (a
    ``functools.partial`` of :func:`gdpo`, :func:`gdpo_corr` or :func:`dara`), else None."""
    make = _PASSES.get(getattr(formula, "func", None))  # type: ignore[arg-type]
    return None if make is None else make(**getattr(formula, "keywords", {}), rtol=rtol)
