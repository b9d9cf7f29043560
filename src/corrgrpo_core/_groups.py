"""Group layouts: group-level sums for dense ``(B, n, K)`` and ragged ``(N, K)`` batches.

Statistics live at *group level* (one row per group) and are broadcast back to the rows only
where a row-level value is needed, so each pass over the ``N x K`` data is a reduction or an
elementwise update, never a per-row gather of a per-row sum.

- Dense groups reduce along axis 1; numpy uses ``einsum`` (one tight loop, no temporary for the
  sum of squares), which is several times faster than ``sum(axis=1)`` on a short middle axis.
- Ragged groups carry a *label* per row. numpy labels the groups ``0..G-1`` without sorting when
  it can (ids already in runs, or ids in a compact range) and sums with ``bincount``. torch
  (``index_add_``) and jax (``segment_sum``) label each group by the sorted position of its first
  row, an integer in ``[0, N)``, so that no shape depends on the values: no host synchronisation
  on an accelerator and nothing that stops ``jax.jit``. Other namespaces use a segmented doubling
  scan written in the array API alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._lib._compat import Array, Namespace, is_jax_namespace, is_numpy_namespace, is_torch_namespace

# numpy labels ids in a range this many times the row count by direct addressing (no sort).
_DIRECT_SPAN = 4
# Groups up to this size take the one-pass sum of squares (relative error about size * eps).
SMALL_GROUP = 1024


@dataclass(frozen=True)
class RaggedIndex:
    """Which group each row of a ragged batch belongs to.

    ``labels`` (N,) names each row's group in ``[0, num)``; group-level arrays have ``num`` rows
    (entries of unused labels are never read). ``member`` (num,) is one row of each group, the
    shift that centres a constant component to exactly zero. ``size`` (num,) is the group size
    (None for torch and jax, which sum ones for it).
    """

    labels: Array
    num: int
    member: Array
    size: Array | None
    order: Array | None = None  # generic scan only: stable argsort of the ids
    seg_end: Array | None = None  # generic scan only: one past each sorted row's group
    seg_start: Array | None = None  # generic scan only
    max_size: int = 0  # generic scan only: largest group
    starts: Array | None = None  # ids in runs (host numpy array): the first row of each group, in order


@dataclass(frozen=True)
class Groups:
    """How the rows of a batch form groups.

    Row-level arrays carry a trailing component axis: ``(B, n, K)`` (dense) or ``(N, K)``
    (ragged). Group-level arrays are ``(B, 1, K)`` (dense) or ``(num, K)`` (ragged);
    :meth:`expand` broadcasts them back against the rows.
    """

    xp: Namespace
    count_g: Array  # group sizes, group level, in the working dtype
    ragged: RaggedIndex | None = None
    size: int | None = None  # dense: the group size, known without reading an array
    small: bool = False  # every group has at most SMALL_GROUP rows (known without a device read)

    @property
    def dense(self) -> bool:
        return self.ragged is None

    @property
    def count(self) -> Array:
        """Each row's group size, broadcastable against the rows."""
        return self.expand(self.count_g)

    @property
    def _np_ragged(self) -> bool:
        return self.ragged is not None and is_numpy_namespace(self.xp)

    def expand(self, g: Array) -> Array:
        """Group-level values broadcastable against the rows (a new array for ragged groups)."""
        r = self.ragged
        if r is None:
            return g
        if self._np_ragged and g.ndim == 2 and g.shape[1] > 1:
            import numpy as np

            # Column-major rows: each component's column is contiguous, which is what the
            # per-column bincount and the elementwise updates want.
            return np.take(np.ascontiguousarray(g.T), r.labels, axis=1).T
        return self.xp.take(g, r.labels, axis=0)

    def shift(self, x: Array, g: Array) -> Array:
        """A new array x - g, with ``g`` group level."""
        if self._np_ragged:
            import numpy as np

            e = self.expand(g)
            return np.subtract(x, e, out=e)
        if self.ragged is not None and is_torch_namespace(self.xp):  # the gathered copy is ours
            return self.expand(g).neg_().add_(x)
        return x - self.expand(g)

    def reduce(self, x: Array) -> Array:
        """Group-level sums of the row-level ``x``."""
        xp, r = self.xp, self.ragged
        if r is None:
            if is_numpy_namespace(xp) and x.ndim == 3:
                return _numpy_dense_sum(x, None)
            return xp.sum(x, axis=1, keepdims=True)
        if is_numpy_namespace(xp):
            return self._bincount(x, square=False)
        if is_torch_namespace(xp):
            return xp.zeros((r.num, *x.shape[1:]), dtype=x.dtype, device=x.device).index_add_(0, r.labels, x)
        if is_jax_namespace(xp):
            import jax

            return jax.ops.segment_sum(x, r.labels, num_segments=r.num)
        return _scan_sum(xp, x, r)

    def reduce_sq(self, x: Array) -> Array:
        """Group-level sums of ``x * x``."""
        if self.ragged is None and is_numpy_namespace(self.xp) and x.ndim == 3:
            return _numpy_dense_sum(x, x)
        if self._np_ragged:
            return self._bincount(x, square=True)
        return self.reduce(x * x)

    def row_dot(self, x: Array, g: Array) -> Array:
        """sum_k x_ik g_k over the components, with ``g`` the group-level value of the row's group."""
        xp, r = self.xp, self.ragged
        if r is None and is_numpy_namespace(xp) and x.ndim == 3:
            import numpy as np

            return np.einsum("bnk,bk->bn", x, g[:, 0, :])[..., None]
        if r is not None and self._np_ragged:
            import numpy as np

            out = np.zeros((x.shape[0], 1), dtype=x.dtype)
            for k in range(x.shape[1]):  # one column at a time: no N x K temporary
                out[:, 0] += x[:, k] * np.take(g[:, k], r.labels)
            return out
        if r is not None and is_torch_namespace(xp):  # multiply into the gathered copy
            return self.expand(g).mul_(x).sum(dim=-1, keepdim=True)
        return xp.sum(x * self.expand(g), axis=-1, keepdims=True)

    def group_sum(self, x: Array) -> Array:
        """Sum of ``x`` over each row's group, broadcastable against ``x``."""
        return self.expand(self.reduce(x))

    def reference(self, x: Array) -> Array:
        """Group level: the value of one row of each group."""
        r = self.ragged
        if r is None:
            return x[:, :1, ...]
        return self.xp.take(x, r.member, axis=0)

    def batch_sum(self, x: Array) -> Array:
        """Sum of ``x`` over every row of the batch, broadcastable against ``x``."""
        axes = (0, 1) if self.ragged is None else (0,)
        return self.xp.sum(x, axis=axes, keepdims=True)

    def _bincount(self, x: Array, *, square: bool) -> Array:
        import numpy as np

        r = self.ragged
        assert r is not None
        cols = np.reshape(x, (x.shape[0], -1))
        out = np.empty((r.num, cols.shape[1]), dtype=np.float64)
        for k in range(cols.shape[1]):  # one column at a time: the same sums whatever K is
            col = cols[:, k]
            if square:
                col = col * col
            if r.starts is not None:  # runs: contiguous segments, no scattered adds
                out[:, k] = np.add.reduceat(col, r.starts)
            else:
                out[:, k] = np.bincount(r.labels, weights=col, minlength=r.num)
        return np.reshape(out, (r.num, *x.shape[1:]))


