"""Group and batch moments (``corrgrpo_core._stats``) on every backend against numpy.

Means and variances against ``numpy.mean`` / ``numpy.var`` with ``ddof``, one-pass and centred
sums of squares, missing entries, the scale-relative zero-variance test, and the row sums the
estimators take without materialising the centred values.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corrgrpo_core._groups import Groups, dense_groups, find_runs, ragged_groups
from corrgrpo_core._lib._compat import array_namespace, device
from corrgrpo_core._stats import Moments, batch_moments, group_moments

RTOL = 64 * float(np.finfo(np.float64).eps)


def _settings(backend):
    return settings(
        max_examples=backend.examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


def _groups(backend, ids: np.ndarray | None, shape: tuple[int, ...], *, small: bool | None = None) -> Groups:
    xp = array_namespace(backend.asarray(np.zeros(1)))
    if ids is None:
        groups = dense_groups(xp, shape, xp.float64, device(backend.asarray(np.zeros(1))))
    else:
        b_ids = backend.asarray(ids)
        groups = ragged_groups(xp, b_ids, xp.float64, device(b_ids), lazy=False, runs=find_runs(xp, b_ids))
    if small is not None:  # force the one-pass (small) or the centred (large) sum of squares
        groups = Groups(
            kernel=groups.kernel, count_g=groups.count_g, ragged=groups.ragged, size=groups.size, small=small
        )
    return groups


@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray | None]:
    """(x, ids): a dense (B, n, K) batch (ids None) or a ragged (N, K) one, columns of several kinds."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(1, 4))
    if draw(st.booleans()):
        shape: tuple[int, ...] = (draw(st.integers(1, 4)), draw(st.integers(1, 7)), k)
        ids = None
    else:
        ids = rng.integers(0, draw(st.integers(1, 6)), draw(st.integers(1, 30)))
        shape = (ids.shape[0], k)
    x = rng.normal(size=shape) * 10.0 ** draw(st.integers(-3, 3)) + draw(st.sampled_from([0.0, 1.0, 1e4]))
    if draw(st.booleans()):  # binary pass/fail component
        x[..., 0] = (rng.random(shape[:-1]) < 0.5).astype(float)
    return x, ids


def _per_row_numpy(
    x: np.ndarray, ids: np.ndarray | None, ddof: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: its group's mean, variance (0 where rows <= ddof) and row count, by numpy."""
    if ids is None:
        n = x.shape[1]
        var = np.var(x, axis=1, ddof=ddof, keepdims=True) if n > ddof else np.zeros_like(x[:, :1])
        return (
            np.broadcast_to(x.mean(axis=1, keepdims=True), x.shape),
            np.broadcast_to(var, x.shape),
            np.full(x.shape[:-1], n),
        )
    mean, var, count = np.zeros_like(x), np.zeros_like(x), np.zeros(x.shape[0])
    for g in np.unique(ids):
        rows = ids == g
        mean[rows] = x[rows].mean(axis=0)
        var[rows] = x[rows].var(axis=0, ddof=ddof) if rows.sum() > ddof else 0.0
        count[rows] = rows.sum()
    return mean, var, count


def _close(got, want, scale: float) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * max(1.0, scale))


def test_group_moments_match_numpy_mean_and_var(backend) -> None:
    @_settings(backend)
    @given(batch=batches(), ddof=st.integers(0, 2), small=st.sampled_from([None, True, False]))
    def check(batch: tuple[np.ndarray, np.ndarray | None], ddof: int, small: bool | None) -> None:
        x, ids = batch
        groups = _groups(backend, ids, x.shape, small=small)
        bx = backend.asarray(x)
        m = group_moments(bx, None, groups, ddof=ddof, rtol=RTOL)
        mean, var, count = _per_row_numpy(x, ids, ddof)
        scale = float(np.abs(x).max()) ** 2
        rows = lambda a: np.broadcast_to(backend.to_numpy(a), x.shape)
        _close(rows(m.var), var, scale)
        _close(rows(m.std), np.sqrt(var), scale**0.5)
        _close(backend.to_numpy(m.centred), x - mean, scale**0.5)
        np.testing.assert_array_equal(np.broadcast_to(backend.to_numpy(m.count)[..., 0], count.shape), count)
        varies = rows(m.varies)
        assert not varies[var == 0].any()  # no spread (or no degrees of freedom): never varies
        z = backend.to_numpy(m.z)
        want_z = np.where(varies, (x - mean) / np.where(varies, np.sqrt(var), 1.0), 0.0)
        np.testing.assert_allclose(z, want_z, rtol=1e-7, atol=1e-7)
        np.testing.assert_array_equal(x, backend.to_numpy(bx))  # input untouched

    check()


