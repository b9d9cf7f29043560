"""The invariants the paper proves, as property tests on every backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corrgrpo_core as cc
from corrgrpo_core.testing import check_batch, reward_batches

KINDS = ("corrgrpo", "grpo", "dr_grpo", "rloo", "mo_grpo", "gdpo")


def for_backend(backend, **strategies):
    """Run the decorated property with ``backend``'s example budget (jax compiles per shape)."""

    def wrap(body):
        settings(max_examples=backend.examples)(given(**strategies)(body))()

    return wrap


@pytest.mark.parametrize("kind", KINDS)
def test_conformance_kit_on_every_backend(backend, kind):
    @for_backend(backend, batch=reward_batches())
    def _(batch):
        check_batch(
            lambda s, g: cc.compute_advantages(s, g, estimator=kind),
            batch,
            kind=kind,
            to_array=backend.asarray,
            to_numpy=backend.to_numpy,
        )


def test_corrgrpo_is_c_q_times_grpo(backend):
    @for_backend(
        backend,
        batch=reward_batches(min_group_size=2),
        eps=st.sampled_from([1e-6, 1e-3]),
        placement=st.sampled_from(["inside", "outside"]),
    )
    def _(batch, eps, placement):
        _c_q_property(backend, batch, eps, placement)


def _c_q_property(backend, batch, eps, placement):
    x, ids = backend.asarray(batch.scores), backend.asarray(batch.group_ids)
    corr = cc.corrgrpo_advantage(x, ids, eps=eps, eps_placement=placement)
    stats = cc.advantage_stats(x, ids, eps=eps, eps_placement=placement)
    grpo = cc.grpo_advantage(x, ids, eps=eps, eps_placement=placement)
    c_q = backend.to_numpy(stats.c_q)
    assert np.all(c_q > 0)
    varies = backend.to_numpy(stats.total_std) > 0
    np.testing.assert_allclose(
        backend.to_numpy(corr)[varies], (c_q * backend.to_numpy(grpo))[varies], rtol=1e-9, atol=1e-12
    )


@given(batch=reward_batches())
def test_masked_correlation_matrix_is_psd_and_its_sum_is_the_correlation_sum(batch):
    stats = cc.advantage_stats(batch.scores, batch.group_ids)
    for gid in np.unique(batch.group_ids):
        rows = batch.group_ids == gid
        g = batch.scores[rows]
        if g.shape[0] < 2:
            assert np.all(stats.correlation_sum[rows] == 0)
            continue
        c = g - g.mean(axis=0)
        sd = np.sqrt((c**2).sum(axis=0))
        keep = sd > 1e-12 * np.sqrt((g**2).sum(axis=0))
        inv = np.where(keep, 1 / np.where(keep, sd, 1), 0)
        rho = (c.T @ c) * np.outer(inv, inv)
        assert np.linalg.eigvalsh(rho).min() >= -1e-9
        assert rho.sum() >= -1e-9
        np.testing.assert_allclose(stats.correlation_sum[rows], rho.sum(), rtol=1e-8, atol=1e-9)


def test_duplicating_every_component_leaves_corrgrpo_unchanged(backend):
    for_backend(backend, batch=reward_batches(min_group_size=2))(lambda batch: _duplicate_all(backend, batch))


def _duplicate_all(backend, batch):
    x, ids = batch.scores, backend.asarray(batch.group_ids)
    once = cc.corrgrpo_advantage(backend.asarray(x), ids, eps=0.0)
    stats = cc.advantage_stats(backend.asarray(x), ids, eps=0.0)
    twice = cc.corrgrpo_advantage(backend.asarray(np.concatenate([x, x], axis=1)), ids, eps=0.0)
    # where the correlations cancel (sum ~ 0) and eps = 0, both sides are rounding noise over ~0
    conditioned = backend.to_numpy(stats.correlation_sum) > 1e-6
    np.testing.assert_allclose(
        backend.to_numpy(twice)[conditioned], backend.to_numpy(once)[conditioned], rtol=1e-9, atol=1e-9
    )


