"""The backend kernels (``corrgrpo_core._kernels``): group primitives only, and the route of torch
CPU tensors through numpy.

Every estimator is computed from its one definition in ``_estimators`` in the working dtype
(float64): a float32 batch, a torch CPU tensor and a dense batch cut into pieces give what the
float64 numpy path gives, bit for bit once cast to float32.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corrgrpo_core as cc
from corrgrpo_core import _batch, _kernels

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@st.composite
def dense_float32(draw):
    """(B, n, K) float32 scores: binary pass/fail columns, continuous ones, constants, any scale."""
    b = draw(st.integers(1, 5))
    n = draw(st.integers(2, 9))
    k = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cols = []
    for _ in range(k):
        kind = draw(st.sampled_from(["binary", "normal", "constant", "offset"]))
        if kind == "binary":
            col = (rng.random((b, n)) < 0.5).astype(np.float64)
        elif kind == "normal":
            col = rng.normal(size=(b, n))
        elif kind == "constant":
            col = np.full((b, n), rng.normal())
        else:  # a small spread on a large mean
            col = 100.0 + rng.normal(size=(b, n)) * 1e-2
        cols.append(col * 10.0 ** draw(st.integers(-3, 3)))
    return np.stack(cols, axis=-1).astype(np.float32)


ESTIMATORS = {
    "grpo": cc.grpo_advantage,
    "corrgrpo": cc.corrgrpo_advantage,
    "mo_grpo": cc.mo_grpo_advantage,
    "gdpo": cc.gdpo_advantage,
    "gdpo_corr": cc.gdpo_corr_advantage,
    "dara": cc.dara_advantage,
    "dara_sym_corrgrpo": functools.partial(cc.dara_advantage, variant="sym", base="corrgrpo"),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@settings(max_examples=40, deadline=None)
@given(x=dense_float32(), weighted=st.booleans(), placement=st.sampled_from(["inside", "outside"]))
def test_float32_and_torch_cpu_are_the_float64_path_cast(name, x, weighted, placement):
    fn = ESTIMATORS[name]
    weights = np.linspace(-1.0, 2.0, x.shape[-1]) if weighted else None
    kw = {"weights": weights, "eps_placement": placement}
    want = fn(x.astype(np.float64), **kw).astype(np.float32)
    got = fn(torch.from_numpy(x), **kw)  # a numpy view of the tensor, float64 working copy
    assert isinstance(got, torch.Tensor)
    assert got.dtype == torch.float32
    assert got.shape == x.shape[:-1]
    np.testing.assert_array_equal(got.numpy(), want)
    host = fn(x, **kw)
    assert host.dtype == np.float32
    np.testing.assert_array_equal(host, want)


def test_the_paper_example_in_float32():
    s = np.array([[0.1, 0.18, 0.8], [0.18, 0.1, 7.28], [0.82, 0.9, 8], [0.9, 0.82, 1.52]], dtype=np.float32)
    got = cc.corr_normalized_advantage(torch.from_numpy(s))
    np.testing.assert_allclose(got.numpy(), [-1.86071, 0.93036, 1.86071, -0.93036], atol=1e-4)
    np.testing.assert_allclose(
        cc.grpo_advantage(torch.from_numpy(s)).numpy(), [-1.09544, 0.54772, 1.09544, -0.54772], atol=1e-4
    )


def test_constant_groups_give_exact_zeros_in_float32():
    x = torch.full((3, 7, 2), 0.1, dtype=torch.float32)  # 0.1 is not dyadic: a mean would round
    assert torch.equal(cc.corr_normalized_advantage(x), torch.zeros(3, 7))
    assert torch.equal(cc.grpo_advantage(x), torch.zeros(3, 7))


def _position_major(shape, dtype=np.float64):
    """A (B, n, K) array laid out as the numpy kernel's working copy: a view of an (n, K, B) block."""
    b, n, k = shape
    return np.empty((n, k, b), dtype=dtype).transpose(2, 0, 1)