def test_batch_moments_match_numpy(backend) -> None:
    @_settings(backend)
    @given(batch=batches(), ddof=st.integers(0, 1))
    def check(batch: tuple[np.ndarray, np.ndarray | None], ddof: int) -> None:
        x, ids = batch
        groups = _groups(backend, ids, x.shape)
        m = batch_moments(backend.asarray(x), None, groups, ddof=ddof, rtol=RTOL)
        flat = x.reshape(-1, x.shape[-1])
        var = flat.var(axis=0, ddof=ddof) if flat.shape[0] > ddof else np.zeros(x.shape[-1])
        scale = float(np.abs(x).max()) ** 2
        _close(backend.to_numpy(m.var_g).reshape(-1), var, scale)
        _close(backend.to_numpy(m.centred), x - flat.mean(axis=0), scale**0.5)

    check()


def test_row_sums_without_the_centred_values(backend) -> None:
    """row_sum / z_row_sum from the shifted values equal the sums of the centred values and z."""

    @_settings(backend)
    @given(batch=batches())
    def check(batch: tuple[np.ndarray, np.ndarray | None]) -> None:
        x, ids = batch
        groups = _groups(backend, ids, x.shape, small=True)  # one pass: the centred values are not kept
        bx = backend.asarray(x)
        fresh = lambda: group_moments(bx, None, groups, ddof=1, rtol=RTOL)
        m = fresh()
        assert "centred" not in m.__dict__
        scale = float(np.abs(x).max())
        _close(backend.to_numpy(m.row_sum()), backend.to_numpy(fresh().centred).sum(-1, keepdims=True), scale)
        _close(backend.to_numpy(m.z_row_sum()), backend.to_numpy(fresh().z).sum(-1, keepdims=True), scale)
        den = m.std_g + 1.0
        _close(
            backend.to_numpy(m.divided(den)), backend.to_numpy(fresh().centred / groups.expand(den)), scale
        )
        w = backend.asarray(np.linspace(-1.0, 2.0, x.shape[-1]))
        _close(backend.to_numpy(m.scaled(m.inv_std_g * w)), backend.to_numpy(fresh().z * w), scale)

    check()


def test_missing_values_are_left_out(backend) -> None:
    x = np.asarray([[1.0, 5.0], [2.0, np.nan], [4.0, 7.0], [np.nan, np.nan], [3.0, 1.0]])
    ids = np.asarray([0, 0, 0, 1, 1])
    valid = ~np.isnan(x)
    groups = _groups(backend, ids, x.shape)
    m = group_moments(
        backend.asarray(np.where(valid, x, 0.0)), backend.asarray(valid), groups, ddof=1, rtol=RTOL
    )
    var = backend.to_numpy(m.var)
    np.testing.assert_allclose(var[0], [np.var([1, 2, 4], ddof=1), np.var([5, 7], ddof=1)], rtol=1e-12)
    np.testing.assert_array_equal(var[3], [0.0, 0.0])  # one present value, ddof 1: no spread
    np.testing.assert_array_equal(backend.to_numpy(m.count)[3], [1.0, 1.0])
    centred = backend.to_numpy(m.centred)
    assert centred[1, 1] == 0.0
    assert (centred[3] == 0.0).all()
    np.testing.assert_allclose(centred[0], [1 - 7 / 3, -1.0], rtol=1e-12)


