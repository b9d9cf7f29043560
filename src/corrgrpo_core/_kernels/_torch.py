"""torch: the group kernel, the token broadcast, and the route of CPU tensors through numpy.

**Group kernel** (:class:`TorchKernel`): ids of CPU tensors are labelled on the host (the numpy
kernel's labels, zero-copy); ids on an accelerator are labelled by the sorted position of each
group's first row (a running maximum, no shape that depends on values, no host synchronisation)
and summed with ``index_add_``. Gathered copies are ours, so updates go into them in place.

**The host route** (:func:`host_view`): a CPU tensor that records no gradient is worked on as a
numpy view; what comes here are tensors on an accelerator and tensors autograd records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._lib._compat import Array, Namespace
from . import _host
from ._generic import Kernel, RaggedIndex, Runs

# Output elements per piece of the token broadcast: a piece of mask and output stays in cache.
_TOKEN_PIECE = 1 << 18
# numpy dtypes of the torch dtypes whose host buffers numpy can allocate.
_HOST_DTYPES = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}
# Host buffers from this size on come from numpy, which asks the kernel for transparent huge
# pages (madvise): a fresh page of a large tensor otherwise costs a page fault every 4 KiB.
_HUGE = 1 << 22


def empty(shape: tuple[int, ...], dtype: Any, device: Any) -> Array:
    """An uninitialised tensor; large host ones backed by numpy's huge-page-advised memory."""
    n = 1
    for s in shape:
        n *= s
    host = _HOST_DTYPES.get(dtype)
    if device.type == "cpu" and host is not None and n * np.dtype(host).itemsize >= _HUGE:
        return torch.from_numpy(np.empty(shape, dtype=host))
    return torch.empty(shape, dtype=dtype, device=device)


def broadcast_to_tokens(advantages: Array, response_mask: Array) -> Array:
    """advantages[..., None] * mask, one pass over the mask, in pieces of rows on the host.

    The product equals "the advantage inside the mask, 0 outside" for a bool or 0/1 mask (a
    negative advantage gives -0.0 outside, equal to 0). On the host, a mixed-dtype product over
    a whole ``(N, T)`` batch is several times slower than the same product in cache-sized pieces,
    and an integer or bool mask is faster still converted into the output piece and scaled there
    (the same float rounding of each mask value as the mixed product, so the same result).
    """
    shape = tuple(response_mask.shape)
    out = empty(shape, advantages.dtype, advantages.device)
    if not shape or shape[-1] == 0 or out.numel() == 0:
        return out.zero_()
    t = shape[-1]
    adv = advantages.reshape(-1, 1)
    mask = response_mask.reshape(-1, t)
    flat = out.view(-1, t)
    if advantages.device.type != "cpu":
        torch.mul(adv, mask, out=flat)
        return out
    if mask.dtype == torch.bool:  # the same 0/1 bytes; torch converts uint8 to float vectorised, bool not
        mask = mask.view(torch.uint8)
    convert = not (mask.dtype.is_floating_point or mask.dtype.is_complex)
    rows = max(1, _TOKEN_PIECE // t)
    for a in range(0, flat.shape[0], rows):
        piece = flat[a : a + rows]
        if convert:  # the piece is still in cache for the second step
            piece.copy_(mask[a : a + rows]).mul_(adv[a : a + rows])
        else:
            torch.mul(adv[a : a + rows], mask[a : a + rows], out=piece)
    return out


def host_view(x: Array) -> Array | None:
    """A zero-copy numpy view of a floating CPU tensor that records no gradient, else None.

    numpy calls cost a fraction of torch calls on the CPU, and at the sizes TRL hands over most of
    a call is per-call overhead: such tensors are worked on through numpy (:mod:`._host`), and the
    advantages handed back with :func:`torch.from_numpy`.
    """
    if x.device.type != "cpu" or x.requires_grad or not x.dtype.is_floating_point:
        return None
    try:
        return x.numpy()
    except (RuntimeError, TypeError):  # a lazy negation or conjugate, or no numpy dtype (bfloat16)
        return None


from_numpy = torch.from_numpy  # a numpy result as a CPU tensor on the same memory


# --- the group kernel --------------------------------------------------------------------------


class TorchKernel(Kernel):
    """Group kernels for torch tensors (see the module docstring)."""

    def __init__(self, xp: Namespace) -> None:
        super().__init__(xp)

    def in_host_memory(self, x: Array) -> bool:
        return bool(x.device.type == "cpu")

    def find_runs(self, ids: Array) -> Runs | None:
        return _host.find_runs(ids.numpy()) if ids.device.type == "cpu" else None

    def index(
        self, ids: Array, runs: Runs | None, dtype: Any, *, lazy: bool
    ) -> tuple[RaggedIndex, Array, bool]:
        if ids.device.type == "cpu":  # compact labels 0..G-1 on the host, group level of G rows
            found = _host.label(ids.numpy(), runs)
            assert found.size is not None
            index = RaggedIndex(
                labels=torch.from_numpy(found.labels.astype(np.int64, copy=False)),
                num=found.num,
                member=torch.from_numpy(found.member.astype(np.int64, copy=False)),
                size=None,
                starts=found.starts,  # host array: only used to cut the batch into pieces
            )
            count = torch.from_numpy(found.size).to(dtype)[:, None]
            return index, count, _host.small(found.size)
        index = _first_row_labels(ids)
        ones = torch.ones((ids.shape[0], 1), dtype=dtype, device=ids.device)
        return index, self.group_sum(ones, index), False

    def group_sum(self, x: Array, r: RaggedIndex) -> Array:
        return torch.zeros((r.num, *x.shape[1:]), dtype=x.dtype, device=x.device).index_add_(0, r.labels, x)

    def subtract_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return self.gather(g, r).neg_().add_(x)  # the gathered copy is ours

    def divide_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return x.div_(self.gather(g, r))

    def row_dot_gathered(self, x: Array, g: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        # multiply into the gathered copy
        return self.gather(g, r).mul_(self._minus_ref(x, r, ref)).sum(dim=-1, keepdim=True)

    def broadcast_to_tokens(self, advantages: Array, response_mask: Array) -> Array:
        return broadcast_to_tokens(advantages, response_mask)


def _first_row_labels(ids: Array) -> RaggedIndex:
    """Label = sorted position of the group's first row; shapes independent of values.

    The start of each sorted row's run is a running maximum of the run starts (no searchsorted,
    which is slow on long runs of equal keys in torch).
    """
    n = ids.shape[0]
    order = torch.argsort(ids)  # any order within a group will do
    sorted_ids = ids[order]
    first = torch.ones(n, dtype=torch.bool, device=ids.device)
    first[1:] = sorted_ids[1:] != sorted_ids[:-1]
    position = torch.arange(n, device=ids.device)
    start = torch.cummax(torch.where(first, position, torch.zeros_like(position)), 0).values
    labels = torch.empty_like(start).scatter_(0, order, start)
    return RaggedIndex(labels=labels, num=n, member=order, size=None)
