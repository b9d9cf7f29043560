"""Edge cases from the adversarial audit (issue 17): huge and tiny finite inputs, ddof >= n, empty
batches, eps=inf, complex weights, and statistics over partly missing components."""

from __future__ import annotations

import math

import numpy as np
import pytest

import corrgrpo_core as cc

ALL = cc.estimator_names()
# Degree of each estimator in the rewards: A(2**k x) = 2**(k * degree) A(x) when eps = 0.
DEGREE = {"corrgrpo": 1, "dr_grpo": 1, "rloo": 1}


def _exact_options(name: str) -> dict[str, float]:
    return {"eps": 0.0} if "eps" in cc.get_estimator(name).options else {}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("power", [1000, 900, -1000, -540])
def test_huge_and_tiny_inputs_give_the_exact_advantages(name: str, power: int) -> None:
    # Each estimator is covariant under a common rescaling; a power of two rescales exactly.
    x = np.random.default_rng(power % 7).normal(size=(3, 5, 2))
    x[0, :, 0] = 4.0  # a constant component in one group
    scale = math.ldexp(1.0, power)
    opts = _exact_options(name)
    got = cc.compute_advantages(x * scale, estimator=name, **opts)
    want = cc.compute_advantages(x, estimator=name, **opts) * scale ** DEGREE.get(name, 0)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=0)


@pytest.mark.parametrize("name", ALL)
def test_extreme_finite_values_give_finite_advantages_with_default_options(name: str, backend) -> None:
    x = np.array([[1e308, 1.0], [-1e308, 2.0], [1e308, 3.0], [-1e308, 5.0]])
    adv = cc.compute_advantages(x, estimator=name)
    assert np.all(np.isfinite(adv))
    assert np.all(np.sign(adv) == [1, -1, 1, -1])  # the huge component dominates every estimator
    # every backend rescales alike (jax and GPUs flush subnormal factors: the factor stays normal)
    got = backend.to_numpy(cc.compute_advantages(backend.asarray(x), estimator=name))
    np.testing.assert_allclose(got, adv, rtol=1e-12, atol=0)


def test_a_tiny_component_next_to_a_large_one_stays_finite() -> None:
    # one scale for the batch: the tiny component's squares stay subnormal, but nothing breaks
    x = np.random.default_rng(4).normal(size=(3, 4, 2)) * np.array([1e-162, 1e34])
    for name in ALL:
        assert np.all(np.isfinite(cc.compute_advantages(x, estimator=name)))
    stats = cc.advantage_stats(x)
    assert np.all(np.isfinite(stats.c_q))


def test_eps_is_rescaled_with_the_data() -> None:
    x = np.random.default_rng(1).normal(size=(2, 4, 3))
    for placement in ("inside", "outside"):
        small = cc.grpo_advantage(x, eps=0.5, eps_placement=placement)
        huge = cc.grpo_advantage(
            x * 2.0**400,
            eps=0.5 * 2.0 ** (400 * (1 if placement == "outside" else 2)),
            eps_placement=placement,
        )
        np.testing.assert_allclose(huge, small, rtol=1e-12)
    # weights are rescaled too: a huge weight is a common factor of the weighted rewards
    w = np.array([1e300, 2e300, -1e300])
    np.testing.assert_allclose(
        cc.corrgrpo_advantage(x, weights=w, eps=0.0),
        cc.corrgrpo_advantage(x, weights=w / 1e300, eps=0.0) * 1e300,
        rtol=1e-11,
    )


@pytest.mark.parametrize(
    ("name", "dtype", "value"),
    [
        ("dr_grpo", np.float16, 6e4),
        ("rloo", np.float16, 6e4),
        ("dr_grpo", np.float32, 3e38),
        ("rloo", np.float32, 3e38),
        ("rloo", np.float64, 1.7e308),
    ],
)
def test_advantages_beyond_the_dtype_are_refused(name: str, dtype: type, value: float) -> None:
    x = np.array([[value, 1.0], [-value, 2.0], [value, 3.0]], dtype=dtype)
    with pytest.raises(ValueError, match=f"advantages overflow {np.dtype(dtype).name}"):
        cc.compute_advantages(x, estimator=name)


def test_advantage_stats_of_huge_rewards() -> None:
    x = np.array([[1.0, 0.5], [-1.0, 2.0], [1.0, 3.0]])
    c_q = cc.advantage_stats(x).c_q
    np.testing.assert_allclose(
        cc.advantage_stats(x * 1e150, eps=0.0).c_q, cc.advantage_stats(x, eps=0.0).c_q * 1e150, rtol=1e-12
    )
    assert np.all(np.isfinite(c_q))
    with pytest.raises(ValueError, match="covariance_sum overflow float64"):
        cc.advantage_stats(x * 1e300)  # its variance, 1e600, has no float64