@given(batch=reward_batches(max_components=1))
def test_a_duplicated_single_reward_is_not_doubled(batch):
    x = batch.scores
    twice = cc.corrgrpo_advantage(np.concatenate([x, x], axis=1), batch.group_ids, eps=0.0)
    np.testing.assert_allclose(twice, cc.dr_grpo_advantage(x, batch.group_ids), rtol=1e-9, atol=1e-9)


@given(batch=reward_batches(max_components=1), constants=st.lists(st.floats(-1e3, 1e3), max_size=4))
def test_one_varying_component_is_dr_grpo(batch, constants):
    x = np.concatenate([batch.scores, np.tile(constants, (batch.scores.shape[0], 1))], axis=1)
    corr = cc.corrgrpo_advantage(x, batch.group_ids, eps=1e-6)
    dr = cc.dr_grpo_advantage(batch.scores, batch.group_ids)
    np.testing.assert_allclose(corr, dr / np.sqrt(1 + 1e-6), rtol=1e-9, atol=1e-9)


@given(batch=reward_batches(), values=st.sampled_from([0.1, 1 / 3, 7.3, -0.7]))
def test_a_constant_component_is_the_same_as_no_component(batch, values):
    for dtype in (np.float32, np.float64):
        x = batch.scores.astype(dtype)
        with_constant = np.concatenate([x, np.full((x.shape[0], 1), values, dtype=dtype)], axis=1)
        for rtol in (None, 0.0):
            np.testing.assert_array_equal(
                cc.corrgrpo_advantage(with_constant, batch.group_ids, zero_variance_rtol=rtol),
                cc.corrgrpo_advantage(x, batch.group_ids, zero_variance_rtol=rtol),
            )


@given(batch=reward_batches(), seed=st.integers(0, 2**32 - 1))
def test_relabelling_groups_changes_nothing(batch, seed):
    labels = np.unique(batch.group_ids)
    new = np.random.default_rng(seed).permutation(len(labels)) * 7 - 3
    relabelled = new[np.searchsorted(labels, batch.group_ids)]
    for name in cc.estimator_names():
        np.testing.assert_allclose(
            cc.compute_advantages(batch.scores, relabelled, estimator=name),
            cc.compute_advantages(batch.scores, batch.group_ids, estimator=name),
            rtol=1e-10,
            atol=1e-10,
        )


def test_dense_and_ragged_layouts_agree(backend):
    for_backend(backend, batch=reward_batches(equal_sizes=True))(lambda batch: _dense_ragged(backend, batch))


def _dense_ragged(backend, batch):
    dense, order = batch.dense()
    for name in cc.estimator_names():
        d = backend.to_numpy(cc.compute_advantages(backend.asarray(dense), estimator=name)).reshape(-1)
        r = backend.to_numpy(
            cc.compute_advantages(
                backend.asarray(batch.scores), backend.asarray(batch.group_ids), estimator=name
            )
        )
        np.testing.assert_allclose(d, r[order], rtol=1e-9, atol=1e-9, err_msg=name)


@given(batch=reward_batches(min_group_size=2))
def test_gdpo_has_batch_mean_zero_and_std_one(batch):
    adv = cc.gdpo_advantage(batch.scores, batch.group_ids, eps=0.0)
    if np.any(adv != 0):
        assert abs(adv.mean()) < 1e-9
        assert adv.std(ddof=1) == pytest.approx(1.0, rel=1e-9)


@given(batch=reward_batches(min_group_size=2, equal_sizes=True), variant=st.sampled_from(["sym", "asym"]))
def test_dara_with_equal_densities_is_gdpo(batch, variant):
    rng = np.random.default_rng(0)
    x = rng.normal(size=batch.scores.shape)  # every component varies in every group
    np.testing.assert_allclose(
        cc.dara_advantage(x, batch.group_ids, variant=variant),
        cc.gdpo_advantage(x, batch.group_ids),
        rtol=1e-10,
        atol=1e-10,
    )


