"""Input validation and preparation: one place that turns user input into a :class:`Batch`."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from typing import Any

import numpy as np

from ._groups import Groups, dense_groups, find_runs, ragged_groups
from ._kernels import CHUNK_ROWS, Joined, Kernel, host_route, kernel_for
from ._lib._compat import (
    Array,
    Namespace,
    array_namespace,
    device,
    dtype_kind,
    is_array_api_obj,
    is_lazy_array,
    work_dtype,
)
from ._validation import NAN_POLICIES, SINGLETON_POLICIES, check_choice, check_number

_SHOWN = 10  # how many offending rows an error message names


# Treated as immutable (never assigned after it is made); not ``frozen``: a frozen dataclass's
# constructor costs several times more, microseconds on every call of a small batch.
@dataclass(eq=False)
class Batch:
    """A validated reward batch.

        ``raw`` is ``(B, n, K)`` or ``(N, K)`` with missing (NaN) entries set to 0, ``valid`` marks
        the entries that were present (None when all are), ``weights`` broadcasts against ``raw`` (None:
    no weights were given, every weight is 1).
        ``raw`` is in the scores' own floating dtype until :meth:`pieces` hands the estimators the
        batch in the working ``dtype`` and the kernel's layout (on the host, a piece at a time).
    """

    xp: Namespace
    groups: Groups
    raw: Array
    valid: Array | None
    row_valid: Array | None
    weights: Array | None
    lead_shape: tuple[int, ...]
    out_dtype: Any
    device: Any
    dtype: Any  # the working dtype: float64 wherever the backend holds it
    owns_raw: bool = False  # ``raw`` is an array of ours (never the caller's), see Batch.consumable
    # Powers of two that brought huge or tiny inputs into a safe range (see :func:`power_of_two_scale`):
    # ``raw`` is the scores times ``scale``, ``weights`` the given weights times ``weight_scale``.
    scale: float = 1.0
    weight_scale: float = 1.0
    # The advantages back in the caller's type (a numpy result as a torch tensor: see host_route).
    to_caller: Callable[[Array], Array] | None = None
    # ``raw`` is in the working dtype and layout already and the batch is never cut (:func:`prepare`
    # converted it): the batch is its own one piece, and its advantages the whole result.
    whole: bool = False

    @property
    def unit(self) -> float:
        """What ``weighted`` is multiplied by relative to the caller's weighted scores."""
        return self.scale * self.weight_scale

    @cached_property
    def weighted(self) -> Array:
        return self.raw if self.weights is None else self.raw * self.weights

    @property
    def empty(self) -> bool:
        """No rows (a component axis alone)."""
        return 0 in self.raw.shape[:-1]

    def pieces(self, *, group_local: bool = False) -> Iterator[Batch]:
        """The batch in the working dtype and the kernel's layout: whole, or (``group_local``: for an
        estimator whose groups are computed independently) in pieces of whole groups where the
        batch lies in host memory (see :meth:`_cut`), each piece's working copy made as it is
        reached (so that only one is alive at a time)."""
        if self.whole:
            return iter((self,))
        parts = self._cut() if group_local else None
        return (part._working() for part in (parts or [self]))

    def _working(self) -> Batch:
        raw = self.groups.kernel.working(self.raw, self.dtype)
        return self if raw is self.raw else replace(self, raw=raw, owns_raw=True)

    def consumable(self, x: Array) -> bool:
        """Whether ``x``, ``raw`` or an array made from it, is ours to write over (an estimator that
        reads the batch no further may then work in place)."""
        return x is not self.raw or self.owns_raw

    def _cut(self) -> list[Batch] | None:
        """Whole groups in pieces of about :data:`CHUNK_ROWS` rows, or None to keep the batch whole.

        A pass over a piece that fits the cache costs about half as much per row as one over
        10^7 rows, which keeps the cost per row flat in N. Split: dense batches on the host
        (numpy, torch on the CPU) and host batches whose ids are in runs (verl's layout).
        Accelerators and ``jax.jit`` get the batch whole.
        """
        xp, raw, r, rows = self.xp, self.raw, self.groups.ragged, CHUNK_ROWS
        if r is None:
            step = max(1, rows // max(1, raw.shape[1]))
            if not self.groups.kernel.in_host_memory(raw) or raw.shape[0] <= step:
                return None
            cuts = [*range(0, raw.shape[0], step), raw.shape[0]]
            return [
                self._piece(a, b, dense_groups(xp, (b - a, *raw.shape[1:]), self.dtype, self.device))
                for a, b in itertools.pairwise(cuts)
            ]
        if r.starts is None or raw.shape[0] <= 2 * rows:
            return None
        # cut at the first group start at or after each multiple of ``rows``
        first = np.unique(np.searchsorted(r.starts, np.arange(0, raw.shape[0], rows)))
        bounds = [int(g) for g in first if g < r.num] + [r.num]
        pieces = []
        for ga, gb in itertools.pairwise(bounds):
            a = int(r.starts[ga])
            b = int(r.starts[gb]) if gb < r.num else raw.shape[0]
            starts = r.starts[ga:gb] - a
            member = xp.asarray(starts, dtype=xp.int64, device=self.device)  # host ids: starts is numpy
            index = replace(
                r,
                labels=r.labels[a:b] - ga,
                num=gb - ga,
                member=member,
                size=None if r.size is None else r.size[ga:gb],
                starts=starts,
            )
            pieces.append(
                self._piece(a, b, replace(self.groups, count_g=self.groups.count_g[ga:gb], ragged=index))
            )
        return pieces

    def _piece(self, a: int, b: int, groups: Groups) -> Batch:
        """Rows a..b (whole groups) as a batch of their own."""
        part = slice(a, b)
        return replace(
            self,
            raw=self.raw[part, ...],
            groups=groups,
            valid=None if self.valid is None else self.valid[part, ...],
            row_valid=None if self.row_valid is None else self.row_valid[part, ...],
        )

    def output(self) -> Output:
        """An empty :class:`Output` for the advantages of this batch's :meth:`pieces`."""
        return Output(self, self.groups.kernel.joined(self.raw.shape[0], self.out_dtype))

    def handed_back(self, adv: Array) -> Array:
        """The advantages of a :attr:`whole` batch, ``(rows..., 1)`` as the formula gives them, as the
        result (what an :class:`Output` of one piece gives, without joining anything)."""
        check_fits(adv, self)
        return self.in_callers_shape(self.groups.kernel.output(adv, self.out_dtype))

    def in_callers_shape(self, out: Array) -> Array:
        """Joined advantages in the scores' leading shape and type."""
        out = self.xp.reshape(out, self.lead_shape)
        return out if self.to_caller is None else self.to_caller(out)


def check_fits(adv: Array, batch: Batch) -> None:
    """Refuse by name advantages beyond the output dtype's range (never a silent inf)."""
    if is_lazy_array(adv) or not math.prod(adv.shape):
        return
    kernel = batch.groups.kernel
    largest = limits(batch.xp, batch.out_dtype).max
    # one pass decides the common case: the root of a finite sum of squares bounds every entry
    ss = kernel.sum_of_squares(adv)
    if ss is not None and math.isfinite(ss) and math.sqrt(ss) <= largest:
        return
    top = kernel.max_abs(adv)
    if not top <= largest:  # NaN included
        raise ValueError(
            f"the advantages overflow {batch.out_dtype}: the largest is {top:.4g}, beyond "
            f"its largest finite value {largest:.4g}; pass the scores in a wider dtype or "
            "rescale them"
        )


class Output:
    """The advantages of a batch's pieces, added in order as they are computed, and handed back
    (:meth:`result`) as one array of the scores' type, leading shape, floating dtype and device.

    An advantage too large for the output dtype is an error, never a silent inf.
    """

    def __init__(self, batch: Batch, joined: Joined) -> None:
        self.batch, self.joined = batch, joined

    def add(self, adv: Array) -> None:
        """The (rows..., 1) advantages of the next piece, refused by name if beyond the output dtype."""
        check_fits(adv, self.batch)
        self.joined.add(adv)

    def result(self) -> Array:
        return self.batch.in_callers_shape(self.joined.result())


@dataclass(frozen=True)
class Limits:
    """What the batch needs to know of a floating dtype (see :func:`limits`)."""

    eps: float
    max: float
    lo: float  # magnitudes in [lo, hi] need no rescaling (see power_of_two_scale)
    hi: float
    normal_exponent: int  # e with 2**e the smallest normal number (-1022 in float64)


@cache
def limits(xp: Namespace, dtype: Any) -> Limits:
    """The :class:`Limits` of ``dtype``, computed once per namespace and dtype.

    ``lo``, ``hi``: products of two magnitudes in that range, their squares and sums of many of
    those stay normal and finite (2**-127 .. 2**128 in float64).
    """
    info = xp.finfo(dtype)
    normal = math.frexp(float(info.smallest_normal))[1]
    top = math.frexp(float(info.max))[1]
    return Limits(
        eps=float(info.eps),
        max=float(info.max),
        lo=math.ldexp(1.0, normal // 8),
        hi=math.ldexp(1.0, top // 8),
        normal_exponent=normal - 1,
    )


def resolve_rtol(zero_variance_rtol: float | None, xp: Namespace, dtype: Any) -> float:
    """Default: 64 machine epsilons of the working dtype; 0 gives the exact ``var > 0`` test."""
    if zero_variance_rtol is None:
        return 64.0 * limits(xp, dtype).eps
    return check_number("zero_variance_rtol", zero_variance_rtol)


def prepare(
    scores: Array,
    group_ids: Array | Sequence[int] | None,
    *,
    weights: Array | Sequence[float] | None,
    nan_policy: str,
    singleton: str,
    xp: Namespace | None,
    host: bool = False,
) -> Batch:
    """Validate ``scores`` (and ids, weights) and build the :class:`Batch` the estimators use
    (``host``: work on a torch CPU tensor through a numpy view, see :func:`host_route`)."""
    check_choice("nan_policy", nan_policy, NAN_POLICIES)
    check_choice("singleton", singleton, SINGLETON_POLICIES)
    if not is_array_api_obj(scores):
        raise TypeError(
            f"scores must be an array (numpy, torch, jax, cupy, ...), got {type(scores).__name__}"
        )
    route = host_route(scores, weights, xp) if host else None
    to_caller = None
    if route is not None:
        scores, to_caller = route
        xp = None
    xp, dev, lazy, floating, out_dtype, dtype = _facts(scores, xp)
    _check_shape(scores, ragged=group_ids is not None)
    k = scores.shape[-1]
    lead = tuple(scores.shape[:-1]) if scores.ndim != 2 or group_ids is not None else (scores.shape[0],)

    w = None if weights is None else _weights(weights, k, xp, dtype, dev, lazy)
    if w is not None and not lazy and not is_lazy_array(w) and bool(xp.all(w == 1.0)):
        w = None  # unit weights (TRL passes its reward_weights, ones by default): x * 1 is x, no weighted copy
    # Floating scores stay in their dtype until the end (a large batch on the host gets its working
    # copy a piece at a time, see Batch.pieces); nothing below writes into x.
    owned = not floating
    x = xp.astype(scores, dtype) if owned else scores
    if scores.ndim == 2 and group_ids is None:
        x = xp.reshape(x, (1, *x.shape))
    valid = row_valid = None
    lim = limits(xp, dtype)
    lo, hi = lim.lo, lim.hi
    has_nan, in_range = (
        (True, True)
        if lazy
        else _check_finite(x, nan_policy, dense=group_ids is None, kernel=kernel_for(xp), bounds=(lo, hi))
    )
    if nan_policy == "ignore" and has_nan:  # without NaN the complete-data path is exact and faster
        valid = ~xp.isnan(x)
        x, owned = xp.where(valid, x, 0.0), True
        row_valid = xp.any(valid, axis=-1, keepdims=True)
    scale = weight_scale = 1.0
    if not in_range:
        scale = power_of_two_scale(max_abs(x, xp), lo, hi, lim.normal_exponent)
        if scale != 1.0:  # exact: a power of two (see power_of_two_scale)
            x, owned = xp.astype(x, dtype, copy=False) * scale, True
    if w is not None and not lazy and not is_lazy_array(w):
        weight_scale = power_of_two_scale(max_abs(w, xp), lo, hi, lim.normal_exponent)
        if weight_scale != 1.0:
            w = w * weight_scale

    if group_ids is None:
        groups = dense_groups(xp, tuple(x.shape), dtype, dev)
    else:
        x, valid, row_valid, groups = _ragged_layout(x, valid, row_valid, group_ids, xp, dtype, lazy=lazy)
    if singleton == "raise" and not lazy:
        _check_no_singletons(groups, x, group_ids is None, xp)
    whole = math.prod(x.shape[:-1]) <= CHUNK_ROWS or not groups.kernel.in_host_memory(x)
    if whole:  # never cut: convert now
        staged, x = x, groups.kernel.working(x, dtype)
        owned = owned or x is not staged
    return Batch(
        xp=xp,
        groups=groups,
        raw=x,
        valid=valid,
        row_valid=row_valid,
        weights=None if w is None else xp.reshape(w, (1,) * (x.ndim - 1) + (k,)),
        lead_shape=lead,
        out_dtype=out_dtype,
        device=dev,
        dtype=dtype,
        owns_raw=owned,
        scale=scale,
        weight_scale=weight_scale,
        to_caller=to_caller,
        whole=whole,
    )


# What a numpy array's dtype decides (see :func:`_facts`), found once per dtype.
_NUMPY_FACTS: dict[Any, tuple[Namespace, Any, bool, bool, Any, Any]] = {}


def _facts(scores: Array, xp: Namespace | None) -> tuple[Namespace, Any, bool, bool, Any, Any]:
    """(namespace, device, lazy, floating, output dtype, working dtype) of ``scores``: for a plain
    numpy array a lookup by dtype (the same answers, without five helper calls on every call)."""
    numpy = xp is None and type(scores) is np.ndarray
    if numpy and (found := _NUMPY_FACTS.get(scores.dtype)) is not None:
        return found
    if xp is None:
        xp = array_namespace(scores)
    dev = device(scores)
    kind = dtype_kind(xp, scores.dtype)
    if not kind:
        raise TypeError(f"scores must have a real numeric dtype, got {scores.dtype}")
    floating = kind == "real floating"
    if floating:
        out_dtype = scores.dtype
    else:
        out_dtype = xp.__array_namespace_info__().default_dtypes(device=dev)["real floating"]
    facts = (xp, dev, is_lazy_array(scores), floating, out_dtype, work_dtype(xp, dev))
    if numpy:
        _NUMPY_FACTS[scores.dtype] = facts
    return facts


def _check_shape(scores: Array, *, ragged: bool) -> None:
    if not ragged and scores.ndim not in (2, 3):
        raise ValueError(
            f"scores must be (n, K) for one group or (B, n, K) for B groups, got shape {tuple(scores.shape)}"
            " (pass group_ids for a ragged (N, K) batch)"
        )
    if ragged and scores.ndim != 2:
        raise ValueError(f"with group_ids, scores must be (N, K), got shape {tuple(scores.shape)}")
    if scores.shape[-1] == 0:
        raise ValueError("scores has no reward component (K = 0)")


def _ragged_layout(
    x: Array,
    valid: Array | None,
    row_valid: Array | None,
    group_ids: Array | Sequence[int],
    xp: Namespace,
    dtype: Any,
    *,
    lazy: bool,
) -> tuple[Array, Array | None, Array | None, Groups]:
    """(x, valid, row_valid, groups) of an ``(N, K)`` batch with ``group_ids``: ids in runs of one
    size (verl's layout) make it a dense ``(N / n, n, K)`` batch, with no index at all."""
    dev = device(x)
    ids = _group_ids(group_ids, x.shape[0], xp, dev)
    runs = find_runs(xp, ids)
    n = 0 if runs is None else runs.equal_size()
    if not n:
        return x, valid, row_valid, ragged_groups(xp, ids, dtype, dev, lazy=lazy, runs=runs)
    x = xp.reshape(x, (x.shape[0] // n, n, x.shape[-1]))
    if valid is not None and row_valid is not None:
        valid = xp.reshape(valid, x.shape)
        row_valid = xp.reshape(row_valid, (*x.shape[:-1], 1))
    return x, valid, row_valid, dense_groups(xp, tuple(x.shape), dtype, dev)


def power_of_two_scale(top: float, lo: float, hi: float, normal_exponent: int = -1022) -> float:
    """1, or the power of two that brings a largest magnitude ``top`` outside [lo, hi] to about 1.

    Every estimator is covariant under a common rescaling (its eps rescaled with it), and a power of
    two rescales floating-point values exactly, so huge finite rewards (1e308) give the exact
    advantages instead of inf or NaN, and tiny ones (1e-162) keep their squares normal.
    """
    if top == 0.0 or lo <= top <= hi:
        return 1.0
    exponent = math.frexp(top)[1]  # top = m * 2**exponent, 0.5 <= m < 1
    # Down to about 1; up only to about lo, so that an eps scaled with the data stays finite. The
    # factor itself stays a normal number (jax and GPUs flush subnormals to zero): at least 2**-1022
    # in float64, which leaves 1e308 at about 2.
    target = 0 if top > hi else math.frexp(lo)[1]
    return math.ldexp(1.0, max(target - exponent, normal_exponent))


def max_abs(x: Array, xp: Namespace) -> float:
    """The largest magnitude in a concrete array (0 for an empty one), as a Python float (NaN if
    there is one)."""
    return kernel_for(xp).max_abs(x)


def _weights(
    weights: Array | Sequence[float], k: int, xp: Namespace, dtype: Any, dev: Any, lazy: bool
) -> Array:
    if is_array_api_obj(weights):
        wxp, wdtype = array_namespace(weights), getattr(weights, "dtype", None)
        if not (wxp.isdtype(wdtype, "real floating") or wxp.isdtype(wdtype, "integral")):
            raise TypeError(f"weights must be real numbers, got dtype {wdtype}")
        w = (
            xp.astype(weights, dtype)
            if array_namespace(weights) is xp
            else xp.asarray(weights, dtype=dtype, device=dev)
        )
    else:
        if any(
            isinstance(v, complex) or getattr(getattr(v, "dtype", None), "kind", "") == "c" for v in weights
        ):
            raise TypeError(f"weights must be real numbers, got {list(weights)!r}")
        try:
            w = xp.asarray([float(v) for v in weights], dtype=dtype, device=dev)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"weights must be a sequence of {k} numbers: {exc}") from None
    if w.ndim != 1 or w.shape[0] != k:
        raise ValueError(
            f"weights must have one entry per reward component ({k}), got shape {tuple(w.shape)}"
        )
    if not lazy and not is_lazy_array(w) and not bool(xp.all(xp.isfinite(w))):
        raise ValueError("weights must be finite")
    return w


def _group_ids(group_ids: Array | Sequence[int], n: int, xp: Namespace, dev: Any) -> Array:
    ids: Array
    if is_array_api_obj(group_ids) and array_namespace(group_ids) is xp:
        ids = group_ids
    else:
        try:
            ids = xp.asarray(group_ids, device=dev)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                "group_ids must be integers (map strings with numpy.unique(ids, return_inverse=True)); "
                f"could not convert them: {exc}"
            ) from None
    if ids.ndim != 1:
        raise ValueError(f"group_ids must be one-dimensional, got shape {tuple(ids.shape)}")
    if not xp.isdtype(ids.dtype, "integral"):
        raise TypeError(
            f"group_ids must have an integer dtype, got {ids.dtype} "
            "(map other ids with numpy.unique(ids, return_inverse=True))"
        )
    if ids.shape[0] != n:
        raise ValueError(f"group_ids has length {ids.shape[0]} but scores has {n} rows")
    return ids


def _rows(mask: Array, xp: Namespace, dense: bool) -> str:
    """The first offending row indices, formatted for an error message."""
    found = [tuple(int(i) for i in idx) for idx in zip(*xp.nonzero(mask), strict=True)]
    if dense and mask.shape[0] == 1:  # one (n, K) group: name rows by their index alone
        found = [idx[1:] for idx in found]
    shown = [str(idx[0]) if len(idx) == 1 else str(idx) for idx in found[:_SHOWN]]
    more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    return ", ".join(shown) + more


def _check_finite(
    x: Array, nan_policy: str, *, dense: bool, kernel: Kernel, bounds: tuple[float, float]
) -> tuple[bool, bool]:
    """Raise on inf (and on NaN under ``nan_policy="raise"``); return (has NaN, magnitudes in range).

    One pass decides the common case: the sum of squares is finite only if every entry is, and
    when it lies in [n lo^2, hi^2] no entry needs rescaling (see :func:`limits`).
    """
    xp = kernel.xp
    n = math.prod(x.shape)
    if n == 0:
        return False, True
    lo, hi = bounds
    ss = kernel.sum_of_squares(x)
    if ss is not None:
        if math.isfinite(ss):
            return False, n * lo * lo <= ss <= hi * hi  # 0: all zero, or squares that underflow
    else:  # max and min: no overflow (and no warning) on any backend
        largest = kernel.max_abs(x)
        if math.isfinite(largest):
            return False, largest == 0.0 or lo <= largest <= hi
    infinite = xp.any(xp.isinf(x), axis=-1)
    if bool(xp.any(infinite)):
        raise ValueError(f"scores contain inf in rows {_rows(infinite, xp, dense)}")
    nan = xp.any(xp.isnan(x), axis=-1)
    has_nan = bool(xp.any(nan))
    if has_nan and nan_policy == "raise":
        raise ValueError(
            f"scores contain NaN in rows {_rows(nan, xp, dense)} "
            "(pass nan_policy='ignore' to leave missing rewards out of the statistics)"
        )
    return has_nan, False  # a finite sum of squares that overflowed, or NaN: measure exactly


def _check_no_singletons(groups: Groups, x: Array, dense: bool, xp: Namespace) -> None:
    count = xp.broadcast_to(groups.count, (*x.shape[:-1], 1))[..., 0]
    single = count < 2
    if bool(xp.any(single)):
        raise ValueError(
            f"groups of one rollout at rows {_rows(single, xp, dense)} "
            "(singleton='raise'; the default singleton='zero' gives them advantage 0)"
        )
