"""The one compatibility layer: array-api-compat's helpers, the array types, and the few calls
that differ between backends outside the group kernels (namespace lookup, gradients, dtypes).

Everything else in the package is plain array-API code (``xp.`` calls) or lives in a kernel
module of :mod:`corrgrpo_core._kernels`.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any, TypeAlias

import numpy as np
from array_api_compat import array_namespace as _array_namespace
from array_api_compat import device as _device
from array_api_compat import (
    is_array_api_obj,
    is_jax_array,
    is_jax_namespace,
    is_numpy_namespace,
    is_torch_namespace,
)
from array_api_compat import is_lazy_array as _is_lazy_array

# An array of any backend (numpy, torch, jax, cupy, array-api-strict). ``Any`` at run time and to
# the type checker, so that every backend's arrays type-check; the one definition in the package.
Array: TypeAlias = Any
# An array-API namespace (a module, or array-api-compat's wrapper of one).
Namespace: TypeAlias = Any


def _defer_numpy_submodules() -> None:
    """numpy's submodules that it loads on first use (``random``, ``ma``, ``polynomial``,
    ``testing``, ``f2py``, ...), registered to load on their first attribute access instead.

    array-api-compat builds its numpy namespace by copying every public name of numpy, which
    touches each of them (``python -X importtime -c "import corrgrpo_core"`` lists them): ``import
    corrgrpo_core`` took 0.36-0.40 CPU seconds and 44 MB, 0.26 and 28 MB deferred (load 5), at every
    start of the ``corrgrpo`` command. Deferred (``importlib.util.LazyLoader``,
    the standard library's lazy import), the namespace holds the very module objects that numpy
    hands out, each loaded the first time anything reads from it. Submodules loaded already,
    and numpy versions that load them eagerly, are left as they are.
    """
    for name in getattr(np, "__numpy_submodules__", ()):
        full = f"numpy.{name}"
        if full in sys.modules or name in vars(np):
            continue
        spec = importlib.util.find_spec(full)
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        setattr(np, name, module)


_defer_numpy_submodules()
_NUMPY = _array_namespace(np.empty(0))  # array-api-compat's numpy namespace

__all__ = [
    "Array",
    "Namespace",
    "array_namespace",
    "device",
    "dtype_kind",
    "is_array_api_obj",
    "is_jax_namespace",
    "is_lazy_array",
    "is_numpy_namespace",
    "is_torch_namespace",
    "namespace",
    "stop_gradient",
    "work_dtype",
]


def array_namespace(*arrays: Array) -> Namespace:
    """array-api-compat's namespace of ``arrays`` (a numpy array's is found without its lookup: the
    estimators call this once per call, and a lookup costs several Python frames)."""
    if len(arrays) == 1 and type(arrays[0]) is np.ndarray:
        return _NUMPY
    return _array_namespace(*arrays)


def device(x: Array) -> Any:
    """The device of ``x`` ("cpu" for a numpy array, without array-api-compat's lookup)."""
    return "cpu" if type(x) is np.ndarray else _device(x)


def namespace(*arrays: Array) -> Namespace:
    """The one array namespace shared by ``arrays`` (``None`` entries are skipped).

    Like :func:`array_namespace`, with a message that says which inputs are meant.
    """
    present = [a for a in arrays if a is not None]
    try:
        return array_namespace(*present)
    except TypeError as exc:
        raise TypeError(f"inputs must be arrays of one library (numpy, torch, jax, ...): {exc}") from exc


def is_lazy_array(x: Any) -> bool:
    """Whether ``x``'s values are unknown now (a jax tracer under ``jit``, a dask array, ...), so that
    value checks must be skipped. array-api-compat counts every jax array; an eager one is concrete."""
    if type(x) is np.ndarray or not _is_lazy_array(x):
        return False
    if is_jax_array(x):
        import jax  # only reached with a jax array in hand: jax is imported already

        return isinstance(x, jax.core.Tracer)
    return True


def stop_gradient(x: Array, xp: Namespace) -> Array:
    """Value of ``x`` with no gradient flowing through it.

    torch and jax need their own primitive (``Tensor.detach`` / ``jax.lax.stop_gradient``);
    namespaces without autograd (numpy, array-api-strict) return ``x`` itself.
    """
    if is_torch_namespace(xp):
        return x.detach()
    if is_jax_namespace(xp):
        import jax  # only reached on the jax namespace: jax is imported already

        return jax.lax.stop_gradient(x)
    return x


@functools.cache
def dtype_kind(xp: Namespace, dtype: Any) -> str:
    """``"real floating"``, ``"integral"`` or ``""`` (neither) for ``dtype`` of ``xp``, asked of
    ``xp.isdtype`` once per namespace and dtype (a call costs microseconds; this, a dict lookup)."""
    for kind in ("real floating", "integral"):
        if xp.isdtype(dtype, kind):
            return kind
    return ""


def work_dtype(xp: Namespace, dev: Any) -> Any:
    """Accumulation dtype: float64 wherever the backend and device can hold it."""
    if xp is _NUMPY:
        return np.float64
    if is_jax_namespace(xp):
        import jax  # only reached on the jax namespace: jax is imported already

        return xp.float64 if jax.config.read("jax_enable_x64") else xp.float32
    if is_torch_namespace(xp) and getattr(dev, "type", "cpu") == "mps":
        return xp.float32
    return xp.float64
