"""Small array-API helpers shared by the objectives: dtypes, masks and masked reductions.

Plain ``xp.`` calls only; backend differences are in :mod:`._compat`.
"""

from __future__ import annotations

from typing import Any

from ._compat import Array, Namespace

__all__ = ["as_float_mask", "float_dtype", "masked_max", "masked_mean", "masked_min"]


def float_dtype(xp: Namespace, *arrays: Array) -> Any:
    """Result floating dtype of ``arrays``; raise if any of them is not real floating."""
    for a in arrays:
        if not xp.isdtype(a.dtype, "real floating"):
            raise TypeError(f"expected a real floating array, got dtype {a.dtype}")
    return xp.result_type(*arrays)


def as_float_mask(mask: Array, dtype: Any, xp: Namespace) -> Array:
    """``mask`` (bool, integer or floating; 1 = valid token) as ``dtype`` values in {0, 1}."""
    if xp.isdtype(mask.dtype, "bool"):
        return xp.astype(mask, dtype)
    return xp.astype(mask != 0, dtype)


def masked_mean(x: Array, m: Array, xp: Namespace, axis: int | None = None) -> Array:
    """Mean of ``x`` over entries where ``m`` is 1; 0 where nothing is valid (never NaN)."""
    count = xp.sum(m, axis=axis)
    return xp.sum(x * m, axis=axis) / xp.maximum(count, xp.ones_like(count))


def masked_max(x: Array, m: Array, xp: Namespace) -> Array:
    """Max of ``x`` where ``m`` is 1 (``-inf`` when nothing is valid)."""
    return xp.max(xp.where(m > 0, x, xp.full_like(x, -xp.inf)))


def masked_min(x: Array, m: Array, xp: Namespace) -> Array:
    """Min of ``x`` where ``m`` is 1 (``+inf`` when nothing is valid)."""
    return xp.min(xp.where(m > 0, x, xp.full_like(x, xp.inf)))
