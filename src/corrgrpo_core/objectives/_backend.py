"""Namespace lookup, stop-gradient and masked reductions shared by the objectives.

Everything backend-specific in the subpackage lives here, so the loss and sampling modules are
plain array-API code.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from array_api_compat import array_namespace, device, is_jax_namespace, is_torch_namespace

Array = Any

__all__ = [
    "Array",
    "as_float_mask",
    "device",
    "float_dtype",
    "masked_max",
    "masked_mean",
    "masked_min",
    "namespace",
    "stop_gradient",
]


def namespace(*arrays: Array) -> ModuleType:
    """Return the one array namespace shared by ``arrays`` (``None`` entries are skipped)."""
    present = [a for a in arrays if a is not None]
    try:
        return array_namespace(*present)
    except TypeError as exc:
        raise TypeError(f"inputs must be arrays of one library (numpy, torch, jax, ...): {exc}") from exc


def stop_gradient(x: Array, xp: ModuleType) -> Array:
    """Value of ``x`` with no gradient flowing through it.

    torch and jax need their own primitive (``Tensor.detach`` / ``jax.lax.stop_gradient``);
    namespaces without autograd (numpy, array-api-strict) return ``x`` itself.
    """
    if is_torch_namespace(xp):
        return x.detach()
    if is_jax_namespace(xp):
        import jax

        return jax.lax.stop_gradient(x)
    return x


def float_dtype(xp: ModuleType, *arrays: Array) -> Any:
    """Result floating dtype of ``arrays``; raise if any of them is not real floating."""
    for a in arrays:
        if not xp.isdtype(a.dtype, "real floating"):
            raise TypeError(f"expected a real floating array, got dtype {a.dtype}")
    return xp.result_type(*arrays)


def as_float_mask(mask: Array, dtype: Any, xp: ModuleType) -> Array:
    """``mask`` (bool, integer or floating; 1 = valid token) as ``dtype`` values in {0, 1}."""
    if xp.isdtype(mask.dtype, "bool"):
        return xp.astype(mask, dtype)
    return xp.astype(mask != 0, dtype)


def masked_mean(x: Array, m: Array, xp: ModuleType, axis: int | None = None) -> Array:
    """Mean of ``x`` over entries where ``m`` is 1; 0 where nothing is valid (never NaN)."""
    count = xp.sum(m, axis=axis)
    return xp.sum(x * m, axis=axis) / xp.maximum(count, xp.ones_like(count))


def masked_max(x: Array, m: Array, xp: ModuleType) -> Array:
    """Max of ``x`` where ``m`` is 1 (``-inf`` when nothing is valid)."""
    return xp.max(xp.where(m > 0, x, xp.full_like(x, -xp.inf)))


def masked_min(x: Array, m: Array, xp: ModuleType) -> Array:
    """Min of ``x`` where ``m`` is 1 (``+inf`` when nothing is valid)."""
    return xp.min(xp.where(m > 0, x, xp.full_like(x, xp.inf)))
