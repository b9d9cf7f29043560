"""Grouping (``corrgrpo_core._groups``) on every backend against a numpy reference.

Dense ``(B, n, K)`` batches, ragged ``(N, K)`` batches whose ids come in runs (verl's layout),
scattered, in a compact range, or spread wide (each a different labelling route), the kernels
chosen per namespace, run detection and the labelling of non-integer ids.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corrgrpo_core as cc
from corrgrpo_core import _kernels
from corrgrpo_core._groups import (
    Groups,
    dense_group_size,
    dense_groups,
    find_runs,
    group_labels,
    ragged_groups,
)
from corrgrpo_core._kernels import Kernel, kernel_for
from corrgrpo_core._lib._compat import array_namespace, device

LAYOUTS = ("runs", "runs_equal", "scattered", "compact", "wide", "negative")


@st.composite
def ragged_ids(draw: st.DrawFn) -> np.ndarray:
    """int64 ids of 1 to 40 rows, in one of the layouts that take different labelling routes."""
    layout = draw(st.sampled_from(LAYOUTS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sizes = rng.integers(1, 7, draw(st.integers(1, 8)))
    if layout == "runs_equal":
        sizes[:] = sizes[0] + 1
    ids = np.repeat(rng.permutation(50)[: sizes.shape[0]], sizes)
    if layout in ("scattered", "compact", "wide", "negative"):
        ids = rng.permutation(ids)
    if layout == "wide":  # a span far beyond the row count: sorted, not addressed
        ids = ids * 10**12 + 7
    if layout == "negative":
        ids = ids - 25
    return ids.astype(np.int64)


def _reference_sums(x: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the sum of its group's rows, and its group's size (numpy, the obvious way)."""
    sums, sizes = np.zeros_like(x), np.zeros(x.shape[0])
    for g in np.unique(ids):
        rows = ids == g
        sums[rows] = x[rows].sum(axis=0)
        sizes[rows] = rows.sum()
    return sums, sizes


def _ragged(backend, ids: np.ndarray, dtype_name: str = "float64") -> Groups:
    xp = array_namespace(backend.asarray(np.zeros(1)))
    b_ids = backend.asarray(ids)
    dtype = getattr(xp, dtype_name)
    return ragged_groups(xp, b_ids, dtype, device(b_ids), lazy=False, runs=find_runs(xp, b_ids))


def _np(backend, a) -> np.ndarray:
    return backend.to_numpy(a)