@pytest.mark.parametrize("layout", ["dense", "ragged"])
def test_a_missing_shift_row_keeps_the_precision(backend, layout: str) -> None:
    """The values are shifted by one row of their group; where that row's entry is missing, by the mean
    of the present ones, not by 0: a spread of 1e-3 about 1e4 keeps its digits, and a constant is still
    exactly 0 (``rtol=0``). Each row in turn is the missing one, so the shift row is among them."""
    rng = np.random.default_rng(3)
    n = 6
    base = np.stack([1e4 + 1e-3 * rng.normal(size=n), np.full(n, 0.1), -25.5 + rng.normal(size=n)], 1)
    for missing in range(n):
        x = base.copy()
        x[missing, :2] = np.nan
        valid = ~np.isnan(x)
        if layout == "dense":
            xs, vs, ids = x[None], valid[None], None
        else:  # two groups, rows interleaved: the ragged index
            xs = np.concatenate([x, base + 1.0])[np.argsort(np.r_[2 * np.arange(n), 2 * np.arange(n) + 1])]
            vs = ~np.isnan(xs)
            ids = np.arange(2 * n) % 2
        groups = _groups(backend, ids, xs.shape)
        m = group_moments(
            backend.asarray(np.where(vs, xs, 0.0)), backend.asarray(vs), groups, ddof=1, rtol=0.0
        )
        ours = slice(None) if ids is None else slice(0, None, 2)  # the rows of x
        z = backend.to_numpy(m.z).reshape(-1, 3)[ours]
        centred = backend.to_numpy(m.centred).reshape(-1, 3)[ours]
        present = x[valid[:, 0], 0]
        mean = sum(map(Fraction, present)) / len(present)  # exact: a float mean is itself 1e-12 off
        want = np.asarray(
            [float(Fraction(v) - mean) if ok else 0.0 for v, ok in zip(x[:, 0], valid[:, 0], strict=True)]
        )
        # the centring error of a shifted sum is a few ulps of the spread (about 1e-19 here), where
        # centring the raw values costs ulps of the offset (about 2e-12)
        np.testing.assert_allclose(centred[:, 0], want, rtol=0, atol=1e-16)
        np.testing.assert_allclose(z[:, 0], want / present.std(ddof=1), rtol=0, atol=1e-12)
        assert (z[:, 1] == 0.0).all()  # constant, with the exact var > 0 test
        assert not backend.to_numpy(m.varies).reshape(-1, 3)[ours, 1].any()


def test_constant_components_are_exact_zeros(backend) -> None:
    """Shifted by a member of the group, a constant component is exactly 0, at any offset."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 3))
    x[..., 1] = 0.1  # not representable: a mean would round
    x[..., 2] = 1e8 + 0.3
    for small in (True, False):
        m = group_moments(
            backend.asarray(x), None, _groups(backend, None, x.shape, small=small), ddof=1, rtol=RTOL
        )
        for field in (m.centred, m.z, m.var):
            assert (backend.to_numpy(field)[..., 1:] == 0.0).all()
        assert not backend.to_numpy(m.varies)[..., 1:].any()
        assert backend.to_numpy(m.varies)[..., 0].all()


def test_zero_variance_tolerance_is_relative_to_the_values() -> None:
    """A spread below rtol times the values' magnitude is rounding, not signal; rtol = 0 is var > 0."""
    x = np.asarray([[[1e6], [1e6 + 1e-9], [1e6], [1e6 - 1e-9]]])
    groups = dense_groups(np, x.shape, np.float64, "cpu")
    assert not group_moments(x, None, groups, ddof=0, rtol=RTOL).varies.any()
    assert group_moments(x, None, groups, ddof=0, rtol=0.0).varies.all()
    tiny = x - 1e6  # the same spread about 0 is signal
    assert group_moments(tiny, None, groups, ddof=0, rtol=RTOL).varies.all()
    # scale invariance: the test compares like with like
    assert group_moments(x * 2.0**-600, None, groups, ddof=0, rtol=RTOL).varies.sum() == 0


@pytest.mark.parametrize("ddof", [1, 2])
def test_too_few_rows_have_no_spread(ddof: int) -> None:
    x = np.asarray([[1.0], [5.0], [2.0]])
    ids = np.asarray([0, 1, 1])
    groups = ragged_groups(np, ids, np.float64, "cpu", lazy=False, runs=find_runs(np, ids))
    m = group_moments(x, None, groups, ddof=ddof, rtol=RTOL)
    assert m.var[0, 0] == 0.0
    assert not m.varies[0, 0]
    assert m.z[0, 0] == 0.0
    assert (m.varies[1:, 0] == (ddof == 1)).all()


def test_large_groups_are_centred_first() -> None:
    """Groups over the one-pass size are centred before squaring: exact variance at a large offset."""
    n = 3000
    x = (1e7 + np.arange(n, dtype=np.float64) % 3)[None, :, None]
    groups = dense_groups(np, x.shape, np.float64, "cpu")
    assert not groups.small
    m: Moments = group_moments(x, None, groups, ddof=0, rtol=RTOL)
    np.testing.assert_allclose(m.var_g.ravel(), np.var(x), rtol=1e-12)
    assert "centred" in m.__dict__  # kept from the two-pass route