def test_subnormal_squares_keep_the_correlation_sum() -> None:
    x = np.random.default_rng(2).normal(size=(6, 8, 3))
    want = cc.advantage_stats(x).correlation_sum
    for tiny in (1e-162, 1e-200, 1e-300):
        got = cc.advantage_stats(x * tiny)
        np.testing.assert_allclose(got.correlation_sum, want, rtol=1e-10)
        assert all(np.all(np.isfinite(getattr(got, f))) for f in ("c_q", "variance_share", "total_std"))


@pytest.mark.parametrize("name", ALL)
def test_ddof_at_least_the_group_size_gives_zero(name: str, figure2: np.ndarray) -> None:
    if "ddof" not in cc.get_estimator(name).options:
        pytest.skip("no ddof option")
    for ddof in (4, 5):
        adv = cc.compute_advantages(figure2, estimator=name, ddof=ddof)
        np.testing.assert_array_equal(adv, np.zeros(4))
    stats = cc.advantage_stats(figure2, ddof=4)
    np.testing.assert_array_equal(stats.advantage_contribution, np.zeros((4, 3)))


@pytest.mark.parametrize(
    ("shape", "ids"), [((0, 3), None), ((0, 4, 3), None), ((0, 2), np.zeros(0, dtype=int))]
)
def test_empty_batch_diagnostics(shape: tuple[int, ...], ids: np.ndarray | None) -> None:
    stats = cc.advantage_stats(np.zeros(shape), ids)
    lead = shape[:-1] if len(shape) == 3 or ids is not None else shape[:1]
    assert stats.c_q.shape == lead
    assert stats.variance_share.shape == (*lead, shape[-1])
    assert stats.summary() == {"groups": 0.0}
    assert stats.degenerate.shape == lead
    assert cc.corrgrpo_advantage(np.zeros(shape), ids).shape == lead


@pytest.mark.parametrize("option", ["eps", "min_correlation_sum", "zero_variance_rtol"])
def test_infinite_options_are_refused(option: str) -> None:
    with pytest.raises(
        ValueError, match=f"{option} must be a non-negative number, got inf .it must be finite"
    ):
        cc.corrgrpo_advantage(np.ones((4, 2)), **{option: math.inf})
    with pytest.raises(ValueError, match="it must be finite"):
        cc.advantage_stats(np.ones((4, 2)), **{option: math.inf})


@pytest.mark.parametrize(
    "weights",
    [np.array([1 + 2j, 1.0]), [1 + 0j, 1.0], [np.complex128(1), 1.0]],
    ids=["array", "python", "numpy-scalar"],
)
def test_complex_weights_are_refused(weights: object) -> None:
    with pytest.raises(TypeError, match="weights must be real numbers"):
        cc.corrgrpo_advantage(np.ones((4, 2)), weights=weights)


def _pairwise_loop(x: np.ndarray, ids: np.ndarray, w: np.ndarray, rtol: float) -> np.ndarray:
    """Per row: its group's sum of Pearson correlations over pairwise-complete rows, one loop per group
    and pair (np.corrcoef), independent of the core's reductions."""
    out = np.empty(x.shape[0])
    xw = x * w
    for g in np.unique(ids):
        rows = xw[ids == g]
        k = rows.shape[1]

        def varies(v: np.ndarray) -> bool:
            v = v[~np.isnan(v)]
            return v.size > 1 and v.std() > rtol * np.sqrt(np.mean(v * v))

        total = 0.0
        for a in range(k):
            for b in range(k):
                if not (varies(rows[:, a]) and varies(rows[:, b])):
                    continue
                if a == b:
                    total += 1.0
                    continue
                both = ~np.isnan(rows[:, a]) & ~np.isnan(rows[:, b])
                pa, pb = rows[both, a], rows[both, b]
                if (
                    both.sum() > 1
                    and pa.std() > rtol * np.sqrt(np.mean(pa * pa))
                    and pb.std() > rtol * np.sqrt(np.mean(pb * pb))
                ):
                    total += np.corrcoef(pa, pb)[0, 1]
        out[ids == g] = total
    return out


