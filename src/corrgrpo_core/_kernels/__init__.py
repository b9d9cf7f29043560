"""Backend kernels, one module per backend family, chosen once per namespace.

The estimators' maths (``_stats``, ``_estimators``) is written once for every array-API
namespace. What depends on how a backend stores and indexes arrays lives here:

- ``_generic``: the array API alone (array-api-strict, cupy, ...): the reference kernel;
- ``_host``: numpy (einsum, bincount, labels without a sort), and dense GRPO / CorrGRPO on host
  memory in the input's float dtype;
- ``_torch``: ``index_add_``, in-place gathers, host labels for CPU tensors, the fused token
  broadcast, dense GRPO / CorrGRPO in the input's dtype;
- ``_jax``: labels and segment sums that ``jax.jit`` can trace.

:func:`kernel_for` gives the group kernel that :class:`corrgrpo_core._groups.Groups` holds;
:func:`dense_estimator` a whole-call fast path, which may decline (None: the generic path runs).
Backend modules are imported only when their namespace is first seen.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .._lib._compat import Namespace, is_jax_namespace, is_numpy_namespace, is_torch_namespace
from . import _host
from ._generic import CHUNK_ROWS, SMALL_GROUP, Kernel, RaggedIndex, Runs, shift_divide
from ._host import NumpyKernel
from ._options import KernelOptions

__all__ = [
    "CHUNK_ROWS",
    "SMALL_GROUP",
    "Kernel",
    "KernelOptions",
    "RaggedIndex",
    "Runs",
    "dense_estimator",
    "in_host_memory",
    "kernel_for",
    "shift_divide",
    "sum_of_squares",
]


@cache
def kernel_for(xp: Namespace) -> Kernel:
    """The group kernel for the namespace ``xp`` (one instance per namespace)."""
    if is_numpy_namespace(xp):
        return NumpyKernel(xp)
    if is_torch_namespace(xp):
        from ._torch import TorchKernel

        return TorchKernel(xp)
    if is_jax_namespace(xp):
        from ._jax import JaxKernel

        return JaxKernel(xp)
    return Kernel(xp)


def dense_estimator(
    estimator: str, scores: Any, weights: Any, xp: Namespace | None, options: KernelOptions
) -> Any:
    """The kernel's result for a dense batch of ``scores``, or None to run the generic path.

    torch tensors (any float dtype the kernels cover) and numpy float32 arrays, computed in their
    own dtype; numpy float64 keeps the generic path. Chosen from the array's type alone (no
    namespace lookup): a call costs microseconds.
    """
    if type(scores) is np.ndarray:
        if scores.dtype != np.float32 or not (xp is None or is_numpy_namespace(xp)):
            return None
        return _host.dense(estimator, scores, weights, options)
    if type(scores).__module__ != "torch" or not (xp is None or is_torch_namespace(xp)):
        return None
    from . import _torch

    return _torch.dense(estimator, scores, weights, options)


def in_host_memory(x: Any, xp: Namespace) -> bool:
    """Whether ``x`` (of namespace ``xp``) lies in host memory a pass can stream through: numpy
    arrays and CPU torch tensors (accelerators and ``jax.jit`` get their batches whole)."""
    return is_numpy_namespace(xp) or (is_torch_namespace(xp) and x.device.type == "cpu")


def sum_of_squares(x: Any, xp: Namespace) -> float | None:
    """sum(x * x) of a numpy array in one BLAS pass (no temporary, no floating-point warnings), or
    None where the backend has no such pass (the caller then uses max and min, which cannot overflow)."""
    if not is_numpy_namespace(xp):
        return None
    flat = np.reshape(x, (-1,))
    return float(np.vdot(flat, flat))