@pytest.mark.parametrize("name", cc.estimator_names())
def test_inputs_are_never_written_over(name):
    """The estimators may work over arrays of their own (the working copy), never over the caller's,
    whatever its layout: float64 already position-major (the kernel then makes no copy), 2-d,
    ids in runs, torch tensors, ragged ids."""
    rng = np.random.default_rng(0)
    pm = _position_major((4, 8, 3))
    pm[...] = rng.normal(size=pm.shape)
    flat = rng.normal(size=(32, 3))
    cases = [
        (pm, None),
        (pm[:, :, :1], None),
        (flat[:8], None),
        (flat, np.repeat(np.arange(4), 8)),
        (flat, rng.permutation(np.repeat(np.arange(4), 8))),
        (torch.from_numpy(flat.copy()).reshape(4, 8, 3), None),
        (torch.from_numpy(flat.astype(np.float32)), torch.from_numpy(np.repeat(np.arange(8), 4))),
    ]
    for x, ids in cases:
        before = x.clone() if isinstance(x, torch.Tensor) else x.copy()
        cc.compute_advantages(x, ids, estimator=name)
        cc.compute_advantages(x, ids, estimator=name, weights=[1.0, 2.0, 3.0][: x.shape[-1]])
        np.testing.assert_array_equal(np.asarray(x), np.asarray(before))


def test_torch_cpu_tensors_take_the_numpy_route_and_others_stay_on_torch(monkeypatch):
    x = torch.rand(4, 8, 3)
    assert _kernels.host_route(x, None, None) is not None
    assert _kernels.host_route(x.double(), None, None) is not None
    for other in (
        x.requires_grad_(),
        x.detach().bfloat16(),
        x.detach().long(),
        torch.empty(2, 2, device="meta"),
    ):
        assert _kernels.host_route(other, None, None) is None
    w = torch.ones(3, requires_grad=True)
    assert _kernels.host_route(x.detach(), w, None) is None  # gradients flow through torch
    assert _kernels.host_route(x.detach().numpy(), None, None) is None
    got = cc.corrgrpo_advantage(x.detach().bfloat16())  # no numpy dtype: torch's own path
    assert got.dtype == torch.bfloat16


def test_nan_and_inf_reach_the_validation():
    x = torch.rand(2, 4, 3)
    x[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        cc.corr_normalized_advantage(x)
    got = cc.corr_normalized_advantage(x, nan_policy="ignore")
    want = cc.corr_normalized_advantage(x.double().numpy(), nan_policy="ignore")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    x[1, 2, 0] = float("inf")
    with pytest.raises(ValueError, match="inf"):
        cc.grpo_advantage(x)


def test_gradients_flow_through_torch():
    x = torch.rand(3, 4, 2, dtype=torch.float64, requires_grad=True)
    cc.corr_normalized_advantage(x).sum().backward()
    assert x.grad is not None


@pytest.mark.parametrize("estimator", ["grpo", "corrgrpo", "gdpo", "dara", "dr_grpo"])
@pytest.mark.parametrize("ragged", [False, True])
def test_gradients_flow_where_advantages_are_written_over_the_moments(estimator, ragged):
    # GRPO and CorrGRPO write their advantages over arrays of their own; autograd's graph may
    # hold those for the backward pass (a sum of squares does), so recorded tensors get new ones.
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(8, 3) if ragged else (2, 4, 3)), requires_grad=True)
    ids = torch.tensor([0, 1, 0, 1, 2, 2, 0, 1]) if ragged else None
    adv = cc.compute_advantages(x, ids, estimator=estimator)
    adv.pow(2).sum().backward()
    assert x.grad is not None
    assert bool(torch.isfinite(x.grad).all())
    want = cc.compute_advantages(
        x.detach().numpy(), None if ids is None else ids.numpy(), estimator=estimator
    )
    np.testing.assert_allclose(adv.detach().numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", cc.estimator_names())
@pytest.mark.parametrize("layout", ["dense", "runs"])
def test_a_batch_in_pieces_equals_the_batch_whole_bit_for_bit(name, layout, monkeypatch):
    """A large host batch runs in pieces of whole groups (temporaries in cache): each group's
    advantages are those of the batch computed whole, bit for bit (batch-scope estimators whole)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(13, 4, 3)).astype(np.float32)
    x[5] = [[9.998697, 100.0, 0.0], [10.000918, 0.0, 100.0], [10.0, 100.0, 0.0], [9.999, 0.0, 100.0]]
    w = np.array([1.0, -0.5, 0.25])
    if layout == "dense":
        args: tuple = (x,)
    else:  # uneven runs: the ragged path, cut at group starts
        sizes = rng.integers(1, 7, 20)
        ids = np.repeat(np.arange(20), sizes)
        args = (rng.normal(size=(ids.shape[0], 3)), ids)
    whole = cc.compute_advantages(*args, estimator=name, weights=w)
    monkeypatch.setattr(_batch, "CHUNK_ROWS", 12)  # pieces of about 3 groups
    pieces = cc.compute_advantages(*args, estimator=name, weights=w)
    np.testing.assert_array_equal(pieces, whole)


def test_no_kernel_knows_an_estimator():
    """Backend modules supply group primitives; no estimator's name (nor a function named after
    one) appears in them: each estimator's formula is written once, in ``_estimators``."""
    names = set(cc.estimator_names()) | {"corr", "correlation"}
    folder = Path(_kernels.__file__).parent
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names, (path.name, node.value)
            if isinstance(node, ast.FunctionDef):
                words = set(node.name.strip("_").split("_"))
                assert not words & {"grpo", "corrgrpo", "gdpo", "dara", "rloo"}, (path.name, node.name)