def _numpy_dense_sum(x: Array, y: Array | None) -> Array:
    """(B, 1, K) sums over axis 1 of x (or of x * y), each in row order whatever K is.

    The order matters: a constant extra component must leave the others' statistics bit for
    bit unchanged. einsum adds a strided column in row order but vectorises a lone contiguous
    one, so K = 1 takes the last entry of a running sum instead.
    """
    import numpy as np

    if x.shape[2] == 1:
        v = x if y is None else x * y
        return np.cumsum(v, axis=1)[:, -1:, :] if v.shape[1] else np.zeros_like(v[:, :1])
    if y is None:
        return np.einsum("bnk->bk", x)[:, None, :]
    return np.einsum("bnk,bnk->bk", x, y)[:, None, :]


def _scan_sum(xp: Namespace, x: Array, r: RaggedIndex) -> Array:
    # Segmented inclusive scan by doubling: exact within a segment (no prefix-sum
    # cancellation across groups), log2(largest group) passes. Labels are sorted positions of
    # the groups' first rows, so the totals indexed by sorted position are the group level.
    assert r.order is not None
    assert r.seg_start is not None
    assert r.seg_end is not None
    n = x.shape[0]
    scan = xp.take(x, r.order, axis=0)
    index = xp.arange(n, dtype=r.seg_start.dtype, device=_device(x))
    shift = 1
    while shift < r.max_size:
        pad = xp.zeros((shift, *x.shape[1:]), dtype=x.dtype, device=_device(x))
        previous = xp.concat([pad, scan[: n - shift, ...]], axis=0)
        same = xp.reshape(index - shift >= r.seg_start, (n,) + (1,) * (x.ndim - 1))
        scan = xp.where(same, scan + previous, scan)
        shift *= 2
    return xp.take(scan, r.seg_end - 1, axis=0)


