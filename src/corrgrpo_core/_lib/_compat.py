"""The one import point for array-api-compat, plus small namespace helpers."""

from __future__ import annotations

from typing import Any, TypeAlias

from array_api_compat import (
    array_namespace,
    device,
    is_array_api_obj,
    is_jax_array,
    is_jax_namespace,
    is_numpy_namespace,
    is_torch_namespace,
)
from array_api_compat import is_lazy_array as _is_lazy_array

# Arrays of any backend; kept as Any so that numpy, torch and jax arrays all type-check.
Array: TypeAlias = Any
Namespace: TypeAlias = Any

__all__ = [
    "Array",
    "Namespace",
    "array_namespace",
    "device",
    "is_array_api_obj",
    "is_jax_namespace",
    "is_lazy_array",
    "is_numpy_namespace",
    "is_torch_namespace",
    "work_dtype",
]


def is_lazy_array(x: Any) -> bool:
    """Whether ``x``'s values are unknown now (a jax tracer under ``jit``, a dask array, ...), so that
    value checks must be skipped. array-api-compat counts every jax array; an eager one is concrete."""
    if not _is_lazy_array(x):
        return False
    if is_jax_array(x):
        import jax

        return isinstance(x, jax.core.Tracer)
    return True


def work_dtype(xp: Namespace, dev: Any) -> Any:
    """Accumulation dtype: float64 wherever the backend and device can hold it."""
    if is_jax_namespace(xp):
        import jax

        return xp.float64 if jax.config.read("jax_enable_x64") else xp.float32  # type: ignore[no-untyped-call]
    if is_torch_namespace(xp) and getattr(dev, "type", "cpu") == "mps":
        return xp.float32
    return xp.float64
