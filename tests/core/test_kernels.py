"""The backend kernels (``corrgrpo_core._kernels``) against the generic float64 path.

torch float32 batches are computed in float32 by the kernels: these properties bound the error
at float32 tolerance against the generic path run in float64 on the same (float32) values.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corrgrpo_core as cc

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from corrgrpo_core._kernels import KernelOptions
from corrgrpo_core._kernels import _torch as kernel


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


def _close(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


ESTIMATORS = {"grpo": cc.grpo_advantage, "corrgrpo": cc.corr_normalized_advantage}
# on the host only (torch CPU tensors, numpy float32); batch-scope GDPO included
HOST_ESTIMATORS = {
    **ESTIMATORS,
    "mo_grpo": cc.mo_grpo_advantage,
    "gdpo": cc.gdpo_advantage,
    "gdpo_corr": cc.gdpo_corr_advantage,
    "dara": cc.dara_advantage,
    "dara_sym_corrgrpo": functools.partial(cc.dara_advantage, variant="sym", base="corrgrpo"),
}


@pytest.mark.parametrize("name", sorted(HOST_ESTIMATORS))
@settings(max_examples=60, deadline=None)
@given(x=dense_float32(), weighted=st.booleans(), placement=st.sampled_from(["inside", "outside"]))
def test_float32_kernel_matches_float64_generic_path(name, x, weighted, placement):
    fn = HOST_ESTIMATORS[name]
    weights = np.linspace(-1.0, 2.0, x.shape[-1]) if weighted else None
    kw = {"weights": weights, "eps_placement": placement}
    got = fn(torch.from_numpy(x), **kw)
    assert got.dtype == torch.float32
    assert got.shape == x.shape[:-1]
    want = fn(x.astype(np.float64), **kw)
    _close(got.numpy(), want)
    host = fn(x, **kw)  # numpy float32: the same host kernel, in float32
    assert host.dtype == np.float32
    _close(host, want)
    np.testing.assert_array_equal(host, got.numpy())


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@settings(max_examples=25, deadline=None)
@given(x=dense_float32())
def test_torch_ops_path_matches_host_path(name, dtype, x):
    """dense_ops (the path for tensors off the host) computes what the host path computes."""
    t = torch.from_numpy(x.astype(dtype))
    opts = {
        "eps": 1e-6,
        "outside": name == "grpo",
        "ddof": 1,
        "rtol": 64 * 2.220446049250313e-16,
        "floor": 0.0,
    }
    got = kernel.dense_ops(name, t, None, shape=t.shape[:-1], **opts)
    want = ESTIMATORS[name](t)
    if got is not None:  # None: mostly cancellation, the generic path runs (tested below)
        _close(got.numpy(), want.numpy())


def test_one_group_of_n_rows_and_the_paper_example():
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


def test_inputs_are_not_mutated_and_the_kernel_declines_what_it_does_not_cover():
    x = torch.rand(4, 8, 3)
    before = x.clone()
    cc.corr_normalized_advantage(x, weights=[1.0, 2.0, 3.0])
    cc.grpo_advantage(x)
    assert torch.equal(x, before)
    opts = {
        "eps": 1e-6,
        "eps_placement": "inside",
        "ddof": 1,
        "zero_variance_rtol": None,
        "singleton": "zero",
    }
    assert (
        kernel.dense("corrgrpo", x.half(), None, KernelOptions(**opts)) is None
    )  # no half-precision statistics
    assert (
        kernel.dense("corrgrpo", x.bfloat16(), None, KernelOptions(**opts)) is None
    )  # (nor a numpy view of it)
    assert kernel.dense("grpo", x.long(), None, KernelOptions(**opts)) is None
    assert (
        kernel.dense("corrgrpo", x, [1.0, 2.0], KernelOptions(**opts)) is None
    )  # wrong weights: the generic error
    assert kernel.dense("corrgrpo", x[:, :1], None, KernelOptions(**{**opts, "ddof": 1})) is None  # n <= ddof
    assert (
        kernel.dense("corrgrpo", x.requires_grad_(), None, KernelOptions(**opts)) is None
    )  # gradients: generic path
    nan = torch.rand(2, 4, 3)
    nan[1, 2, 0] = float("nan")
    assert kernel.dense("corrgrpo", nan, None, KernelOptions(**opts)) is None


def test_nan_and_inf_reach_the_generic_path():
    x = torch.rand(2, 4, 3)
    x[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        cc.corr_normalized_advantage(x)
    got = cc.corr_normalized_advantage(x, nan_policy="ignore")
    want = cc.corr_normalized_advantage(x.double().numpy(), nan_policy="ignore")
    _close(got.numpy(), want)
    x[1, 2, 0] = float("inf")
    with pytest.raises(ValueError, match="inf"):
        cc.grpo_advantage(x)


def test_gradients_flow_through_the_generic_path():
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
    _close(adv.detach().numpy(), want)


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


def test_numpy_float32_takes_the_host_kernel_and_float64_the_generic_path(monkeypatch):
    from corrgrpo_core._kernels import _host

    calls = []
    real = _host.dense
    monkeypatch.setattr(_host, "dense", lambda *a, **k: calls.append(a[1].dtype) or real(*a, **k))
    x = np.random.default_rng(0).normal(size=(3, 5, 2))
    cc.corr_normalized_advantage(x)
    assert calls == []
    out = cc.corr_normalized_advantage(x.astype(np.float32))
    assert calls == [np.float32]
    assert out.dtype == np.float32
    cc.corr_normalized_advantage(x.astype(np.float32).reshape(15, 2), np.arange(15) // 5)  # ragged: generic
    assert len(calls) == 1


def test_numpy_float32_declines_to_the_generic_path():
    x = np.random.default_rng(1).normal(size=(2, 4, 3)).astype(np.float32)
    with pytest.raises(TypeError, match="real numbers"):
        cc.grpo_advantage(x, weights=[1j, 2.0, 3.0])
    with pytest.raises(ValueError, match="one entry per reward component"):
        cc.grpo_advantage(x, weights=[1.0, 2.0])
    huge = cc.grpo_advantage(x, weights=[1e300, 1.0, 1.0])  # beyond float32: the generic path rescales
    np.testing.assert_allclose(
        huge, cc.grpo_advantage(x.astype(np.float64), weights=[1e300, 1.0, 1.0]), rtol=1e-5
    )
    x[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cc.grpo_advantage(x)
    before = x.copy()
    cc.corr_normalized_advantage(x, nan_policy="ignore")
    np.testing.assert_array_equal(x, before)  # not mutated


def test_z_family_stays_off_the_accelerator_path():
    """mo_grpo / gdpo have host kernels only: tensors off the host take the generic path."""
    opts = {
        "eps": 1e-6,
        "eps_placement": "outside",
        "ddof": 1,
        "zero_variance_rtol": None,
        "singleton": "zero",
    }
    assert (
        kernel.dense("gdpo", torch.rand(2, 4, 3), None, KernelOptions(**opts)) is not None
    )  # CPU: the host kernel
    assert kernel.dense("gdpo", torch.empty((2, 4, 3), device="meta"), None, KernelOptions(**opts)) is None


def test_cancellation_takes_the_float64_path():
    """Anti-correlated components: GDPO-corr's correlation sum is 0 and GDPO's H nearly so; float32
    cannot hold those to 1e-5, so the kernels decline and the result is the float64 one."""
    x = np.asarray([[[0.12573022, 0.64042264], [-0.13210486, 0.10490011]]], dtype=np.float32)
    w = [-1.0, 2.0]
    want = cc.gdpo_corr_advantage(x.astype(np.float64), weights=w)
    np.testing.assert_allclose(cc.gdpo_corr_advantage(x, weights=w), want, rtol=1e-6)
    np.testing.assert_allclose(
        cc.gdpo_corr_advantage(torch.from_numpy(x), weights=w).numpy(), want, rtol=1e-6
    )
    y = np.asarray(
        [[[0, 0, 10], [0, 0, 10]], [[1, 0, 10], [1, 1, 0]], [[0, 1, 0], [0, 0, 10]]], dtype=np.float32
    )
    np.testing.assert_allclose(cc.gdpo_advantage(y), cc.gdpo_advantage(y.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize(
    ("name", "x", "placement"),
    [
        (  # four components near 10 and 100 whose centred total is about 1e-3: corr floored to 0
            "corrgrpo",
            [
                [[9.998697, 100.0, 0.0, 100.002716], [10.000918, 0.0, 100.0, 100.00218]],
                [[10.000334, 0.0, 100.0, 99.98093], [10.00007, 0.0, 0.0, 100.00513]],
            ],
            "outside",
        ),
        ("grpo", [[[0.34558418, 1.0000821, 0.0, 10.0], [0.34558418, 1.000033, 10.0, 0.0]]], "inside"),
    ],
)
def test_group_totals_that_nearly_cancel_take_the_float64_path(name, x, placement):
    """Totals of large terms that nearly cancel lose their digits in float32: the host kernel
    recomputes those groups from float64 copies (to float32 rounding of the float64 result), the
    torch-ops kernel (accelerators) declines to the generic path."""
    x = np.asarray(x, dtype=np.float32)
    opts = KernelOptions(1e-6, placement, 1, None, "zero")
    want = ESTIMATORS[name](x.astype(np.float64), eps_placement=placement)
    got = kernel.dense(name, torch.from_numpy(x), None, opts)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    ops = {"eps": 1e-6, "outside": placement == "outside", "ddof": 1, "rtol": 64 * 2.2e-16, "floor": 0.0}
    assert kernel.dense_ops(name, torch.from_numpy(x), None, shape=x.shape[:-1], **ops) is None
    _close(ESTIMATORS[name](x, eps_placement=placement), want)
    _close(ESTIMATORS[name](torch.from_numpy(x), eps_placement=placement).numpy(), want)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_only_the_cancelling_groups_are_recomputed_in_float64(name, monkeypatch):
    """A batch of ordinary groups with one whose total nearly cancels: the float32 kernel keeps
    the batch and recomputes that one group (and only it) from float64 copies."""
    from corrgrpo_core._kernels import _host

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 2, 4)).astype(np.float32)
    x[3] = [[9.998697, 100.0, 0.0, 100.002716], [10.000918, 0.0, 100.0, 100.00218]]
    if name == "grpo":
        x[3] = [[0.34558418, 1.0000821, 0.0, 10.0], [0.34558418, 1.000033, 10.0, 0.0]]
    redone = []
    real = _host._redo_in_float64
    monkeypatch.setattr(
        _host,
        "_redo_in_float64",
        lambda out, x, w, groups, *a, **k: redone.append(groups) or real(out, x, w, groups, *a, **k),
    )
    got = kernel.dense(name, torch.from_numpy(x), None, KernelOptions(1e-6, "outside", 1, None, "zero"))
    assert got is not None
    assert [g.nonzero()[0].tolist() for g in redone] == [[3]]
    want = ESTIMATORS[name](x.astype(np.float64), eps_placement="outside")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@st.composite
def offsets_and_tiny_spreads(draw):
    """(B, n, K) float32: large offsets with tiny spreads, and pass/fail columns of the same size,
    so that group totals nearly cancel."""
    b, n, k = draw(st.integers(1, 3)), draw(st.integers(2, 6)), draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    big = 10.0 ** draw(st.integers(0, 3))
    cols = []
    for _ in range(k):
        if draw(st.booleans()):
            col = big * (1.0 + rng.normal(size=(b, n)) * 10.0 ** draw(st.integers(-6, -2)))
        else:
            col = big * (rng.random((b, n)) < 0.5)
        cols.append(col * draw(st.sampled_from([1.0, -1.0])))
    return np.stack(cols, axis=-1).astype(np.float32)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@settings(max_examples=80, deadline=None)
@given(x=offsets_and_tiny_spreads(), weighted=st.booleans(), placement=st.sampled_from(["inside", "outside"]))
def test_cancellation_is_declined_or_within_tolerance(name, x, weighted, placement):
    kw = {"weights": np.linspace(-1.0, 2.0, x.shape[-1]) if weighted else None, "eps_placement": placement}
    want = ESTIMATORS[name](x.astype(np.float64), **kw)
    _close(ESTIMATORS[name](x, **kw), want)
    _close(ESTIMATORS[name](torch.from_numpy(x), **kw).numpy(), want)


@pytest.mark.parametrize(
    ("name", "group", "kw"),
    [
        (  # the float32 total is constant (1.0 in every row); in float64 it varies by 1e-7
            "grpo",
            [
                [-1.4592812, 2.4592812],
                [1.8441378, -0.84413785],
                [-0.025416078, 1.0254161],
                [0.48742864, 0.51257133],
                [-0.17329346, 1.1732935],
            ],
            {"ddof": 0},
        ),
        (  # the float32 centred total is 0 in every row; in float64 it is not
            "corrgrpo",
            [[534.5492, -534.54926], [1912.3304, -1912.3306], [-1349.5734, 1349.5734]],
            {},
        ),
    ],
)
def test_a_group_that_float32_rounds_to_constant_is_recomputed(name, group, kw):
    """A group whose total float32 rounds to constant (or to a zero numerator) may vary in
    float64: it is recomputed too, alone or among ordinary groups (found by review)."""
    g = np.asarray(group, dtype=np.float32)
    rng = np.random.default_rng(1)
    batch = np.concatenate([rng.normal(size=(2, *g.shape)).astype(np.float32), g[None]])
    for x in (g[None], batch):
        want = ESTIMATORS[name](x.astype(np.float64), **kw)
        assert np.abs(want[-1]).max() > 1e-2  # the group's advantages are not 0 in float64
        np.testing.assert_allclose(ESTIMATORS[name](x, **kw), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            ESTIMATORS[name](torch.from_numpy(x), **kw).numpy(), want, rtol=1e-5, atol=1e-5
        )


def test_groups_of_one_row_with_ddof_0_give_zeros_in_float32():
    x = np.array([[[1.0, 0.0]], [[3.0, -2.0]]], dtype=np.float32)
    for name, fn in HOST_ESTIMATORS.items():
        np.testing.assert_array_equal(fn(x, ddof=0), np.zeros((2, 1), dtype=np.float32), err_msg=name)


@st.composite
def anticorrelated_large_spreads(draw):
    """(B, n, K) float32: pairs of components of large spread that nearly cancel each other row
    by row (a score and its penalty), with pass/fail columns: per-component statistics are well
    conditioned, the summed numerator is mostly cancellation."""
    b, n = draw(st.integers(1, 8)), draw(st.integers(2, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = 10.0 ** draw(st.integers(1, 4))
    base = rng.normal(size=(b, n)) * spread
    residue = rng.normal(size=(b, n)) * 10.0 ** draw(st.integers(-4, 0))
    cols = [base, -base + residue] + [
        (rng.random((b, n)) < 0.5) * 1.0 for _ in range(draw(st.integers(0, 2)))
    ]
    return np.stack(cols, axis=-1).astype(np.float32)


@pytest.mark.parametrize("name", sorted(HOST_ESTIMATORS))
@settings(max_examples=60, deadline=None)
@given(x=anticorrelated_large_spreads(), variant=st.sampled_from(["sym", "asym"]))
def test_anticorrelated_components_are_declined_or_within_tolerance(name, x, variant):
    """Every host kernel keeps 1e-4 of the largest advantage (or runs float64) when components
    cancel each other in the numerator; DARA on the CorrGRPO base once lost percents here."""
    fn = HOST_ESTIMATORS[name]
    kw = {"variant": variant} if name.startswith("dara") else {}
    want = fn(x.astype(np.float64), **kw)
    _close(fn(x, **kw), want)
    _close(fn(torch.from_numpy(x), **kw).numpy(), want)


def test_dara_on_the_corrgrpo_base_declines_a_numerator_that_cancels():
    x = [[1297.083, -1297.0881, 1], [139.39751, -139.38184, 1], [-261.25531, 261.24731, 1]]
    x += [[596.45801, -596.45044, 1], [795.22003, -795.22272, 1], [-338.45279, 338.44641, 1]]
    x += [[-165.42709, 165.42671, 1], [-900.77838, 900.77264, 1]]
    x = np.asarray(x, dtype=np.float32)
    for variant in ("sym", "asym"):
        opts = KernelOptions(1e-6, "inside", 1, None, "zero", variant=variant, base="corrgrpo")
        assert kernel.dense("dara", torch.from_numpy(x), None, opts) is None
        want = cc.dara_advantage(x.astype(np.float64), variant=variant, base="corrgrpo")
        got = cc.dara_advantage(x, variant=variant, base="corrgrpo")
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("seed", range(4))
def test_realistic_batches_keep_the_float32_kernel(name, seed):
    """Rewards as trainers see them (a normal score, pass/fail, a format check; groups of 8 and 16):
    the cancellation guard does not fire, so the fast path stays the path."""
    rng = np.random.default_rng(seed)
    b, n = 256, (8, 16)[seed % 2]
    x = np.stack(
        [
            rng.normal(size=(b, n)),
            rng.random((b, n)) < rng.random((b, 1)),  # pass/fail at each prompt's own rate
            rng.random((b, n)) < 0.9,  # format
        ],
        axis=-1,
    ).astype(np.float32)
    opts = {"eps_placement": "outside", "ddof": 1, "zero_variance_rtol": None, "singleton": "zero"}
    for weights in (None, np.asarray([1.0, 2.0, 0.5])):
        for eps in (1e-6, 1e-4):
            got = kernel.dense(name, torch.from_numpy(x), weights, KernelOptions(eps=eps, **opts))
            assert got is not None
            t = torch.from_numpy(x)
            ops = {"eps": eps, "outside": True, "ddof": 1, "rtol": 64 * 2.2e-16, "floor": 0.0}
            w = None if weights is None else torch.from_numpy(weights.astype(np.float32))
            assert kernel.dense_ops(name, t, w, shape=t.shape[:-1], **ops) is not None
            want = ESTIMATORS[name](x.astype(np.float64), weights=weights, eps=eps)
            _close(got.numpy(), want)


@pytest.mark.parametrize("name", ["grpo", "corrgrpo", "mo_grpo"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_local_kernels_in_pieces_equal_the_whole_batch_bit_for_bit(name, dtype, monkeypatch):
    """A large batch runs in pieces of whole groups (temporaries in cache): each group's advantages
    are those of the batch computed whole, bit for bit, including a group recomputed in float64."""
    from corrgrpo_core._kernels import _host

    rng = np.random.default_rng(3)
    x = rng.normal(size=(13, 4, 3)).astype(dtype)
    x[5] = [[9.998697, 100.0, 0.0], [10.000918, 0.0, 100.0], [10.0, 100.0, 0.0], [9.999, 0.0, 100.0]]
    w = np.array([1.0, -0.5, 0.25], dtype=dtype)
    options = KernelOptions(1e-6, "outside", 0, None, "zero")
    whole = _host.dense(name, x, w, options)
    monkeypatch.setattr(_host, "CHUNK_ROWS", 12)  # pieces of 3 groups, the last one of 1
    pieces = _host.dense(name, x, w, options)
    assert whole is not None
    assert pieces is not None
    np.testing.assert_array_equal(pieces, whole)


def test_a_piece_that_declines_sends_the_whole_batch_to_the_generic_path(monkeypatch):
    from corrgrpo_core._kernels import _host

    x = np.random.default_rng(4).normal(size=(6, 4, 2)).astype(np.float32)
    x[4, 1, 0] = np.inf  # in the last piece: the first ones are computed, then the call declines
    monkeypatch.setattr(_host, "CHUNK_ROWS", 8)
    assert _host.dense("corrgrpo", x, None, KernelOptions(1e-6, "outside", 0, None, "zero")) is None
    with pytest.raises(ValueError, match="inf"):  # the generic path names the problem
        cc.corr_normalized_advantage(x)


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