def _device(x: Array) -> Any:
    from ._lib._compat import device

    return device(x)


def dense_groups(xp: Namespace, shape: tuple[int, ...], dtype: Any, dev: Any) -> Groups:
    """Groups for an internal ``(B, n, K)`` array."""
    count = xp.full((1, 1, 1), float(shape[1]), dtype=dtype, device=dev)
    return Groups(xp=xp, count_g=count, size=shape[1], small=shape[1] <= SMALL_GROUP)


def _host_ids(xp: Namespace, ids: Array) -> Array | None:
    """The ids as a numpy array when reading them costs no device synchronisation, else None."""
    if is_numpy_namespace(xp):
        return ids
    if is_torch_namespace(xp) and ids.device.type == "cpu":
        return ids.numpy()
    return None


@dataclass(frozen=True)
class Runs:
    """Ids on the host that form runs (each id's rows adjacent): where each run starts, row labels."""

    starts: Array
    labels: Array

    def equal_size(self) -> int:
        """The common run length n >= 2, else 0: such a batch is a dense ``(N / n, n, K)``."""
        import numpy as np

        rows, runs = self.labels.shape[0], self.starts.shape[0]
        n = rows // runs if runs else 0
        if n < 2 or n * runs != rows:
            return 0
        return n if bool(np.all(np.diff(self.starts) == n)) else 0


def find_runs(xp: Namespace, group_ids: Array) -> Runs | None:
    """The runs of ``group_ids`` (verl's layout: each prompt's rollouts adjacent), else None.

    Only looked for where the ids are on the host (numpy, torch on the CPU): O(N), no sort.
    """
    host = _host_ids(xp, group_ids)
    if host is None or host.shape[0] == 0:
        return None
    return _numpy_runs(host)


def ragged_groups(
    xp: Namespace, group_ids: Array, dtype: Any, dev: Any, *, lazy: bool, runs: Runs | None = None
) -> Groups:
    """Groups for an internal ``(N, K)`` array whose rows belong to ``group_ids`` (``runs``: theirs)."""
    if is_numpy_namespace(xp):
        index = _numpy_index(group_ids, runs)
        assert index.size is not None
        return Groups(
            xp=xp, count_g=xp.astype(index.size[:, None], dtype), ragged=index, small=_small(index.size)
        )
    n = group_ids.shape[0]
    host = _host_ids(xp, group_ids)
    if host is not None:  # torch on the CPU: compact labels 0..G-1, group-level arrays of G rows
        import torch

        found = _numpy_index(host, runs)
        assert found.size is not None
        index = RaggedIndex(
            labels=torch.from_numpy(found.labels.astype("int64", copy=False)),
            num=found.num,
            member=torch.from_numpy(found.member.astype("int64", copy=False)),
            size=None,
            starts=found.starts,  # host array: only used to cut the batch into pieces
        )
        count = torch.from_numpy(found.size).to(dtype)[:, None]
        return Groups(xp=xp, count_g=count, ragged=index, small=_small(found.size))
    if is_torch_namespace(xp) or is_jax_namespace(xp):
        index = _native_index(xp, group_ids, dev)
        ones = xp.ones((n, 1), dtype=dtype, device=dev)
        groups = Groups(xp=xp, count_g=ones, ragged=index)
        return Groups(xp=xp, count_g=groups.reduce(ones), ragged=index)
    order = xp.argsort(group_ids, stable=True)
    sorted_ids = xp.take(group_ids, order)
    start = xp.searchsorted(sorted_ids, sorted_ids, side="left")
    end = xp.searchsorted(sorted_ids, sorted_ids, side="right")
    segment = xp.take(start, xp.argsort(order))
    size = end - start  # indexed by sorted position, which is what the labels are
    max_size = 0 if lazy or n == 0 else int(xp.max(size))
    index = RaggedIndex(
        labels=segment,
        num=n,
        member=order,  # the row at sorted position s: for a group's label s, its first row
        size=size,
        order=order,
        seg_start=start,
        seg_end=end,
        max_size=max_size,
    )
    return Groups(xp=xp, count_g=xp.reshape(xp.astype(size, dtype), (n, 1)), ragged=index)


