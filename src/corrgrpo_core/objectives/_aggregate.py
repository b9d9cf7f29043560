"""Reduce a per-token loss matrix to the scalar the optimiser sees."""

from __future__ import annotations

from types import ModuleType
from typing import Literal, get_args

from .._lib._compat import Array, namespace
from .._lib._helpers import as_float_mask, float_dtype
from .._validation import check_choice, check_number, check_optional_number

__all__ = ["AggregationMode", "aggregate_loss", "aggregation_modes"]

AggregationMode = Literal[
    "token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"
]


_MODES: tuple[str, ...] = get_args(AggregationMode)


def aggregation_modes() -> tuple[str, ...]:
    """Names accepted by ``aggregation=`` / ``mode=``, sorted."""
    return tuple(sorted(get_args(AggregationMode)))


def aggregate_loss(
    token_loss: Array,
    mask: Array,
    /,
    *,
    mode: AggregationMode = "token-mean",
    num_tokens: float | Array | None = None,
    num_sequences: float | Array | None = None,
    loss_scale_factor: float | None = None,
) -> Array:
    r"""Aggregate a ``(N, T)`` per-token loss into a scalar.

    With :math:`m_{i,t}` the mask, :math:`\ell_{i,t}` the loss, :math:`|o_i| = \sum_t m_{i,t}`:

    ``"token-mean"`` (DAPO, CISPO; verl's default, TRL ``loss_type="dapo"``)
        :math:`\sum_{i,t} m\ell / n_{tok}`, :math:`n_{tok}` = ``num_tokens`` or :math:`\sum m`.
    ``"token-sum"``
        :math:`\sum_{i,t} m\ell`.
    ``"seq-mean-token-mean"`` (GRPO paper, GSPO; TRL ``loss_type="grpo"``)
        :math:`\frac{1}{n_{seq}} \sum_i \frac{1}{|o_i|}\sum_t m\ell`.
    ``"seq-mean-token-sum"``
        :math:`\frac{1}{n_{seq}} \sum_i \sum_t m\ell`.
    ``"seq-mean-token-sum-norm"`` (Dr.GRPO; TRL ``loss_type="dr_grpo"``)
        :math:`\frac{1}{n_{seq} L} \sum_i \sum_t m\ell`, :math:`L` = ``loss_scale_factor``
        (default: the padded length ``T``; TRL uses ``max_completion_length``).

    :math:`n_{seq}` = ``num_sequences`` or the number of sequences with at least one valid token.

    Parameters
    ----------
    token_loss : array, shape (N, T)
        Per-token loss, real floating.
    mask : array, shape (N, T)
        1 (or True) on tokens that count. Masked entries never reach the result.
    mode : str, default "token-mean"
        One of :func:`aggregation_modes`.
    num_tokens, num_sequences : number or 0-d array, optional
        Denominators to use instead of the local counts. Under data parallelism pass the global
        count divided by the number of ranks (verl: ``batch_num_tokens / dp_size``), so that the
        averaged gradient equals the global-batch one. Local empty batches give 0, never NaN.
    loss_scale_factor : float, optional
        The constant ``L`` of ``"seq-mean-token-sum-norm"``; ignored by the other modes.

    Returns
    -------
    array, shape ()
        The aggregated loss, in ``token_loss``'s namespace and dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import aggregate_loss
    >>> loss = np.asarray([[1.0, 1.0, 1.0], [4.0, 0.0, 0.0]])
    >>> mask = np.asarray([[1, 1, 1], [1, 0, 0]])
    >>> float(aggregate_loss(loss, mask)), float(aggregate_loss(loss, mask, mode="seq-mean-token-mean"))
    (1.75, 2.5)
    """
    check_choice("mode", mode, _MODES)
    xp = namespace(token_loss, mask)
    dtype = float_dtype(xp, token_loss)
    if token_loss.ndim != 2 or tuple(mask.shape) != tuple(token_loss.shape):
        raise ValueError(
            f"token_loss and mask must both have shape (N, T); got {tuple(token_loss.shape)} and "
            f"{tuple(mask.shape)}"
        )
    return _aggregate(
        token_loss,
        as_float_mask(mask, dtype, xp),
        xp,
        mode=mode,
        num_tokens=num_tokens,
        num_sequences=num_sequences,
        loss_scale_factor=loss_scale_factor,
    )


def _aggregate(
    token_loss: Array,
    m: Array,
    xp: ModuleType,
    *,
    mode: str,
    num_tokens: float | Array | None,
    num_sequences: float | Array | None,
    loss_scale_factor: float | None,
) -> Array:
    # Multiplying by the mask would turn a NaN in a padded position into NaN; select instead.
    masked = xp.where(m > 0, token_loss, xp.zeros_like(token_loss))
    if mode == "token-mean":
        return xp.sum(masked) / _denominator("num_tokens", num_tokens, xp.sum(m), xp)
    if mode == "token-sum":
        return xp.sum(masked)
    counts = xp.sum(m, axis=-1)
    if mode == "seq-mean-token-mean":
        seq = xp.sum(masked, axis=-1) / xp.maximum(counts, xp.ones_like(counts))
    elif mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        seq = xp.sum(masked, axis=-1)
    else:
        check_choice("aggregation", mode, _MODES)
    nonempty = xp.sum(xp.astype(counts > 0, m.dtype))
    loss = xp.sum(seq) / _denominator("num_sequences", num_sequences, nonempty, xp)
    if mode == "seq-mean-token-sum-norm":
        scale = check_optional_number("loss_scale_factor", loss_scale_factor, strict=True)
        loss = loss / (token_loss.shape[-1] if scale is None else scale)
    return loss


def _denominator(name: str, given: float | Array | None, local: Array, xp: ModuleType) -> Array | float:
    """``given`` if set (validated when it is a Python number), else ``local`` floored at 1."""
    if given is None:
        return xp.maximum(local, xp.ones_like(local))
    if isinstance(given, (int, float)):
        return check_number(name, given, strict=True)
    return xp.astype(given, local.dtype)
