"""torch: the group kernel, the token broadcast, and GRPO / CorrGRPO on dense ``(B, n, K)`` groups.

**Group kernel** (:class:`TorchKernel`): ids of CPU tensors are labelled on the host (the numpy
kernel's labels, zero-copy); ids on an accelerator are labelled by the sorted position of each
group's first row (a running maximum, no shape that depends on values, no host synchronisation)
and summed with ``index_add_``. Gathered copies are ours, so updates go into them in place.

**Dense estimators**:
The dense estimators here run the same maths as :mod:`corrgrpo_core._stats` (shift by a member
of the group, one-pass sums, scale-relative zero-variance test), written as a dozen fused torch
calls in the input's floating dtype: a call costs tens of microseconds instead of hundreds, and no
float64 copy of a float32 batch is made. They decline (return None) whatever they do not cover:
other dtypes, NaN or inf in the scores (the generic path then names the rows), ``ddof`` >= n.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._lib._compat import Array, Namespace
from . import _host
from ._generic import Kernel, RaggedIndex, Runs
from ._host import noise_floor
from ._options import KernelOptions

# Output elements per piece of the token broadcast: a piece of mask and output stays in cache.
_TOKEN_PIECE = 1 << 18
# numpy dtypes of the torch dtypes whose host buffers numpy can allocate.
_HOST_DTYPES = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}
# Host buffers from this size on come from numpy, which asks the kernel for transparent huge
# pages (madvise): a fresh page of a large tensor otherwise costs a page fault every 4 KiB.
_HUGE = 1 << 22
_EPS32, _EPS64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
_EPS = {torch.float32: _EPS32, torch.float64: _EPS64}


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


def dense(estimator: str, scores: Array, weights: Any, options: KernelOptions) -> Array | None:
    """GRPO or CorrGRPO of ``(n, K)`` / ``(B, n, K)`` float scores in their own dtype, or None.

    The maths of :func:`corrgrpo_core._stats.moments` and :func:`corrgrpo_core._estimators.grpo`
    / ``corr_parts``: shift by the group's first row (a constant component becomes exactly 0),
    centre, sum the squares of the centred values (two passes: relative error about n eps even in
    float32), the scale-relative zero-variance test, and the correlation sum as the group variance
    of the summed z-scores.

    CPU tensors run :mod:`._host` on zero-copy numpy views (a numpy call costs a fraction of a
    torch call); other devices run :func:`dense_ops`. Both write the shifted values
    position-major, ``(n, K, B)``, so that no reduction or broadcast runs along a short innermost
    axis, which on the CPU is several times slower than a copy. Temporaries: the shifted values
    and one product, each the input's size, so the peak is about twice the input.
    """
    if scores.is_cpu:  # numpy on the same memory: a fraction of torch's cost per call
        try:
            a = scores.numpy()  # refuses tensors that need gradients (they take the generic path)
        except (RuntimeError, TypeError):  # requires_grad, a lazy negation, or no numpy dtype (bfloat16)
            return None
        got = _host.dense(estimator, a, weights, options)
        return None if got is None else torch.from_numpy(got)
    x = scores
    if estimator not in ("grpo", "corrgrpo"):  # the others: on the host only
        return None
    if x.dtype not in (torch.float32, torch.float64) or x.ndim not in (2, 3) or x.requires_grad:
        return None
    if x.ndim == 2:
        x = x.unsqueeze(0)
    b, n, k = x.shape
    ddof = options.ddof
    if b == 0 or n == 0 or k == 0 or n <= ddof or (n == 1 and options.singleton == "raise"):
        return None
    if options.zero_variance_rtol is not None:
        rtol = options.zero_variance_rtol
    else:  # the generic path's default: 64 eps of its working dtype (float64 except on MPS)
        rtol = 64.0 * (_EPS32 if x.device.type == "mps" else _EPS64)
    w = None
    if weights is not None:
        if getattr(weights, "requires_grad", False):
            return None  # gradients flow through the generic path
        try:
            w = torch.as_tensor(weights, dtype=x.dtype, device=x.device)
        except (TypeError, ValueError, RuntimeError):
            return None  # the generic path names the problem
        if w.shape != (k,) or not bool(torch.isfinite(w).all()):
            return None
    return dense_ops(
        estimator,
        x,
        w,
        eps=options.eps,
        outside=options.eps_placement == "outside",
        ddof=ddof,
        rtol=rtol,
        floor=options.min_correlation_sum,
        shape=scores.shape[:-1],
    )


def dense_ops(
    estimator: str,
    x: Array,
    w: Array | None,
    *,
    eps: float,
    outside: bool,
    ddof: int,
    rtol: float,
    floor: float,
    shape: tuple[int, ...],
) -> Array | None:
    """The same maths as torch calls, for tensors off the host (CUDA and others); ``x`` is (B, n, K)."""
    n, k = x.shape[1], x.shape[2]
    unit = (k + 1) * _EPS[x.dtype]  # rounding of a sum of K shifted (weighted) terms, per |term|
    if estimator == "grpo":
        largest = None
        if k == 1 and w is None:
            c, ref = _shifted(x[..., 0].t(), None)  # (n, B)
        else:  # sum the shifted components: a large offset of one component costs no precision
            parts, ref_k = _shifted(x.permute(1, 2, 0), w)
            c, ref = parts.sum(1), ref_k.sum(0)
            if k > 1:  # a bound on sum_k |term| of a row: the cancellation guard of _host._cancel_limit
                largest = parts.abs_().amax(0).sum(0)
        stats = _moments(c, ref, n, rtol)
        if stats is None:
            return None
        ss, varies = stats
        den = _den(ss.div_(n - ddof), eps, outside)
        den = torch.where(varies & (den > 0), den, torch.full_like(den, float("inf")))
        if largest is not None:  # a total fixed in float32 is checked against eps alone (_host._grpo)
            amplify = 1 + (n / (n - ddof)) ** 0.5
            at_least = torch.where(varies, den, torch.full_like(den, (eps if outside else eps**0.5)))
            if bool((largest.mul_(unit * amplify) > at_least * 5e-5).any()):
                return None  # mostly cancellation: the float64 generic path
        return _rows_out(c, den, shape)
    c, ref = _shifted(x.permute(1, 2, 0), w)  # (n, K, B)
    stats = _moments(c, ref, n, rtol)
    if stats is None:
        return None
    ss, varies = stats
    std = ss.div_(n - ddof).sqrt_()
    inv = torch.where(varies, std.reciprocal(), torch.zeros_like(ss))
    largest = std.sum(0).mul_(((n - ddof) * (n - 1) / n) ** 0.5)  # as _host._corrgrpo
    num = c.sum(1)  # (n, B): the centred total
    zsum = c.mul_(inv).sum(1)  # sum_k z_ik; c is not needed after this
    corr = zsum.square_().sum(0).div_(n - ddof)
    corr.masked_fill_(corr <= noise_floor(n, k, _HOST_DTYPES[x.dtype]), 0.0)  # rounding, not signal
    den = _den(corr.clamp_min_(floor), eps, outside)
    den = torch.where(den > 0, den, torch.full_like(den, float("inf")))  # 0 where den is 0
    if k > 1 and n > 1:  # the cancellation guard of _host._corrgrpo
        top = num.abs().amax(0)
        if bool((largest.mul_(unit) > torch.maximum(den, top) * 5e-5).any()):
            return None
    return _rows_out(num, den, shape)


def _shifted(xt: Array, w: Array | None) -> tuple[Array, Array]:
    """(x - first row of the group) position-major (a new contiguous tensor), and that first row."""
    c = torch.empty(xt.shape, dtype=xt.dtype, device=xt.device)
    torch.sub(xt, xt[:1], out=c)
    ref = xt[0]
    if w is not None:
        c.mul_(w[:, None])
        ref = ref * w[:, None]
    return c, ref


def _moments(c: Array, ref: Array, n: int, rtol: float) -> tuple[Array, Array] | None:
    """Centre ``c`` in place; sums of squares and whether each component varies, or None if not finite."""
    m = c.sum(0).div_(n)
    c.sub_(m)
    ss = c.square().sum(0)
    if not bool(torch.isfinite(ss.sum())):
        return None  # NaN, inf or overflow: the generic path (float64) handles or names them
    # population variance against the mean square of the unshifted values (as _stats.moments)
    threshold = m.add_(ref).square_().add_(ss, alpha=1.0 / n).mul_(rtol * rtol * n)
    return ss, ss > threshold


def _den(spread: Array, eps: float, outside: bool) -> Array:
    return spread.sqrt_().add_(eps) if outside else spread.add_(eps).sqrt_()


def _rows_out(values: Array, den: Array, shape: tuple[int, ...]) -> Array:
    """values / den, written back row-major: ``(n, B)`` -> the scores' leading ``shape``."""
    b = values.shape[1]
    out = torch.empty((b, values.shape[0]), dtype=values.dtype, device=values.device)
    torch.div(values, den, out=out.t())
    return out.reshape(shape)


# --- the group kernel --------------------------------------------------------------------------


class TorchKernel(Kernel):
    """Group kernels for torch tensors (see the module docstring)."""

    def __init__(self, xp: Namespace) -> None:
        super().__init__(xp)

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
        return index, self.segment_sum(ones, index), False

    def segment_sum(self, x: Array, r: RaggedIndex) -> Array:
        return torch.zeros((r.num, *x.shape[1:]), dtype=x.dtype, device=x.device).index_add_(0, r.labels, x)

    def subtract_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return self.gather(g, r).neg_().add_(x)  # the gathered copy is ours

    def divide_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return x.div_(self.gather(g, r))

    def row_dot_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return self.gather(g, r).mul_(x).sum(dim=-1, keepdim=True)  # multiply into the gathered copy

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
