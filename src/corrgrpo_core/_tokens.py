"""Sequence-level advantages to token level."""

from __future__ import annotations

from ._kernels import kernel_for
from ._lib._compat import Array, Namespace, array_namespace


def broadcast_to_tokens(advantages: Array, response_mask: Array, /, *, xp: Namespace | None = None) -> Array:
    """Give every response token its sequence's advantage, and 0 outside the mask.

    ``advantages`` is ``(..., N)`` and ``response_mask`` ``(..., N, T)`` (bool or 0/1); the
    result has the mask's shape and the advantages' dtype. On torch it is the product
    ``advantages[..., None] * response_mask`` in one pass (as verl writes it), whose only
    difference for a 0/1 mask is a -0.0 outside the mask of a negative advantage.

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> cc.broadcast_to_tokens(np.array([1.5, -2.0]), np.array([[1, 1, 0], [1, 0, 0]]))
    array([[ 1.5,  1.5,  0. ],
           [-2. ,  0. ,  0. ]])
    """
    if xp is None:
        xp = array_namespace(advantages, response_mask)
    if response_mask.ndim != advantages.ndim + 1 or tuple(response_mask.shape[:-1]) != tuple(
        advantages.shape
    ):
        raise ValueError(
            f"response_mask must be advantages' shape plus a token axis: got advantages "
            f"{tuple(advantages.shape)} and mask {tuple(response_mask.shape)}"
        )
    # torch: one fused pass, no temporary as large as the output; elsewhere xp.where
    return kernel_for(xp).broadcast_to_tokens(advantages, response_mask)
