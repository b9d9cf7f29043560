"""Backend-specific fast paths, each in its own module, chosen once per call by namespace.

The estimators' maths (``_stats``, ``_estimators``) is written once for every array-API
namespace. Where one backend has a much cheaper route for a whole call (torch: fewer, fused
kernel launches; host buffers the kernel can back with huge pages), that route lives here, and a
public function asks :func:`for_namespace` once for it. A kernel may decline a call (returns
None), and the generic path then runs.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .._lib._compat import Namespace, is_torch_namespace


def for_namespace(xp: Namespace) -> ModuleType | None:
    """The kernel module for ``xp``, or None where the generic path is the only one."""
    if is_torch_namespace(xp):
        from . import _torch

        return _torch
    return None


def dense_estimator(estimator: str, scores: Any, group_ids: Any, xp: Namespace | None, **options: Any) -> Any:
    """The kernel's result for a dense batch of ``scores`` (no ``group_ids``), or None to run the generic path.

    Chosen from the array's type alone (no namespace lookup): a call costs microseconds.
    """
    if group_ids is not None or type(scores).__module__ != "torch":
        return None
    if xp is not None and not is_torch_namespace(xp):
        return None
    from . import _torch

    return _torch.dense(estimator, scores, **options)