@pytest.mark.parametrize("seed", range(6))
def test_missing_entries_use_pairwise_complete_correlations(seed: int, backend) -> None:
    rng = np.random.default_rng(seed)
    n, k = 40, 4
    x = rng.normal(size=(n, k))
    x[:, 3] = 0.7 * x[:, 0] + 0.3 * rng.normal(size=n)  # correlated components
    x[rng.random((n, k)) < 0.25] = np.nan
    x[5, :] = np.nan  # a row with nothing scored
    x[ids_const := slice(0, 4), 2] = 1.5  # constant where present in group 0
    ids = np.repeat(np.arange(8), 5)
    w = np.array([1.0, -2.0, 0.5, 1.0])
    got = cc.advantage_stats(
        backend.asarray(x), backend.asarray(ids), weights=backend.asarray(w), nan_policy="ignore"
    )
    want = _pairwise_loop(x, ids, w, rtol=64 * np.finfo(np.float64).eps)
    np.testing.assert_allclose(backend.to_numpy(got.correlation_sum), want, rtol=1e-9, atol=1e-12)
    del ids_const


def test_one_missing_value_keeps_a_self_correlation_of_one() -> None:
    # one value of five missing, next to a complete component that does not vary: the sum is rho_00 = 1
    x = np.array([[1.0, 3.0], [2.0, 3.0], [np.nan, 3.0], [4.0, 3.0], [7.0, 3.0]])
    stats = cc.advantage_stats(x, nan_policy="ignore")
    np.testing.assert_allclose(stats.correlation_sum, 1.0, rtol=1e-12)
    # two copies of that component: 4, whatever is missing
    both = np.concatenate([x[:, :1], x[:, :1], x[:, 1:]], axis=1)
    np.testing.assert_allclose(cc.advantage_stats(both, nan_policy="ignore").correlation_sum, 4.0, rtol=1e-12)


def test_without_missing_entries_pairwise_equals_the_identity() -> None:
    x = np.random.default_rng(9).normal(size=(5, 6, 3))
    complete = cc.advantage_stats(x)
    x_nan = x.copy()
    x_nan[0, 0, 0] = np.nan
    partial = cc.advantage_stats(x_nan, nan_policy="ignore")
    np.testing.assert_allclose(partial.correlation_sum[1:], complete.correlation_sum[1:], rtol=1e-12)


def _batch_std_loop(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """TRL's scale_rewards="batch", written out: nan-summed weighted total (NaN for all-missing rows),
    centred by its group's nan-mean, over one nan-std (ddof 1) of the whole batch plus eps; NaN -> 0."""
    b, n, _ = x.shape
    r = np.nansum(x * w, axis=-1)
    r[np.isnan(x).all(axis=-1)] = np.nan
    out = np.zeros((b, n))
    present = r[~np.isnan(r)]
    std = present.std(ddof=1) if present.size > 1 else np.nan
    for g in range(b):
        for i in range(n):
            if not np.isnan(r[g, i]):
                out[g, i] = (r[g, i] - np.nanmean(r[g])) / (std + eps)
    return np.nan_to_num(out, nan=0.0)


@pytest.mark.parametrize("seed", range(4))
def test_grpo_batch_std_scope_equals_a_loop(seed: int, backend) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(5, 4, 3)) * np.array([1.0, 10.0, 0.1])
    x[rng.random(x.shape) < 0.2] = np.nan
    x[1, 2, :] = np.nan  # nothing scored
    w = np.array([1.0, 0.5, -2.0])
    got = cc.grpo_advantage(
        backend.asarray(x),
        weights=backend.asarray(w),
        eps=1e-4,
        std_scope="batch",
        nan_policy="ignore",
        zero_variance_rtol=0.0,
    )
    np.testing.assert_allclose(backend.to_numpy(got), _batch_std_loop(x, w, 1e-4), rtol=1e-10, atol=1e-12)
    # ragged ids in any order give the same
    ids = np.repeat(np.arange(5), 4)
    perm = rng.permutation(20)
    ragged = cc.grpo_advantage(
        x.reshape(20, 3)[perm],
        ids[perm],
        weights=w,
        eps=1e-4,
        std_scope="batch",
        nan_policy="ignore",
        zero_variance_rtol=0.0,
    )
    np.testing.assert_allclose(ragged, _batch_std_loop(x, w, 1e-4).reshape(20)[perm], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="std_scope must be one of 'group', 'batch', got 'global'"):
        cc.grpo_advantage(x, std_scope="global", nan_policy="ignore")


def test_diagnostic_options_are_options_of_both_sides() -> None:
    import inspect

    stats_options = set(inspect.signature(cc.advantage_stats).parameters)
    for name in ALL:
        spec = cc.get_estimator(name)
        assert set(spec.diagnostic_options) <= set(spec.options) & stats_options, name
    assert set(cc.get_estimator("corrgrpo").diagnostic_options) == {
        "ddof",
        "eps",
        "eps_placement",
        "min_correlation_sum",
        "nan_policy",
        "zero_variance_rtol",
    }