def _settings(backend):
    return settings(
        max_examples=backend.examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


def test_ragged_sums_and_gathers_match_numpy(backend) -> None:
    @_settings(backend)
    @given(ids=ragged_ids(), k=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
    def check(ids: np.ndarray, k: int, seed: int) -> None:
        x = np.random.default_rng(seed).normal(size=(ids.shape[0], k))
        groups = _ragged(backend, ids)
        bx = backend.asarray(x)
        want_sum, want_size = _reference_sums(x, ids)
        np.testing.assert_allclose(
            _np(backend, groups.expand(groups.reduce(bx))), want_sum, rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(
            _np(backend, groups.expand(groups.reduce_sq(bx))),
            _reference_sums(x * x, ids)[0],
            rtol=1e-12,
            atol=1e-12,
        )
        np.testing.assert_array_equal(_np(backend, groups.count)[:, 0], want_size)
        g = groups.reduce(bx)  # any group-level value
        gathered = _np(backend, groups.expand(g))
        np.testing.assert_allclose(_np(backend, groups.shift(bx, g)), x - gathered, rtol=0, atol=0)
        np.testing.assert_allclose(
            _np(backend, groups.row_dot(bx, g))[:, 0], (x * gathered).sum(axis=1), rtol=1e-12, atol=1e-12
        )
        mine = backend.asarray(x.copy())
        np.testing.assert_allclose(_np(backend, groups.divide(mine, g)), x / gathered, rtol=1e-15)
        ref = _np(backend, groups.expand(groups.reference(bx)))
        for i in range(ids.shape[0]):  # each row's reference is a row of its own group
            assert any(np.array_equal(ref[i], x[j]) for j in np.flatnonzero(ids == ids[i]))
        # host kernels know every group is small; the others would need a device read to know
        assert groups.small == (backend.name in ("numpy", "torch"))
        np.testing.assert_array_equal(x, backend.to_numpy(bx))  # inputs untouched

    check()


def test_dense_sums_and_gathers_match_numpy(backend) -> None:
    @_settings(backend)
    @given(b=st.integers(1, 4), n=st.integers(1, 6), k=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
    def check(b: int, n: int, k: int, seed: int) -> None:
        x = np.random.default_rng(seed).normal(size=(b, n, k))
        xp = array_namespace(backend.asarray(np.zeros(1)))
        groups = dense_groups(xp, (b, n, k), xp.float64, device(backend.asarray(x)))
        bx = backend.asarray(x)
        np.testing.assert_allclose(_np(backend, groups.reduce(bx)), x.sum(axis=1, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(
            _np(backend, groups.reduce_sq(bx)), (x * x).sum(axis=1, keepdims=True), rtol=1e-12
        )
        g = groups.reduce(bx)
        np.testing.assert_allclose(
            _np(backend, groups.row_dot(bx, g)),
            (x * x.sum(axis=1, keepdims=True)).sum(-1, keepdims=True),
            rtol=1e-12,
        )
        np.testing.assert_array_equal(_np(backend, groups.shift(bx, groups.reference(bx)))[:, 0], 0.0)
        assert groups.size == n
        assert float(_np(backend, groups.count_g).ravel()[0]) == n

    check()


def test_dense_sums_add_in_row_order_whatever_k() -> None:
    """A constant extra component leaves the others' sums bit for bit unchanged (numpy's einsum
    and its lone-column special case)."""
    x = np.random.default_rng(3).normal(size=(5, 9, 1)) * 1e3 + 0.1
    groups = dense_groups(np, x.shape, np.float64, "cpu")
    wide = np.concatenate([x, np.full_like(x, 2.0)], axis=-1)
    assert np.array_equal(groups.reduce(x)[..., 0], groups.reduce(wide)[..., 0])
    assert np.array_equal(groups.reduce_sq(x)[..., 0], groups.reduce_sq(wide)[..., 0])


def test_generic_kernel_scan_on_numpy_arrays() -> None:
    """The array-API-only kernel (the doubling scan) on groups of up to 40 rows."""
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.repeat(np.arange(6), [1, 40, 3, 17, 2, 9]))
    x = rng.normal(size=(ids.shape[0], 2))
    kernel = Kernel(np)
    index, count, small = kernel.index(ids, None, np.float64, lazy=False)
    groups = Groups(kernel=kernel, count_g=count, ragged=index, small=small)
    want_sum, want_size = _reference_sums(x, ids)
    np.testing.assert_allclose(groups.expand(groups.reduce(x)), want_sum, rtol=1e-12)
    np.testing.assert_array_equal(groups.count[:, 0], want_size)
    assert index.max_size == 40
    assert not small


@pytest.mark.parametrize("name", ["numpy", "torch", "jax", "array_api_strict"])
def test_kernel_is_chosen_once_per_namespace(name: str) -> None:
    mod = pytest.importorskip({"numpy": "numpy", "torch": "torch", "jax": "jax.numpy"}.get(name, name))
    xp = array_namespace(mod.asarray([1.0]))
    kernel = kernel_for(xp)
    assert kernel is kernel_for(xp)
    want = {"numpy": "NumpyKernel", "torch": "TorchKernel", "jax": "JaxKernel", "array_api_strict": "Kernel"}[
        name
    ]
    assert type(kernel).__name__ == want
    assert dense_groups(xp, (2, 3, 1), xp.float64, device(mod.asarray([1.0]))).kernel is kernel


def test_torch_device_labels_match_host_labels() -> None:
    """The accelerator route (sorted position of the first row, index_add_) on CPU tensors."""
    torch = pytest.importorskip("torch")
    from corrgrpo_core._kernels._torch import _first_row_labels

    rng = np.random.default_rng(1)
    ids = rng.permutation(np.repeat(rng.permutation(30)[:7], rng.integers(1, 6, 7)))
    index = _first_row_labels(torch.asarray(ids))
    labels = index.labels.numpy()
    for a in range(ids.shape[0]):
        assert ((labels == labels[a]) == (ids == ids[a])).all()
        assert ids[index.member.numpy()[labels[a]]] == ids[a]  # label -> a row of the group
    x = torch.asarray(rng.normal(size=(ids.shape[0], 2)))
    kernel = kernel_for(array_namespace(x))
    sums = kernel.gather(kernel.segment_sum(x, index), index).numpy()
    np.testing.assert_allclose(sums, _reference_sums(x.numpy(), ids)[0], rtol=1e-12)
    assert _first_row_labels(torch.zeros(0, dtype=torch.int64)).labels.shape == (0,)


@pytest.mark.parametrize(
    ("ids", "runs"),
    [
        ([3, 3, 1, 1, 1, 9], [0, 2, 5]),  # runs, not sorted
        ([1, 1, 2, 2, 3, 3], [0, 2, 4]),  # ascending
        ([9, 8, 8, 7], [0, 1, 3]),  # descending
        ([4], [0]),
        ([1, 1, 2, 2, 1, 1], None),  # an id comes back: not runs
        ([2, 1, 2], None),
        ([10**15, 10**15, 5, 7, 10**15], None),  # wide range: the sorted check
    ],
)
def test_find_runs(ids: list[int], runs: list[int] | None) -> None:
    found = find_runs(np, np.asarray(ids))
    if runs is None:
        assert found is None
        return
    assert found is not None
    assert found.starts.tolist() == runs
    assert found.labels.tolist() == np.repeat(np.arange(len(runs)), np.diff([*runs, len(ids)])).tolist()


def test_equal_runs_and_dense_group_size() -> None:
    equal = np.repeat([5, 2, 8], 4)
    found = find_runs(np, equal)
    assert found is not None
    assert found.equal_size() == 4
    assert dense_group_size(equal) == 4
    assert dense_group_size(equal.astype(str).astype(object)) == 4
    uneven = np.repeat([5, 2, 8], [4, 4, 3])
    found = find_runs(np, uneven)
    assert found is not None
    assert found.equal_size() == 0
    assert dense_group_size(uneven) == 0
    assert dense_group_size(np.asarray([1, 1, 2, 2, 1, 1])) == 0  # equal runs, but 1 comes back
    assert dense_group_size(np.asarray([1, 2, 3])) == 0  # runs of one: not a dense batch
    assert dense_group_size(np.asarray([[1, 1]])) == 0
    assert dense_group_size(np.asarray([7])) == 0
    assert cc.dense_group_size is dense_group_size  # public: the verl adapter finds its uid layout with it
    with pytest.warns(DeprecationWarning, match="dense_group_size"):
        assert cc.run_length(equal) == 4  # the old name, deprecated
    assert find_runs(np, np.zeros(0, dtype=np.int64)) is None


def _dense_size_by_definition(ids: list[object]) -> int:
    """n when the ids are runs of n >= 2 equal adjacent values, each value in one run only; else 0."""
    runs: list[list[object]] = []
    for value in ids:
        if runs and runs[-1][0] == value:
            runs[-1].append(value)
        else:
            runs.append([value])
    n = len(runs[0]) if runs else 0
    heads = [run[0] for run in runs]
    same = all(len(run) == n for run in runs) and all(heads.count(h) == 1 for h in heads)
    return n if n >= 2 and same else 0


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.sampled_from(["u1", "u2", "u3", "u4", "u5"]), min_size=1, max_size=8),
    sizes=st.lists(st.integers(1, 4), min_size=8, max_size=8),
    copies=st.booleans(),
)
def test_dense_group_size_of_object_ids_is_its_definition(
    values: list[str], sizes: list[int], copies: bool
) -> None:
    """uid strings as verl lays them out: each run one object repeated (found from the objects'
    addresses), or equal strings held by distinct objects (compared by value), in any pattern."""
    rows: list[object] = []
    for value, size in zip(values, sizes, strict=False):
        rows += [("".join(value) if copies else value) for _ in range(size)]
    ids = np.empty(len(rows), dtype=object)
    ids[:] = rows
    assert dense_group_size(ids) == _dense_size_by_definition(rows)
    assert dense_group_size(ids[::-1]) == _dense_size_by_definition(rows[::-1])  # not contiguous


def test_torch_ids_on_the_host_find_runs() -> None:
    torch = pytest.importorskip("torch")
    found = find_runs(array_namespace(torch.zeros(1)), torch.asarray([4, 4, 1, 1]))
    assert found is not None
    assert found.equal_size() == 2


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.sampled_from(["a", "b", "c", 1, 2, (1, 2), None, 2.5]), min_size=1, max_size=30),
    runs=st.booleans(),
)
def test_group_labels_follow_first_appearance(ids: list[object], runs: bool) -> None:
    if runs:  # verl's layout: each id's rows adjacent
        ids = sorted(ids, key=lambda v: list(dict.fromkeys(ids)).index(v))
    labels = group_labels(ids)
    first = list(dict.fromkeys(ids))
    assert labels.tolist() == [first.index(v) for v in ids]


def test_group_labels_of_scattered_ids_with_some_equal_neighbours() -> None:
    """The route that hashes a few runs of two (as verl's shuffled uids have) and the one that hashes every row."""
    rng = np.random.default_rng(5)
    for ids in (rng.integers(0, 40, 500), rng.permutation(np.arange(300)) % 150):
        uids = np.asarray([f"u{i}" for i in ids], dtype=object)
        first = list(dict.fromkeys(uids.tolist()))
        assert group_labels(uids).tolist() == [first.index(u) for u in uids.tolist()]


def test_group_labels_edges() -> None:
    assert group_labels(np.asarray([7, 3, 7])).tolist() == [7, 3, 7]  # integer ids: unchanged
    assert group_labels([]).shape == (0,)
    with pytest.raises(ValueError, match="one-dimensional"):
        group_labels(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="hashable"):
        group_labels([[1], [2], [1]])
    strings = np.asarray([str(i % 5) for i in range(40)], dtype=object)
    np.testing.assert_array_equal(group_labels(strings), np.unique(strings, return_inverse=True)[1])


def test_public_group_labels_is_this_one() -> None:
    assert cc.group_labels is group_labels
    assert "Kernel" in _kernels.__all__