def test_dara_weights_rare_components_up_to_the_cap():
    ids = np.repeat(np.arange(4), 2)
    common = np.array([0, 1, 0, 1, 0, 1, 0, 1], dtype=float)
    rare = np.array([0, 1, 0, 0, 0, 0, 0, 0], dtype=float)  # varies in 1 of 4 groups: weight 2
    x = np.stack([common, rare], axis=1)
    z = cc.mo_grpo_advantage(x[:, 1:], ids)
    sym = cc.dara_advantage(x, ids, variant="sym")
    expected = cc.gdpo_advantage(x, ids, weights=[1.0, 2.0])
    np.testing.assert_allclose(sym, expected, rtol=1e-12)
    capped = cc.dara_advantage(x, ids, variant="sym", max_weight=1.5)
    assert not np.allclose(capped, sym)
    # on the CorrGRPO base, Asym doubles the rare component's positive centred part only
    asym = cc.dara_advantage(x, ids, variant="asym", base="corrgrpo")
    expected = np.concatenate(
        [np.array([-1.0, 1.5]) / np.sqrt(4 + 1e-6), np.tile([-0.5, 0.5], 3) / np.sqrt(1 + 1e-6)]
    )
    np.testing.assert_allclose(asym, expected, rtol=1e-12)
    assert z.shape == asym.shape


def test_float32_inputs_agree_with_float64(backend):
    for_backend(backend, batch=reward_batches(min_group_size=2))(lambda batch: _float32(backend, batch))


def _float32(backend, batch):
    if backend.name == "array_api_strict":
        x32 = backend.xp.asarray(batch.scores.astype(np.float32))
    else:
        x32 = backend.asarray(batch.scores.astype(np.float32))
    ids = backend.asarray(batch.group_ids)
    for name in ("corrgrpo", "grpo", "gdpo"):
        a32 = cc.compute_advantages(x32, ids, estimator=name)
        assert a32.dtype == x32.dtype
        a64 = cc.compute_advantages(
            batch.scores.astype(np.float32).astype(np.float64), batch.group_ids, estimator=name
        )
        np.testing.assert_allclose(
            backend.to_numpy(a32), a64, rtol=1e-5, atol=1e-5 * max(1, np.abs(a64).max())
        )


U = float(np.finfo(np.float64).eps)
EPS = 1e-6  # the estimators' default


def _rounding_spread(name, scores, group_ids, ref):
    """Per row: how far two correct float64 evaluations of estimator ``name`` may differ, beyond
    1e-9 of the result, when one leaves rows out and the other masks them.

    Each is exact up to a relative error gamma u (gamma = n + 10 operations for a group of n rows)
    in every per-component statistic; one final step amplifies that:

    * a batch z-score (GDPO, DARA on its GDPO base) of s_i = sum_k w_k f(z_ik), |f(z)| <= max_weight
      |z| <= max_weight sqrt(n): an error d in s moves row i by up to (2 + |a_i|) d / (std_B s + eps),
      and std_B s + eps = eps / (1 - std_B a) (eps outside the root) follows from the result's own
      spread. Nearly cancelling components give std_B s << eps: 1e-9 of the result is then less
      than an ulp of s.

    CorrGRPO needs no term: where rows are wholly missing, ``_estimators.corr_parts`` takes the
    same z-score identity as the complete path, so S errs relative to itself, also at S = 0
    (``test_a_missing_row_leaves_a_redundant_group_unchanged``).
    """
    if ref.shape[0] < 2:  # nothing left, or one row: 0 (no spread) either way
        return np.zeros_like(ref)
    n = int(np.unique(group_ids, return_counts=True)[1].max())
    k = scores.shape[1]
    gamma = n + 10
    if name in ("gdpo", "dara"):
        f_max = 5.0 if name == "dara" else 1.0  # DARA's default max_weight
        d = gamma * U * k * f_max * np.sqrt(n)
        inv_den = max(1.0 - float(np.std(ref, ddof=1)), 0.0) / EPS
        return 2 * (2 + np.abs(ref)) * d * inv_den
    return np.zeros_like(ref)


