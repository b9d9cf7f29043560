"""numpy: the group kernel for numpy arrays (and, through zero-copy views, torch tensors on the
CPU), and the labelling of ids on the host.

**Layout.** A dense batch is worked on position-major: the ``(B, n, K)`` array the maths sees is a
view of an ``(n, K, B)`` block (:meth:`NumpyKernel.working`), so that the sums over a group's rows,
the sums over the components and the broadcasts of group values all run along the long batch
axis; over a short innermost axis they are several times slower than a copy. The rows are added
in order whatever K is, so a constant extra component leaves the others' statistics bit for bit
unchanged.

**Ragged groups** are labelled ``0..G-1`` without sorting where possible (ids already in runs, or
ids in a compact range, by direct addressing) and summed with ``bincount`` (``reduceat`` for
runs), one component column at a time, a piece of rows at a time; gathers and updates write into
arrays of ours.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._lib._compat import Array, Namespace
from ._generic import SMALL_GROUP, Joined, Kernel, RaggedIndex, Runs

# Ids in a range this many times the row count are labelled by direct addressing (no sort).
_DIRECT_SPAN = 4
# Rows per piece where a row-level temporary is taken in pieces (a piece of float64 is 128 KiB).
_PIECE = 1 << 14

# --- the group kernel --------------------------------------------------------------------------


class NumpyKernel(Kernel):
    """Group kernels for numpy arrays (see the module docstring)."""

    shares_constants = True  # (its constants are read-only arrays, see _constant)

    def __init__(self, xp: Namespace) -> None:
        super().__init__(xp)

    def working(self, x: Array, dtype: Any) -> Array:
        """``x`` in ``dtype``; a dense ``(B, n, K)`` batch as a view of a new position-major
        ``(n, K, B)`` block (see the module docstring), unless it is one already."""
        if x.ndim != 3:
            return x.astype(dtype, copy=False)
        if x.dtype == dtype and _position_major(x):
            return x
        # a C-ordered copy of the (n, K, B) view: written in the block's order, a contiguous write
        return x.transpose(1, 2, 0).astype(dtype, order="C").transpose(2, 0, 1)

    def in_host_memory(self, x: Array) -> bool:
        return True

    def constant(self, value: float, ndim: int, dtype: Any, dev: Any) -> Array:
        return _constant(value, ndim, np.dtype(dtype))

    def sum_of_squares(self, x: Array) -> float | None:
        if x.dtype not in (np.float32, np.float64):
            return None
        flat = x.ravel(order="K")  # a view of any contiguous block, whatever its axis order
        return float(np.vdot(flat, flat))  # one BLAS pass

    def max_abs(self, x: Array) -> float:
        return max(float(x.max()), -float(x.min())) if x.size else 0.0

    def output(self, x: Array, dtype: Any) -> Array:
        # (the caller has checked that the values fit ``dtype``: no overflow here)
        return np.asarray(x, dtype=dtype, order="C")  # row-major, as the caller's scores

    def joined(self, rows: int, dtype: Any) -> Joined:
        return _HostJoined(self, rows, dtype)

    def sum_k(self, x: Array) -> Array:
        if x.shape[-1] == 1:  # the sum of one component is the component: no copy (never written)
            return x
        if _position_major(x):  # K slices of the long axis, added in order
            return np.add.reduce(x, axis=-1, keepdims=True)
        return np.einsum("...k->...", x)[..., None]  # one tight loop over a short last axis

    def batch_sum_sq(self, x: Array, axes: tuple[int, ...]) -> Array:
        return np.add.reduce(x * x, axis=axes, keepdims=True)

    def batch_row_dot(self, x: Array, g: Array) -> Array:
        return np.einsum("...k,...k->...", x, np.broadcast_to(g, x.shape))[..., None]

    def dense_sum(self, x: Array) -> Array:
        return _dense_sum(x, None)

    def dense_sum_sq(self, x: Array) -> Array:
        return _dense_sum(x, x)

    def dense_row_dot(self, x: Array, g: Array) -> Array:
        return np.einsum("bnk,bk->bn", x, g[:, 0, :])[..., None]

    def find_runs(self, ids: Array) -> Runs | None:
        return find_runs(ids)

    def index(
        self, ids: Array, runs: Runs | None, dtype: Any, *, lazy: bool
    ) -> tuple[RaggedIndex, Array, bool]:
        index = label(ids, runs)
        assert index.size is not None
        return index, index.size[:, None].astype(dtype), small(index.size)

    def lazy_shift(self, r: RaggedIndex) -> bool:
        # scattered groups: a piece of rows at a time (ids in runs: contiguous segment sums of the
        # shifted copy are faster)
        return r.starts is None

    def _eager(self, x: Array, r: RaggedIndex, ref: Array | None) -> tuple[Array, Array | None]:
        """(x, ref) as the row functions below take them: with runs, x - ref made first."""
        return (x, ref) if ref is None or r.starts is None else (self._minus_ref(x, r, ref), None)

    def group_sum(self, x: Array, r: RaggedIndex) -> Array:
        return segment_sums(x, r, square=False)

    def segment_sum(self, x: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        x, ref = self._eager(x, r, ref)
        return segment_sums(x, r, square=False, ref=ref)

    def segment_sum_sq(self, x: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        x, ref = self._eager(x, r, ref)
        return segment_sums(x, r, square=True, ref=ref)

    def segment_sum_both(self, x: Array, r: RaggedIndex, *, ref: Array | None = None) -> tuple[Array, Array]:
        x, ref = self._eager(x, r, ref)
        return segment_sums_both(x, r, ref)

    def gather(self, g: Array, r: RaggedIndex) -> Array:
        if g.ndim == 2 and g.shape[1] > 1:
            # Column-major rows: each component's column is contiguous, which is what the
            # per-column bincount and the elementwise updates want.
            out = np.empty((g.shape[1], r.labels.shape[0]), dtype=g.dtype)
            for k, column in enumerate(_by_column(g)):
                _take_rows(column, r.labels, out[k])
            return out.T
        return _take_rows(g, r.labels, np.empty((r.labels.shape[0], *g.shape[1:]), dtype=g.dtype))

    def subtract_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return shift_divide_rows(x, g, None, r, in_place=False)

    def divide_gathered(self, x: Array, g: Array, r: RaggedIndex) -> Array:
        return shift_divide_rows(x, None, g, r, in_place=True)

    def shift_divide_gathered(
        self,
        x: Array,
        sub: Array | None,
        div: Array | None,
        r: RaggedIndex,
        *,
        in_place: bool,
        ref: Array | None = None,
    ) -> Array:
        x, lazy = self._eager(x, r, ref)
        if lazy is None and ref is not None:  # x - ref is ours
            in_place = True
        return shift_divide_rows(x, sub, div, r, in_place=in_place and lazy is None, ref=lazy)

    def row_dot_gathered(self, x: Array, g: Array, r: RaggedIndex, *, ref: Array | None = None) -> Array:
        x, ref = self._eager(x, r, ref)
        return row_dot_rows(x, g, r, ref)

    def sum_k_gathered(self, x: Array, r: RaggedIndex, ref: Array) -> Array:
        if r.starts is not None:
            return self.sum_k(self._minus_ref(x, r, ref))
        return sum_k_rows(x, ref, r)


@functools.lru_cache(maxsize=256)
def _constant(value: float, ndim: int, dtype: Any) -> Array:
    """One read-only array per value, shape and dtype: made once (a small call would spend more on
    ``np.full`` than on a statistic)."""
    out = np.full((1,) * ndim, value, dtype=dtype)
    out.setflags(write=False)
    return out


class _HostJoined(Joined):
    """Each part written into one output as it comes (a piece's result is freed before the next
    piece is computed); a part that is the whole result is converted at the end."""

    def __init__(self, kernel: Kernel, rows: int, dtype: Any) -> None:
        super().__init__(kernel, rows, dtype)
        self.out: Array | None = None
        self.at = 0

    def add(self, part: Array) -> None:
        if self.out is None:
            if part.shape[0] == self.rows:
                self.parts.append(part)
                return
            self.out = np.empty((self.rows, *part.shape[1:]), dtype=self.dtype)
        self.out[self.at : self.at + part.shape[0]] = part  # (checked by the caller to fit ``dtype``)
        self.at += part.shape[0]

    def result(self) -> Array:
        return super().result() if self.out is None else self.out


# Ragged groups on the host, a piece of rows at a time: group values are gathered a piece at a
# time, never as a copy of the batch. ``ref`` (group level): the functions take x - ref[labels]
# in place of x, computed a piece at a time (the values shifted by a row of their group, as
# :func:`corrgrpo_core._stats.moments` takes them, without a shifted copy of the batch).


def _pieces(r: RaggedIndex, rows: int) -> Iterator[tuple[int, int, Array]]:
    """(a, b, labels of rows a..b in numpy's index type): each piece's labels converted once."""
    for a in range(0, rows, _PIECE):
        yield a, a + _PIECE, r.labels[a : a + _PIECE].astype(np.intp, copy=False)


def _by_column(g: Array) -> Array:
    """Group-level ``g`` (num, ...) as (columns, num), each column contiguous (a copy of the group
    level where it has several columns). np.take copies a strided source whole before it gathers,
    so a gather of a piece of rows from ``g[:, k]`` would copy all of column k every time."""
    return np.ascontiguousarray(np.reshape(g, (g.shape[0], -1)).T)


def _column(x: Array, k: int, ref_t: Array | None, labels: Array, a: int, b: int) -> Array:
    """Rows a..b of column k of x (minus column k of ``ref_t``, :func:`_by_column` of the group
    level, at each row's group, ``labels`` theirs: a new array)."""
    part = x[a:b, k]
    if ref_t is None:
        return part
    shifted = np.take(ref_t[k], labels, mode="clip")
    return np.subtract(part, shifted, out=shifted)  # into the gathered piece: one temporary


def shift_divide_rows(
    x: Array,
    sub: Array | None,
    div: Array | None,
    r: RaggedIndex,
    *,
    in_place: bool,
    ref: Array | None = None,
) -> Array:
    """((x - ref) - sub) / div over the rows (None: a term left out): a new array, or with
    ``in_place`` (only without ``ref``) written into x."""
    if in_place and ref is not None:
        raise ValueError("shift_divide_rows: in_place would write the unshifted values")
    parts = [g for g in (sub, div, ref) if g is not None]
    sub_t, div_t, ref_t = (None if g is None else _by_column(g) for g in (sub, div, ref))
    # (a new array is column-major for several components, as the gathers: contiguous columns)
    columns = x.ndim == 2 and x.shape[1] > 1
    out = x if in_place else np.empty(x.shape, dtype=np.result_type(x, *parts), order="F" if columns else "C")
    # (rows, columns) views: row-level arrays are (N, K); anything else is taken as C-ordered rows
    cols, dest = (x, out) if x.ndim == 2 else (x.reshape(x.shape[0], -1), out.reshape(out.shape[0], -1))
    for a, b, labels in _pieces(r, x.shape[0]):
        for k in range(cols.shape[1]):  # a column at a time: contiguous pieces, one-dimensional loops
            piece = dest[a:b, k]
            if ref_t is not None:
                np.subtract(cols[a:b, k], np.take(_col(ref_t, k), labels, mode="clip"), out=piece)
            elif not in_place:
                piece[...] = cols[a:b, k]
            if sub_t is not None:
                piece -= np.take(_col(sub_t, k), labels, mode="clip")
            if div_t is not None:
                piece /= np.take(_col(div_t, k), labels, mode="clip")
    return out


def _col(g_t: Array, k: int) -> Array:
    """Column k of ``g_t`` (:func:`_by_column` of a group-level array; its only column where it
    broadcasts over the components)."""
    return g_t[k if g_t.shape[0] > 1 else 0]


def row_dot_rows(x: Array, g: Array, r: RaggedIndex, ref: Array | None = None) -> Array:
    """(N, 1): sum_k (x - ref)_ik g_(label i) k, a piece of rows and a column at a time."""
    out = np.zeros((x.shape[0], 1), dtype=np.result_type(x, g))
    g_t, ref_t = _by_column(g), None if ref is None else _by_column(ref)
    for a, b, labels in _pieces(r, x.shape[0]):
        rows = out[a:b, 0]
        for k in range(x.shape[1]):
            scale = np.take(g_t[k], labels, mode="clip")
            rows += np.multiply(_column(x, k, ref_t, labels, a, b), scale, out=scale)
    return out


def sum_k_rows(x: Array, ref: Array, r: RaggedIndex) -> Array:
    """(N, 1): sum_k (x - ref)_ik, a new array, the components added in order."""
    out = np.empty((x.shape[0], 1), dtype=np.result_type(x, ref))
    ref_t = _by_column(ref)
    for a, b, labels in _pieces(r, x.shape[0]):
        rows = out[a:b, 0]
        rows[...] = _column(x, 0, ref_t, labels, a, b)
        for k in range(1, x.shape[1]):
            rows += _column(x, k, ref_t, labels, a, b)
    return out


def _take_rows(g: Array, labels: Array, out: Array | None = None) -> Array:
    """g[labels] along axis 0 (into ``out``), in pieces of rows: labels of any integer dtype (int32
    included) are converted to numpy's index type a piece at a time, never as a copy of the batch."""
    if labels.dtype == np.intp or labels.shape[0] <= _PIECE:
        return np.take(g, labels, axis=0, out=out, mode="clip")  # labels are in range: no bounds copy
    if out is None:
        out = np.empty((labels.shape[0], *g.shape[1:]), dtype=g.dtype)
    for a in range(0, labels.shape[0], _PIECE):
        np.take(g, labels[a : a + _PIECE], axis=0, out=out[a : a + _PIECE], mode="clip")
    return out


def _position_major(x: Array) -> bool:
    """Whether the long batch axis of a ``(B, n, K)`` array is its contiguous one (B > 1)."""
    return bool(x.ndim == 3 and x.shape[0] > 1 and x.strides[0] == x.itemsize)


def _dense_sum(x: Array, y: Array | None) -> Array:
    """(B, 1, K) sums over axis 1 of x (or of x * y), each in row order whatever the layout.

    The order matters: a constant extra component must leave the others' statistics bit for
    bit unchanged. numpy adds a strided axis in order but vectorises a contiguous one (pairwise),
    so a group axis that is contiguous (one component, row-major) takes the last entry of a
    running sum instead.
    """
    if x.shape[1] > 1 and x.strides[1] == x.itemsize:
        v = x if y is None else x * y
        return np.cumsum(v, axis=1)[:, -1:, :]
    if y is None:
        return np.add.reduce(x, axis=1, keepdims=True)
    if x.size <= _PIECE:  # small: a temporary costs less than einsum's Python-level parsing
        return np.add.reduce(x * y, axis=1, keepdims=True)
    return np.einsum("bnk,bnk->bk", x, y)[:, None, :]


def segment_sums(x: Array, r: RaggedIndex, *, square: bool, ref: Array | None = None) -> Array:
    """(num, ...) float64 sums of x (or x * x) per label, one column at a time (x - ref[labels]
    in place of x where ``ref`` is given)."""
    return _segment_sums(x, r, ref, (square,))[0]


def segment_sums_both(x: Array, r: RaggedIndex, ref: Array | None = None) -> tuple[Array, Array]:
    """The sums and the sums of squares of :func:`segment_sums`, in one pass over x."""
    sums, squares = _segment_sums(x, r, ref, (False, True))
    return sums, squares


def _segment_sums(x: Array, r: RaggedIndex, ref: Array | None, squares: tuple[bool, ...]) -> list[Array]:
    """Per label, for each entry of ``squares``: the float64 sums of x (True: of x * x).

    Scattered labels: in pieces of rows at least as long as the group level (unless a lone sum
    of intp labels needs none), so that a piece's temporaries are a fraction of the column while
    its partial sums cost at most one more pass over the group level; a piece's labels are
    converted to numpy's index type once, for its gathers and its sums alike.
    """
    cols = np.reshape(x, (x.shape[0], -1))
    rows, num = cols.shape[0], r.num
    outs = [np.zeros((num, cols.shape[1]), dtype=np.float64) for _ in squares]
    whole = squares == (False,) and ref is None and r.labels.dtype == np.intp
    piece = max(rows, 1) if whole else max(_PIECE, num)
    ref_t = None if ref is None else _by_column(ref)
    for k in range(cols.shape[1]):  # one column at a time: the same sums whatever K is
        if r.starts is not None and ref is None:  # runs: contiguous segments, no scattered adds
            col = cols[:, k]
            for out, square in zip(outs, squares, strict=True):
                out[:, k] = np.add.reduceat(col * col if square else col, r.starts)
            continue
        for a in range(0, max(rows, 1), piece):
            labels = r.labels[a : a + piece].astype(np.intp, copy=False)
            part = _column(cols, k, ref_t, labels, a, a + piece)
            for out, square in zip(outs, squares, strict=True):
                weights = part * part if square else part
                out[:, k] += np.bincount(labels, weights=weights, minlength=num)
    return [np.reshape(out, (num, *x.shape[1:])) for out in outs]


def small(size: Array) -> bool:
    """Whether every group of these sizes has at most :data:`SMALL_GROUP` rows."""
    return size.shape[0] == 0 or int(size.max()) <= SMALL_GROUP


# --- labelling ids on the host -------------------------------------------------------------


def find_runs(ids: Array) -> Runs | None:
    """The runs when every integer id forms one run of adjacent rows, else None. O(N), no sort.

    Scattered ids cost a comparison of neighbours and a count over the run ids; the row labels
    and run starts are built only once the ids are known to form runs.
    """
    if ids.shape[0] == 0:
        return None
    head = np.empty(ids.shape[0], dtype=bool)  # the first row of each run
    head[0] = True
    np.not_equal(ids[1:], ids[:-1], out=head[1:])
    run_ids = ids[head]
    if run_ids.shape[0] > 1 and not _monotone(run_ids) and _repeats(run_ids):
        return None  # some id comes back after another: not runs
    del run_ids
    labels = np.cumsum(head, dtype=np.intp)
    labels -= 1
    return Runs(starts=np.flatnonzero(head), labels=labels)


def _monotone(values: Array) -> bool:
    """Strictly increasing or strictly decreasing: no value repeats, found without a count."""
    return bool(np.all(values[1:] > values[:-1])) or bool(np.all(values[1:] < values[:-1]))


def _offset(values: Array, lo: int) -> Array:
    """values - lo, in [0, span): the values themselves where lo is 0 (no copy), else a new array
    of 8-byte integers (no overflow over the span)."""
    if lo == 0:
        return values
    wide = values.astype(np.int64 if values.dtype.kind == "i" else np.uint64)
    wide -= wide.dtype.type(lo)
    return wide


def _repeats(values: Array) -> bool:
    """Whether some value occurs twice: a table of the values seen for a compact range (a byte per
    value of the span), else a sort."""
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < _DIRECT_SPAN * values.shape[0]:
        seen, key = np.zeros(hi - lo + 1, dtype=bool), _offset(values, lo)
        for a in range(0, key.shape[0], _PIECE):  # index-type pieces: an int32 index is slow here
            seen[key[a : a + _PIECE].astype(np.intp, copy=False)] = True
        return int(np.count_nonzero(seen)) < int(values.shape[0])
    return bool(np.unique(values).shape[0] != values.shape[0])


def _label_type(n: int) -> Any:
    """The labels' dtype for n rows: int32 where every label fits (half the memory of intp)."""
    return np.dtype(np.int32) if n <= np.iinfo(np.int32).max else np.dtype(np.intp)


def label(ids: Array, runs: Runs | None) -> RaggedIndex:
    """Labels 0..G-1 of integer ids without a sort when they are in runs (``runs``) or in a compact range."""
    n = ids.shape[0]
    if n == 0:
        empty = np.zeros(0, dtype=np.intp)
        return RaggedIndex(labels=empty, num=0, member=empty, size=empty)
    if runs is not None:
        starts, labels = runs.starts, runs.labels
        size = np.diff(np.append(starts, n))
        return RaggedIndex(labels=labels, num=int(starts.shape[0]), member=starts, size=size, starts=starts)
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo < _DIRECT_SPAN * n:  # direct addressing: O(N + span), no comparison sort
        key = _offset(ids, lo)  # in [0, span)
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[key] = True
        num = int(np.count_nonzero(present))
        if num == present.shape[0]:  # every value of the span is used: they are the labels
            # (the ids themselves when 0..G-1, int32 or int64; never written)
            labels = key if key.dtype in (np.int32, np.intp) else key.astype(_label_type(n))
        else:
            table = np.cumsum(present, dtype=_label_type(n))
            table -= 1
            labels = table[key]
    else:
        uniq, labels = np.unique(ids, return_inverse=True)
        labels = labels.astype(_label_type(n))
        num = int(uniq.shape[0])
    size = np.zeros(num, dtype=np.intp)
    member = np.empty(num, dtype=np.intp)
    for a in range(0, n, _PIECE):  # pieces: no row-level copy of int32 labels, no row numbers
        part = labels[a : a + _PIECE]
        size += np.bincount(part, minlength=num)
        member[part] = np.arange(a, a + part.shape[0], dtype=np.intp)  # any row of the group: its shift
    return RaggedIndex(labels=labels, num=num, member=member, size=size)


def _neighbours_differ(ids: Array) -> Array | None:
    """(N - 1,) bool: where the id changes between neighbours; None for ids whose ``!=`` is not a
    plain bool per row (arrays as ids, say)."""
    try:
        change = np.asarray(ids[1:] != ids[:-1], dtype=bool)
    except (TypeError, ValueError):
        return None
    return change if change.shape == (ids.shape[0] - 1,) else None


def factorize(ids: Array) -> Array:
    """Labels 0..G-1 in order of first appearance of a 1-d numpy array of hashable ids (N >= 1).

    Runs of one id are hashed once (one comparison of neighbours finds them); the run heads are
    factorised with a dict lookup mapped in C (no Python frame per row), never sorted.
    Scattered ids (runs of one row, mostly) are hashed in place, every row: no array of heads, no
    run index. Labels are int32 up to 2**31 rows, numbered as the ids are first seen (a
    ``defaultdict`` whose factory is a counter: no table over the runs).
    """
    n = ids.shape[0]
    change = _neighbours_differ(ids)
    runs = n if change is None else int(np.count_nonzero(change)) + 1
    if runs > n // 2 or change is None:  # hashing every row costs less than heads and a run index
        runs = n
    heads = ids if runs == n or change is None else ids[np.concatenate(([True], change))]
    if heads.dtype != object:
        heads = heads.tolist()  # numpy scalars -> Python values: hashed as the Python values are
    # Each new id takes the next label as it is first seen: labels 0..G-1 in order of first appearance.
    seen: dict[Any, int] = collections.defaultdict(itertools.count().__next__)
    kind = _label_type(n)
    try:
        labels = np.fromiter(map(seen.__getitem__, heads), dtype=kind, count=runs)
    except TypeError as exc:
        raise TypeError(f"group ids must be hashable: {exc}") from None
    del heads, seen
    if runs == n:
        return labels
    assert change is not None  # (runs < n)
    run_of_row = np.empty(n, dtype=kind)  # each row's run
    run_of_row[0] = 0
    np.cumsum(change, out=run_of_row[1:])
    return _take_rows(labels, run_of_row, run_of_row)


def _addresses(ids: Array) -> Array | None:
    """The addresses of the objects a contiguous 1-d object array holds (a view of its pointers, valid
    while ``ids`` lives), else None."""
    if ids.dtype != object or ids.ndim != 1 or not ids.flags.c_contiguous or ids.shape[0] == 0:
        return None
    return np.frombuffer((ctypes.c_char * ids.nbytes).from_address(ids.ctypes.data), dtype=np.uintp)


def _dense_by_identity(ids: Array) -> int | None:
    """n when the object ids lie in runs of n >= 2 rows that each hold one object, and the runs' ids
    are distinct values; None where this cannot decide (the caller then compares values).

    verl repeats each prompt's uid object over its rollouts, so the runs are found from the
    objects' addresses in one vectorised pass, and only one id per run is hashed: no Python
    comparison per row. (An id equal to itself is assumed, as for every hashable group id.)
    """
    address = _addresses(ids)
    if address is None:
        return None
    n = int(np.argmax(address != address[0]))  # the first row holding another object
    if n < 2 or ids.shape[0] % n:
        return None
    block = address.reshape(-1, n)
    if not bool((block == block[:, :1]).all()):
        return None
    heads = ids[::n].tolist()
    try:
        return n if len(set(heads)) == len(heads) else None
    except TypeError:
        return 0


def dense_group_size(ids: Array) -> int:
    """n when 1-d host ids (any hashable type) form runs of n >= 2 adjacent rows each, else 0."""
    rows = ids.shape[0] if ids.ndim == 1 else 0
    if rows < 2:
        return 0
    found = _dense_by_identity(ids)
    if found is not None:
        return found
    change = _neighbours_differ(ids)
    if change is None:
        return 0
    runs = int(np.count_nonzero(change)) + 1
    n = rows // runs
    if n < 2 or n * runs != rows:  # scattered ids stop here, after one comparison of neighbours
        return 0
    ends = np.flatnonzero(change)  # the last row of each run but the final one
    if not bool(np.all(ends == np.arange(n - 1, rows - 1, n))):
        return 0
    heads = ids[::n].tolist()
    try:
        return n if len(set(heads)) == runs else 0  # no id comes back after another
    except TypeError:
        return 0