# --- token broadcast -------------------------------------------------------------------------


@pytest.mark.parametrize("mask_dtype", ["bool", "int64", "float32"])
@pytest.mark.parametrize(("n", "t"), [(5, 3), (1100, 1024), (3, 0)])
def test_token_broadcast_matches_the_generic_where(mask_dtype, n, t):
    rng = np.random.default_rng(0)
    adv = rng.normal(size=n).astype(np.float32)
    lengths = rng.integers(0, t + 1, n)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(mask_dtype)
    got = cc.broadcast_to_tokens(torch.from_numpy(adv), torch.from_numpy(mask))
    want = np.where(mask != 0, adv[:, None], np.float32(0))
    assert got.dtype == torch.float32
    assert got.shape == (n, t)
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.int32, torch.uint8, torch.bool, torch.float64])
def test_token_broadcast_is_verls_product_for_any_mask_values(mask_dtype):
    # verl multiplies: a mask value other than 0/1, a NaN or inf advantage must come out as its product
    g = torch.Generator().manual_seed(1)
    adv = torch.randn(700, generator=g)
    adv[:3] = torch.tensor([float("nan"), float("inf"), -0.0])
    if mask_dtype == torch.bool:
        mask = torch.rand(700, 600, generator=g) < 0.5
    else:
        mask = torch.randint(0, 200, (700, 600), generator=g).to(mask_dtype)
    if mask_dtype == torch.int64:
        mask[5] = -(2**40) - 3  # rounds when converted to float32, as in the product
    before = mask.clone()
    got = cc.broadcast_to_tokens(adv, mask)
    want = (adv[:, None] * mask).to(torch.float32)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(mask, before)


def test_token_broadcast_keeps_leading_axes_and_float64():
    adv = torch.rand(2, 3, dtype=torch.float64)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[..., -1] = False
    got = cc.broadcast_to_tokens(adv, mask)
    np.testing.assert_array_equal(got.numpy(), np.where(mask.numpy(), adv.numpy()[..., None], 0.0))


# --- string ids ------------------------------------------------------------------------------


def _same_partition(labels, ids):
    _, inverse = np.unique(np.asarray(ids, dtype=object).astype(str), return_inverse=True)
    pairs = set(zip(labels.tolist(), inverse.tolist(), strict=True))
    assert len(pairs) == len(set(labels.tolist())) == len(set(inverse.tolist()))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12), shuffle=st.booleans(), seed=st.integers(0, 99)
)
def test_group_labels_partition_string_ids_like_unique(sizes, shuffle, seed):
    ids = np.array([f"uid-{g}" for g, s in enumerate(sizes) for _ in range(s)], dtype=object)
    if shuffle:
        ids = ids[np.random.default_rng(seed).permutation(len(ids))]
    labels = cc.group_labels(ids)
    assert labels.dtype.kind == "i"
    _same_partition(labels, ids)
    first = [labels[list(ids).index(u)] for u in dict.fromkeys(ids.tolist())]
    assert first == list(range(len(first)))  # labels in order of first appearance


