"""Input validation and preparation: one place that turns user input into a :class:`Batch`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from ._groups import Groups, dense_groups, find_runs, ragged_groups
from ._lib._compat import (
    Array,
    Namespace,
    array_namespace,
    device,
    is_array_api_obj,
    is_lazy_array,
    is_numpy_namespace,
    is_torch_namespace,
    work_dtype,
)

NAN_POLICIES = ("raise", "ignore")
SINGLETON_POLICIES = ("zero", "raise")
EPS_PLACEMENTS = ("inside", "outside")
_SHOWN = 10  # how many offending rows an error message names


# Rows per piece when a group-local estimator runs over a large dense batch in pieces.
CHUNK_ROWS = 65536


@dataclass(frozen=True)
class Batch:
    """A validated reward batch in the working dtype.

    ``raw`` is ``(B, n, K)`` or ``(N, K)`` with missing (NaN) entries set to 0, ``valid`` marks
    the entries that were present (None when all are), ``weights`` broadcasts against ``raw``.
    """

    xp: Namespace
    groups: Groups
    raw: Array
    valid: Array | None
    row_valid: Array | None
    weights: Array
    lead_shape: tuple[int, ...]
    out_dtype: Any
    device: Any
    unit_weights: bool = False  # no weights given: ``weighted`` is ``raw`` itself

    @cached_property
    def weighted(self) -> Array:
        return self.raw if self.unit_weights else self.raw * self.weights

    def chunks(self, rows: int = CHUNK_ROWS) -> list[Batch] | None:
        """Whole groups in pieces of about ``rows`` rows, or None to keep the batch whole.

        A pass over a piece that fits the cache costs about half as much per row as one over
        10^7 rows, which keeps the cost per row flat in N. Split: dense batches on the host
        (numpy, torch on the CPU) and host batches whose ids are in runs (verl's layout).
        Accelerators and ``jax.jit`` get the batch whole.
        """
        xp, raw, r = self.xp, self.raw, self.groups.ragged
        if r is None:
            on_host = is_numpy_namespace(xp) or (is_torch_namespace(xp) and raw.device.type == "cpu")
            step = max(1, rows // max(1, raw.shape[1]))
            if not on_host or raw.shape[0] <= step:
                return None
            cuts = [*range(0, raw.shape[0], step), raw.shape[0]]
            return [self._piece(a, b, dense_groups(xp, (b - a, *raw.shape[1:]), raw.dtype, self.device))
                    for a, b in itertools.pairwise(cuts)]
        if r.starts is None or raw.shape[0] <= 2 * rows:
            return None
        import numpy as np

        # cut at the first group start at or after each multiple of ``rows``
        first = np.unique(np.searchsorted(r.starts, np.arange(0, raw.shape[0], rows)))
        bounds = [int(g) for g in first if g < r.num] + [r.num]
        pieces = []
        for ga, gb in itertools.pairwise(bounds):
            a = int(r.starts[ga])
            b = int(r.starts[gb]) if gb < r.num else raw.shape[0]
            starts = r.starts[ga:gb] - a
            member = starts if is_numpy_namespace(xp) else xp.asarray(starts.astype(np.int64), device=self.device)
            index = replace(r, labels=r.labels[a:b] - ga, num=gb - ga, member=member,
                            size=None if r.size is None else r.size[ga:gb], starts=starts)
            pieces.append(self._piece(a, b, replace(self.groups, count_g=self.groups.count_g[ga:gb], ragged=index)))
        return pieces

    def _piece(self, a: int, b: int, groups: Groups) -> Batch:
        """Rows a..b (whole groups) as a batch of their own."""
        part = slice(a, b)
        return replace(self, raw=self.raw[part, ...], groups=groups,
                       valid=None if self.valid is None else self.valid[part, ...],
                       row_valid=None if self.row_valid is None else self.row_valid[part, ...])

    def finish(self, adv: Array) -> Array:
        """(rows..., 1) internal advantages -> the scores' leading shape and floating dtype."""
        xp = self.xp
        return xp.astype(xp.reshape(adv, self.lead_shape), self.out_dtype)


def check_choice(name: str, value: object, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")


def check_nonnegative(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


def check_ddof(ddof: int) -> int:
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise ValueError(f"ddof must be a non-negative integer, got {ddof!r}")
    return ddof


def resolve_rtol(zero_variance_rtol: float | None, xp: Namespace, dtype: Any) -> float:
    """Default: 64 machine epsilons of the working dtype; 0 gives the exact ``var > 0`` test."""
    if zero_variance_rtol is None:
        return 64.0 * float(xp.finfo(dtype).eps)
    return check_nonnegative("zero_variance_rtol", zero_variance_rtol)


def prepare(
    scores: Array,
    group_ids: Array | Sequence[int] | None,
    *,
    weights: Array | Sequence[float] | None,
    nan_policy: str,
    singleton: str,
    xp: Namespace | None,
) -> Batch:
    """Validate ``scores`` (and ids, weights) and build the :class:`Batch` the estimators use."""
    check_choice("nan_policy", nan_policy, NAN_POLICIES)
    check_choice("singleton policy", singleton, SINGLETON_POLICIES)
    if not is_array_api_obj(scores):
        raise TypeError(
            f"scores must be an array (numpy, torch, jax, cupy, ...), got {type(scores).__name__}"
        )
    if xp is None:
        xp = array_namespace(scores)
    dev = device(scores)
    lazy = is_lazy_array(scores)
    if not (xp.isdtype(scores.dtype, "real floating") or xp.isdtype(scores.dtype, "integral")):
        raise TypeError(f"scores must have a real numeric dtype, got {scores.dtype}")
    if group_ids is None and scores.ndim not in (2, 3):
        raise ValueError(
            f"scores must be (n, K) for one group or (B, n, K) for B groups, got shape {tuple(scores.shape)}"
            " (pass group_ids for a ragged (N, K) batch)"
        )
    if group_ids is not None and scores.ndim != 2:
        raise ValueError(f"with group_ids, scores must be (N, K), got shape {tuple(scores.shape)}")
    k = scores.shape[-1]
    if k == 0:
        raise ValueError("scores has no reward component (K = 0)")
    if xp.isdtype(scores.dtype, "real floating"):
        out_dtype = scores.dtype
    else:
        out_dtype = xp.__array_namespace_info__().default_dtypes(device=dev)["real floating"]
    dtype = work_dtype(xp, dev)
    lead = tuple(scores.shape[:-1]) if scores.ndim != 2 or group_ids is not None else (scores.shape[0],)

    w = _weights(weights, k, xp, dtype, dev, lazy)
    # No copy when the scores already have the working dtype: nothing below writes into x.
    x = xp.astype(scores, dtype, copy=False)
    if scores.ndim == 2 and group_ids is None:
        x = xp.reshape(x, (1, *x.shape))
    valid = row_valid = None
    if not lazy:
        _check_finite(x, nan_policy, dense=group_ids is None, xp=xp)
    if nan_policy == "ignore":
        valid = ~xp.isnan(x)
        x = xp.where(valid, x, xp.zeros_like(x))
        row_valid = xp.any(valid, axis=-1, keepdims=True)

    if group_ids is None:
        groups = dense_groups(xp, tuple(x.shape), dtype, dev)
    else:
        ids = _group_ids(group_ids, scores.shape[0], xp, dev)
        runs = find_runs(xp, ids)
        n = 0 if runs is None else runs.equal_size()
        if n:  # ids in runs of one size (verl's layout): the dense path, no index at all
            x = xp.reshape(x, (x.shape[0] // n, n, k))
            if valid is not None:
                valid = xp.reshape(valid, x.shape)
                row_valid = xp.reshape(row_valid, (*x.shape[:-1], 1))
            groups = dense_groups(xp, tuple(x.shape), dtype, dev)
        else:
            groups = ragged_groups(xp, ids, dtype, dev, lazy=lazy, runs=runs)
    if singleton == "raise" and not lazy:
        _check_no_singletons(groups, x, group_ids is None, xp)
    return Batch(
        xp=xp,
        groups=groups,
        raw=x,
        valid=valid,
        row_valid=row_valid,
        weights=xp.reshape(w, (1,) * (x.ndim - 1) + (k,)),
        lead_shape=lead,
        out_dtype=out_dtype,
        device=dev,
        unit_weights=weights is None,
    )


def _weights(
    weights: Array | Sequence[float] | None, k: int, xp: Namespace, dtype: Any, dev: Any, lazy: bool
) -> Array:
    if weights is None:
        return xp.ones((k,), dtype=dtype, device=dev)
    if is_array_api_obj(weights):
        w = (
            xp.astype(weights, dtype)
            if array_namespace(weights) is xp
            else xp.asarray(weights, dtype=dtype, device=dev)
        )
    else:
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


def _check_finite(x: Array, nan_policy: str, *, dense: bool, xp: Namespace) -> None:
    # One reduction without a temporary decides the common case: the sum is finite only if
    # every entry is (a finite sum that overflows falls through to the exact checks below).
    if bool(xp.isfinite(xp.sum(x))):
        return
    infinite = xp.any(xp.isinf(x), axis=-1)
    if bool(xp.any(infinite)):
        raise ValueError(f"scores contain inf in rows {_rows(infinite, xp, dense)}")
    if nan_policy == "raise":
        nan = xp.any(xp.isnan(x), axis=-1)
        if bool(xp.any(nan)):
            raise ValueError(
                f"scores contain NaN in rows {_rows(nan, xp, dense)} "
                "(pass nan_policy='ignore' to leave missing rewards out of the statistics)"
            )


def _check_no_singletons(groups: Groups, x: Array, dense: bool, xp: Namespace) -> None:
    count = xp.broadcast_to(groups.count, (*x.shape[:-1], 1))[..., 0]
    single = count < 2
    if bool(xp.any(single)):
        raise ValueError(
            f"groups of one rollout at rows {_rows(single, xp, dense)} "
            "(singleton='raise'; the default singleton='zero' gives them advantage 0)"
        )
