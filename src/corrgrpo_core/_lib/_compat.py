"""The one import point for array-api-compat, plus small namespace helpers."""

from __future__ import annotations

from typing import Any, TypeAlias

from array_api_compat import (
    array_namespace,
    device,
    is_array_api_obj,
    is_jax_namespace,
    is_lazy_array,
    is_numpy_namespace,
    is_torch_namespace,
)

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


def work_dtype(xp: Namespace, dev: Any) -> Any:
    """Accumulation dtype: float64 wherever the backend and device can hold it."""
    if is_jax_namespace(xp):
        import jax

        return xp.float64 if jax.config.read("jax_enable_x64") else xp.float32  # type: ignore[no-untyped-call]
    if is_torch_namespace(xp) and getattr(dev, "type", "cpu") == "mps":
        return xp.float32
    return xp.float64