def test_group_labels_inputs():
    assert cc.group_labels(["b", "a", "b"]).tolist() == [0, 1, 0]  # a returning id: not runs
    assert cc.group_labels(np.array(["x", "x", "y"])).tolist() == [0, 0, 1]  # numpy str dtype
    ints = np.array([5, 5, 2])
    assert cc.group_labels(ints) is ints
    assert cc.group_labels(np.array([], dtype=object)).shape == (0,)
    with pytest.raises(TypeError, match="hashable"):
        cc.group_labels([[1], [2], [1]])
    with pytest.raises(ValueError, match="one-dimensional"):
        cc.group_labels(np.array([["a"], ["b"]], dtype=object))


def test_numpy_float32_declines_nothing_and_names_bad_input():
    x = np.random.default_rng(1).normal(size=(2, 4, 3)).astype(np.float32)
    with pytest.raises(TypeError, match="real numbers"):
        cc.grpo_advantage(x, weights=[1j, 2.0, 3.0])
    with pytest.raises(ValueError, match="one entry per reward component"):
        cc.grpo_advantage(x, weights=[1.0, 2.0])
    huge = cc.grpo_advantage(x, weights=[1e300, 1.0, 1.0])  # beyond float32: the weights are rescaled
    np.testing.assert_allclose(
        huge, cc.grpo_advantage(x.astype(np.float64), weights=[1e300, 1.0, 1.0]), rtol=1e-6
    )
    x[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cc.grpo_advantage(x)
    before = x.copy()
    cc.corr_normalized_advantage(x, nan_policy="ignore")
    np.testing.assert_array_equal(x, before)  # not mutated


@pytest.mark.parametrize("name", ["grpo", "corrgrpo"])
def test_totals_that_nearly_cancel_keep_float64_accuracy(name):
    """Large terms whose group total nearly cancels: float32 scores, float64 statistics, so the
    advantages are the float64 ones rounded once (the old float32 kernels had to detect these)."""
    x = np.asarray(
        [
            [[9.998697, 100.0, 0.0, 100.002716], [10.000918, 0.0, 100.0, 100.00218]],
            [[10.000334, 0.0, 100.0, 99.98093], [10.00007, 0.0, 0.0, 100.00513]],
        ],
        dtype=np.float32,
    )
    fn = ESTIMATORS[name]
    want = fn(x.astype(np.float64), eps_placement="outside")
    np.testing.assert_array_equal(fn(x, eps_placement="outside"), want.astype(np.float32))
    got = fn(torch.from_numpy(x), eps_placement="outside").numpy()
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_groups_of_one_row_with_ddof_0_give_zeros_in_float32():
    x = np.array([[[1.0, 0.0]], [[3.0, -2.0]]], dtype=np.float32)
    for name, fn in ESTIMATORS.items():
        np.testing.assert_array_equal(fn(x, ddof=0), np.zeros((2, 1), dtype=np.float32), err_msg=name)


def test_scattered_ids_gather_group_columns_from_contiguous_copies(monkeypatch):
    """The gathers of ragged groups read each group-level column from a contiguous array: np.take
    copies a strided source whole on every call, once per piece of rows."""
    from corrgrpo_core._kernels import _host

    sources = []
    real = np.take

    def spy(a, *args, **kwargs):
        sources.append(a.flags.c_contiguous)
        return real(a, *args, **kwargs)

    rng = np.random.default_rng(5)
    ids = rng.permutation(np.repeat(np.arange(40), 5))
    x = rng.normal(size=(200, 3))
    want = cc.corr_normalized_advantage(x, ids)
    monkeypatch.setattr(_host.np, "take", spy)
    got = cc.corr_normalized_advantage(x, ids)
    assert sources
    assert all(sources)
    np.testing.assert_array_equal(got, want)