@given(batch=reward_batches(min_group_size=2), data=st.data())
def test_rows_with_every_reward_missing_are_left_out(batch, data):
    x = batch.scores.copy()
    missing = data.draw(st.lists(st.integers(0, x.shape[0] - 1), max_size=3, unique=True))
    x[missing] = np.nan
    kept = np.setdiff1d(np.arange(x.shape[0]), missing)
    for name in cc.estimator_names():
        adv = cc.compute_advantages(x, batch.group_ids, estimator=name, nan_policy="ignore")
        assert np.all(adv[missing] == 0)
        ref = cc.compute_advantages(x[kept], batch.group_ids[kept], estimator=name)
        spread = _rounding_spread(name, x[kept], batch.group_ids[kept], ref)
        bad = np.abs(adv[kept] - ref) > 1e-9 * np.abs(ref) + 1e-9 + spread
        assert not bad.any(), f"{name}: {adv[kept][bad]} != {ref[bad]} (allowed spread {spread[bad]})"


def test_a_missing_row_leaves_a_redundant_group_unchanged():
    """Duplicated and negated rewards correlate to S = 0 exactly; with eps outside the root,
    sqrt(S) + eps turns the pairwise sum's 3e-15 into 5% of the advantages."""
    b = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    x = np.stack([b, b, -2.5 * b, -2.5 * b], axis=1)
    with_nan = np.vstack([np.full((1, 4), np.nan), x])
    ids = np.zeros(6, dtype=np.int64)
    masked = cc.corrgrpo_advantage(with_nan, ids, eps_placement="outside", nan_policy="ignore")
    np.testing.assert_allclose(
        masked[1:], cc.corrgrpo_advantage(x, ids[1:], eps_placement="outside"), rtol=1e-9
    )


@pytest.mark.parametrize("nan_policy", ["raise", "ignore"])
def test_large_dense_batches_run_in_pieces_with_the_same_result(nan_policy):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(9000, 8, 3))  # 72,000 rows: more than one cache-sized piece
    x[5, :, 1] = 0.3
    if nan_policy == "ignore":
        x[17, 2, :] = np.nan
        x[8999, 0, 0] = np.nan
    flat = x.reshape(-1, 3)
    perm = rng.permutation(flat.shape[0])  # shuffled ids take the ragged path, in one piece
    ids = np.repeat(np.arange(9000), 8)[perm]
    for name in ("corrgrpo", "grpo", "dr_grpo", "rloo", "mo_grpo"):
        dense = cc.compute_advantages(x, estimator=name, nan_policy=nan_policy).reshape(-1)
        ragged = cc.compute_advantages(flat[perm], ids, estimator=name, nan_policy=nan_policy)
        np.testing.assert_allclose(dense[perm], ragged, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("nan_policy", ["raise", "ignore"])
def test_large_batches_with_ids_in_runs_run_in_pieces_with_the_same_result(nan_policy):
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 33, 9000)  # uneven groups, each prompt's rows adjacent (verl)
    sizes[100] = 70_000  # one group larger than a piece
    ids = np.repeat(rng.permutation(9000) * 3 + 5, sizes)
    x = rng.normal(size=(ids.shape[0], 3))
    x[ids == ids[0], 1] = 0.25
    if nan_policy == "ignore":
        x[[7, 130_000], :] = np.nan
        x[50_000, 0] = np.nan
    perm = rng.permutation(ids.shape[0])  # the same batch shuffled: one piece, another path
    torch = pytest.importorskip("torch")
    for name in ("corrgrpo", "grpo", "dr_grpo", "rloo", "mo_grpo"):
        runs = cc.compute_advantages(x, ids, estimator=name, nan_policy=nan_policy)
        shuffled = cc.compute_advantages(x[perm], ids[perm], estimator=name, nan_policy=nan_policy)
        np.testing.assert_allclose(runs[perm], shuffled, rtol=1e-11, atol=1e-11, err_msg=name)
        on_torch = cc.compute_advantages(
            torch.asarray(x), torch.asarray(ids), estimator=name, nan_policy=nan_policy
        )
        np.testing.assert_allclose(on_torch.numpy(), runs, rtol=1e-11, atol=1e-11, err_msg=name)