def _small(size: Array) -> bool:
    return size.shape[0] == 0 or int(size.max()) <= SMALL_GROUP


def _native_index(xp: Namespace, ids: Array, dev: Any) -> RaggedIndex:
    """torch / jax: label = sorted position of the group's first row; shapes independent of values.

    The start of each sorted row's run is a running maximum of the run starts (no searchsorted,
    which is slow on long runs of equal keys in torch).
    """
    n = ids.shape[0]
    order = xp.argsort(ids)  # any order within a group will do
    sorted_ids = xp.take(ids, order)
    position = xp.arange(n, device=dev)
    if n:
        first = xp.concat([xp.ones((1,), dtype=xp.bool, device=dev), sorted_ids[1:] != sorted_ids[:-1]])
    else:
        first = xp.zeros((0,), dtype=xp.bool, device=dev)
    marked = xp.where(first, position, xp.zeros_like(position))
    start: Array
    labels: Array
    if is_torch_namespace(xp):
        import torch

        start = torch.cummax(marked, 0).values
        labels = torch.empty_like(start).scatter_(0, order, start)
    else:
        import jax

        start = jax.lax.cummax(marked, axis=0)
        labels = xp.zeros_like(start).at[order].set(start)
    return RaggedIndex(labels=labels, num=n, member=order, size=None)


def _numpy_runs(ids: Array) -> Runs | None:
    """The runs when every id forms one run of adjacent rows, else None."""
    import numpy as np

    change = ids[1:] != ids[:-1]
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    run_ids = ids[starts]
    if starts.shape[0] > 1:
        step = np.diff(run_ids)
        if not (bool(np.all(step > 0)) or bool(np.all(step < 0))) and _repeats(run_ids):
            return None  # some id comes back after another: not runs
    labels = np.empty(ids.shape[0], dtype=np.intp)
    labels[0] = 0
    np.cumsum(change, out=labels[1:])
    return Runs(starts=starts, labels=labels)


def _repeats(values: Array) -> bool:
    """Whether some value occurs twice: a count table for a compact range, else a sort."""
    import numpy as np

    lo, hi = int(values.min()), int(values.max())
    if hi - lo < _DIRECT_SPAN * values.shape[0]:
        wide = values if values.dtype.itemsize >= 8 else values.astype(np.int64)
        return bool(np.bincount(wide - wide.dtype.type(lo)).max() > 1)
    return bool(np.unique(values).shape[0] != values.shape[0])


def _numpy_index(ids: Array, runs: Runs | None) -> RaggedIndex:
    """Labels 0..G-1 without a sort when the ids are in runs (``runs``) or in a compact range."""
    import numpy as np

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
        wide = ids if ids.dtype.itemsize >= 8 else ids.astype(np.int64)
        key = wide - wide.dtype.type(lo)  # in [0, span): no overflow in a type of 8 bytes
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[key] = True
        table = np.cumsum(present, dtype=np.intp) - 1
        labels = table[key]
        num = int(table[-1]) + 1
    else:
        uniq, labels = np.unique(ids, return_inverse=True)
        labels = labels.astype(np.intp, copy=False)
        num = int(uniq.shape[0])
    size = np.bincount(labels, minlength=num)
    member = np.empty(num, dtype=np.intp)
    member[labels] = np.arange(n, dtype=np.intp)  # any row of the group serves as its shift
    return RaggedIndex(labels=labels, num=num, member=member, size=size)


