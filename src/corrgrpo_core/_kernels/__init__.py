"""Backend kernels, one module per backend family, chosen once per namespace.

The estimators' maths (``_stats``, ``_estimators``) is written once for every array-API
namespace. What depends on how a backend stores and indexes arrays lives here:

- ``_generic``: the array API alone (array-api-strict, cupy, ...): the reference kernel;
- ``_host``: numpy (a position-major layout for dense groups, bincount, labels without a sort);
- ``_torch``: ``index_add_``, in-place gathers, host labels for CPU tensors, the fused token
  broadcast;
- ``_jax``: labels and segment sums that ``jax.jit`` can trace.

:func:`kernel_for` gives the group kernel that :class:`corrgrpo_core._groups.Groups` holds;
:func:`host_route` says when an array is better worked on through numpy (torch CPU tensors);
:func:`factorize` and :func:`host_dense_group_size` label host ids of any hashable type.
No kernel knows an estimator. Backend modules are imported only when their namespace is first seen.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from .._lib._compat import Namespace, is_jax_namespace, is_numpy_namespace, is_torch_namespace
from ._generic import CHUNK_ROWS, SMALL_GROUP, Joined, Kernel, RaggedIndex, Runs, shift_divide
from ._host import NumpyKernel, factorize
from ._host import dense_group_size as host_dense_group_size

__all__ = [
    "CHUNK_ROWS",
    "SMALL_GROUP",
    "Joined",
    "Kernel",
    "RaggedIndex",
    "Runs",
    "factorize",
    "host_dense_group_size",
    "host_route",
    "kernel_for",
    "shift_divide",
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


def host_route(scores: Any, weights: Any, xp: Namespace | None) -> tuple[Any, Callable[[Any], Any]] | None:
    """A zero-copy numpy view of ``scores`` and the function that hands a numpy result back in the
    scores' own type, where that backend's arrays are worked on through numpy (torch tensors on the
    CPU that record no gradient, with weights that record none either); else None.

    Chosen from the array's type alone (no namespace lookup): a call costs well under a microsecond.
    """
    if type(scores).__module__ != "torch" or not (xp is None or is_torch_namespace(xp)):
        return None
    if getattr(weights, "requires_grad", False):
        return None  # gradients flow through torch
    torch_kernel = _torch_module()
    view = torch_kernel.host_view(scores)
    return None if view is None else (view, torch_kernel.from_numpy)


@cache
def _torch_module() -> Any:
    """:mod:`._torch`, imported when a torch tensor is first seen (an import statement in a function
    that runs on every call costs more than the rest of the route)."""
    from . import _torch

    return _torch