def group_labels(ids: Any, /) -> Array:
    """Integer group labels ``0..G-1`` (in order of first appearance) for ids of any hashable type.

    For ids that are not integers, such as verl's ``uid`` strings (a numpy object array of uuid4
    strings). Ids in runs, each group's rows adjacent as verl lays out a batch, are labelled in
    O(N) without hashing every row: one comparison of neighbours, then a set of the run ids checks
    that no id comes back. Scattered ids are factorised with a dict (O(N), exact), never sorted:
    ``numpy.unique`` over Python strings costs several times more. Integer numpy ids are returned
    unchanged (the estimators label those themselves).

    Examples
    --------
    >>> import numpy as np, corrgrpo_core as cc
    >>> cc.group_labels(np.array(["b", "b", "a", "a", "c"], dtype=object))
    array([0, 0, 1, 1, 2])
    >>> cc.group_labels(["x", "y", "x"])
    array([0, 1, 0])
    """
    import numpy as np

    if not isinstance(ids, np.ndarray):
        ids = np.asarray(ids) if not isinstance(ids, (list, tuple)) else _object_array(ids)
    if ids.ndim != 1:
        raise ValueError(f"group ids must be one-dimensional, got shape {tuple(ids.shape)}")
    if ids.dtype.kind in "iu":
        return ids
    n = ids.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    try:  # where the id changes between neighbours: runs of one id need hashing only once
        change = np.asarray(ids[1:] != ids[:-1], dtype=bool)
        if change.shape != (n - 1,):
            raise ValueError
    except (TypeError, ValueError):  # ids whose comparison is not a plain bool: every row is a head
        change = np.ones(n - 1, dtype=bool)
    heads = ids[np.concatenate(([0], np.flatnonzero(change) + 1))].tolist()
    # Each run head -> the first head of its id (dict.setdefault mapped in C, no Python frame per
    # row), then those -> 0..G-1 by direct addressing (they lie in [0, runs)).
    seen: dict[Any, int] = {}
    runs = len(heads)
    try:
        first = np.fromiter(map(seen.setdefault, heads, range(runs)), dtype=np.intp, count=runs)
    except TypeError as exc:
        raise TypeError(f"group ids must be hashable: {exc}") from None
    run_of_row = np.empty(n, dtype=np.intp)
    run_of_row[0] = 0
    np.cumsum(change, out=run_of_row[1:])
    if len(seen) == runs:  # every id is one run (verl's layout): the run index is the label
        return run_of_row
    present = np.zeros(runs, dtype=bool)
    present[first] = True
    return (np.cumsum(present, dtype=np.intp) - 1)[first][run_of_row]


def _object_array(values: Any) -> Array:
    import numpy as np

    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def run_length(ids: Array) -> int:
    """n when host ids (any hashable type) form runs of n >= 2 adjacent rows each, else 0.

    Such a batch is dense, ``(N / n, n, K)``: verl's usual layout (each prompt's n rollouts
    adjacent). No labels are built, and only the run heads are hashed, and only once the runs
    have one length (scattered ids cost one comparison of neighbours).
    """
    import numpy as np

    ids = np.asarray(ids)
    rows = ids.shape[0] if ids.ndim == 1 else 0
    if rows < 2:
        return 0
    try:
        change = np.asarray(ids[1:] != ids[:-1], dtype=bool)
    except (TypeError, ValueError):  # ids whose comparison is not a plain bool
        return 0
    if change.shape != (rows - 1,):
        return 0
    ends = np.flatnonzero(change)  # the last row of each run but the final one
    runs = ends.shape[0] + 1
    n = rows // runs
    if n < 2 or n * runs != rows or not bool(np.all(ends == np.arange(n - 1, rows - 1, n))):
        return 0
    heads = ids[::n].tolist()
    try:
        return n if len(set(heads)) == runs else 0  # no id comes back after another
    except TypeError:
        return 0
