"""``group_stats``: advantage_stats per group, over slices of whole groups, for a batch of any size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corrgrpo_core as cc
from corrgrpo_core.testing import reward_batches

FIELDS = ("covariance_sum", "correlation_sum", "c_q", "zero_variance_count", "degenerate", "total_varies")


def _labels(ids: np.ndarray) -> np.ndarray:
    return np.unique(ids, return_inverse=True)[1].astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(batch=reward_batches(max_groups=8), chunk=st.integers(1, 20), floor=st.sampled_from([0.0, 1.0]))
def test_each_group_gets_the_cores_numbers_whatever_the_chunk(batch, chunk, floor):
    ids = _labels(batch.group_ids)
    est = ("grpo", "corrgrpo", "gdpo")
    floored = {"corrgrpo": {"min_correlation_sum": floor}}
    gs = cc.group_stats(
        batch.scores,
        ids,
        estimators=est,
        estimator_options=floored,
        chunk_rows=chunk,
        min_correlation_sum=floor,
    )
    whole = cc.advantage_stats(batch.scores, ids, min_correlation_sum=floor)
    first = np.array([np.flatnonzero(ids == g)[0] for g in range(gs.sizes.size)])
    for name in FIELDS:
        np.testing.assert_allclose(
            getattr(gs, name), np.asarray(getattr(whole, name))[first], rtol=1e-9, atol=1e-10, err_msg=name
        )
    np.testing.assert_allclose(gs.variance_share, np.asarray(whole.variance_share)[first], rtol=1e-9)
    assert gs.summary() == pytest.approx(whole.summary(), rel=1e-9, abs=1e-300)
    for name in est:
        expected = cc.compute_advantages(
            batch.scores,
            ids,
            estimator=name,
            **({"min_correlation_sum": floor} if name == "corrgrpo" else {}),
        )
        np.testing.assert_allclose(gs.advantages[name], expected, rtol=1e-9, atol=1e-12)
    for g in range(gs.sizes.size):
        np.testing.assert_array_equal(np.sort(gs.rows(g)), np.flatnonzero(ids == g))


def test_groups_far_apart_in_magnitude_keep_their_own_numbers():
    rng = np.random.default_rng(1)
    tiny, huge = rng.normal(size=(5, 2)) * 1e-162, rng.normal(size=(5, 2)) * 1e34
    ids = np.repeat([0, 1], 5)
    gs = cc.group_stats(np.vstack([tiny, huge]), ids, estimators=["corrgrpo"], matrices_for=[0])
    alone = cc.advantage_stats(tiny)
    np.testing.assert_allclose(gs.correlation_sum[0], float(alone.correlation_sum[0]), rtol=1e-9)
    assert gs.correlation_sum[0] > 0  # one call on both groups would lose the tiny one's squares
    np.testing.assert_allclose(gs.advantages["corrgrpo"][:5], cc.corrgrpo_advantage(tiny), rtol=1e-9)
    cov, corr = gs.matrices[0]
    np.testing.assert_allclose(corr.sum(), gs.correlation_sum[0], rtol=1e-9)
    np.testing.assert_allclose(cov.sum(), gs.covariance_sum[0], rtol=1e-9)


def test_degenerate_and_zero_signal_groups_per_group():
    bad = np.asarray([[0.1, 0.1, 3.0]] * 7 + [[0.5, 0.1, 1.0]])  # correlation sum 0, |A| 1400
    flat = np.ones((8, 3))  # nothing varies
    gs = cc.group_stats(np.vstack([bad, flat]), np.repeat([0, 1], 8))
    assert gs.degenerate.tolist() == [True, False]
    assert gs.zero_signal.tolist() == [False, True]
    np.testing.assert_allclose(gs.max_abs_advantage, [1400.0, 0.0], rtol=1e-6)
    s = gs.summary()
    assert (s["degenerate_groups"], s["zero_signal_groups"]) == (0.5, 0.5)
    np.testing.assert_allclose(s["degenerate/max_abs_advantage"], 1400.0, rtol=1e-6)


def test_bad_group_ids_are_one_line_errors():
    with pytest.raises(ValueError, match="group_ids must be N integers"):
        cc.group_stats(np.ones((3, 2)), np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"must lie in 0\.\.1"):
        cc.group_stats(np.ones((3, 2)), np.array([0, 1, 2]), n_groups=2)


def _scattered(rng: np.random.Generator, n_groups: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    ids = rng.permutation(np.repeat(np.arange(n_groups), size))
    scores = rng.normal(size=(ids.size, 3)) * [1.0, 1e-3, 10.0]
    scores[ids % 5 == 0] *= 1e-120  # some groups far below the others: slices split by magnitude
    return scores, ids


def test_shown_rows_and_magnitudes_without_keeping_every_row():
    rng = np.random.default_rng(3)
    scores, ids = _scattered(rng, 40, 6)
    est, shown = ("grpo", "corrgrpo", "gdpo", "rloo"), [0, 5, 7, 39]
    full = cc.group_stats(scores, ids, estimators=est, chunk_rows=17)
    lean = cc.group_stats(
        scores, ids, estimators=est, chunk_rows=17, keep_advantages=False, matrices_for=shown
    )
    assert lean.advantages == {}
    np.testing.assert_array_equal(lean.shown_rows, np.flatnonzero(np.isin(ids, shown)))
    for name in est:
        np.testing.assert_array_equal(lean.shown_advantages[name], full.advantages[name][lean.shown_rows])
        magnitude = np.abs(full.advantages[name])
        assert lean.advantage_magnitude[name] == pytest.approx((magnitude.mean(), magnitude.max()), rel=1e-12)
    assert sorted(lean.matrices) == shown


def test_rows_already_in_group_order_give_the_same_numbers():
    rng = np.random.default_rng(4)
    scores, ids = _scattered(rng, 30, 5)
    order = np.argsort(ids, kind="stable")
    est = ("grpo", "corrgrpo", "gdpo")
    a = cc.group_stats(scores, ids, estimators=est, chunk_rows=11, matrices_for=[2])
    b = cc.group_stats(scores[order], ids[order], estimators=est, chunk_rows=11, matrices_for=[2])
    np.testing.assert_array_equal(b.order, np.arange(ids.size))
    for name in ("covariance_sum", "correlation_sum", "c_q", "variance_share", "max_abs_advantage"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in est:  # gdpo's batch mean is summed in another order: equal to rounding
        np.testing.assert_allclose(a.advantages[name][order], b.advantages[name], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a.matrices[2][1], b.matrices[2][1])


def test_unit_weights_are_the_unweighted_numbers():
    rng = np.random.default_rng(5)
    scores, ids = _scattered(rng, 20, 4)
    a = cc.group_stats(scores, ids, estimators=("gdpo", "corrgrpo"))
    b = cc.group_stats(scores, ids, estimators=("gdpo", "corrgrpo"), weights=np.ones(3))
    for name in ("covariance_sum", "correlation_sum", "c_q", "max_abs_advantage"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in ("gdpo", "corrgrpo"):
        np.testing.assert_array_equal(a.advantages[name], b.advantages[name])


# Batch-scope estimators run in passes (their batch sums, each row's values, the batch-level rest on
# those): the same formula, whose sums add the rows in another order than one call on the batch
# (group by group, each group's values from a slice): equal to that rounding, a few ulps of the
# largest |A| (on the 1.9M-row benchmark file 4-8, where the group-local estimators differ by 2-10).
BATCH_SCOPE = {
    "gdpo": [{}],
    "gdpo_corr": [{}, {"min_correlation_sum": 1.0, "group_eps_placement": "inside"}],
    "dara": [{}, {"variant": "sym"}, {"base": "corrgrpo"}, {"base": "corrgrpo", "variant": "sym"}],
}


def _rounding_close(actual, expected, what=""):
    top = float(np.max(np.abs(expected), initial=0.0))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-14 * top, err_msg=what)


@settings(max_examples=40, deadline=None)
@given(
    batch=reward_batches(max_groups=8),
    chunk=st.integers(1, 20),
    weights=st.sampled_from([None, "mixed"]),
    nan=st.booleans(),
)
def test_batch_scope_estimators_in_passes_give_the_whole_batch_numbers(batch, chunk, weights, nan):
    ids, scores = _labels(batch.group_ids), batch.scores.copy()
    k = scores.shape[1]
    w = None if weights is None else np.resize([0.5, -1.0, 2.0, 0.0], k)
    if nan and scores.size:
        scores[:: max(scores.shape[0] // 3, 1), 0] = np.nan
    policy = "ignore" if nan else "raise"
    for name, variants in BATCH_SCOPE.items():
        for options in variants:
            gs = cc.group_stats(
                scores,
                ids,
                weights=w,
                nan_policy=policy,
                estimators=[name],
                estimator_options={name: options},
                chunk_rows=chunk,
            )
            whole = cc.compute_advantages(
                scores, ids, estimator=name, weights=w, nan_policy=policy, **options
            )
            _rounding_close(gs.advantages[name], whole, f"{name} {options}")


def test_large_scattered_batches_in_passes():
    rng = np.random.default_rng(6)
    scores, ids = _scattered(rng, 3000, 7)
    scores[rng.random(scores.shape) < 0.01] = np.nan
    for policy in ("ignore",):
        for name, variants in BATCH_SCOPE.items():
            for options in variants:
                gs = cc.group_stats(
                    scores, ids, nan_policy=policy, estimators=[name], estimator_options={name: options}
                )
                whole = cc.compute_advantages(scores, ids, estimator=name, nan_policy=policy, **options)
                _rounding_close(gs.advantages[name], whole, f"{name} {options}")


def test_each_estimator_alone_or_with_the_others():
    """The estimators of one call share each prepared slice; none sees what another derived from it
    (CorrGRPO centres the weighted scores of one component where they lie)."""
    rng = np.random.default_rng(7)
    every = cc.estimator_names()
    for k in (1, 3):
        scores, ids = _scattered(rng, 40, 6)
        scores = scores[:, :k]
        scores[rng.random(scores.shape) < 0.05] = np.nan
        w = np.resize([2.0, 0.5, -1.0], k)
        options = {"weights": w, "nan_policy": "ignore", "chunk_rows": 30}
        together = cc.group_stats(scores, ids, estimators=every, **options)
        for name in every:
            alone = cc.group_stats(scores, ids, estimators=[name], **options)
            np.testing.assert_array_equal(together.advantages[name], alone.advantages[name], err_msg=name)


def test_the_core_sees_slices_of_whole_groups_only(monkeypatch):
    """Every estimator, batch-scope ones included, is computed on slices: no call to the core holds
    the batch (the batch-level rest of GDPO's passes takes one or K numbers a row, not the scores)."""
    import corrgrpo_core._group_stats as gsm

    rows = []

    def seen(call):
        def record(scores, *args, **kwargs):
            rows.append(int(np.prod(np.shape(scores)[:-1])))
            return call(scores, *args, **kwargs)

        return record

    monkeypatch.setattr(gsm, "prepare", seen(gsm.prepare))
    monkeypatch.setattr(gsm, "compute_advantages", seen(gsm.compute_advantages))
    monkeypatch.setattr(gsm, "advantage_stats", seen(gsm.advantage_stats))
    scores, ids = _scattered(np.random.default_rng(8), 100, 6)
    gs = cc.group_stats(scores, ids, estimators=cc.estimator_names(), chunk_rows=50)
    assert rows
    assert max(rows) < 50 + 6
    for name in cc.estimator_names():
        _rounding_close(gs.advantages[name], cc.compute_advantages(scores, ids, estimator=name), name)


def test_an_estimator_registered_elsewhere_gets_the_whole_batch():
    from corrgrpo_core import _registry

    def batch_mean(scores, group_ids=None, *, weights=None, nan_policy="raise"):  # a batch statistic
        total = np.asarray(scores).sum(axis=1)
        return total - total.mean()

    name = "batch_mean_of_test_group_stats"
    cc.register_estimator(name, batch_mean, "the total minus the batch's mean total")
    try:
        scores, ids = _scattered(np.random.default_rng(9), 30, 4)
        gs = cc.group_stats(scores, ids, estimators=[name, "gdpo"], chunk_rows=10)
        np.testing.assert_array_equal(gs.advantages[name], batch_mean(scores))
    finally:
        del _registry._REGISTRY[name]


@pytest.mark.parametrize("k", [1, 3, 7])
@pytest.mark.parametrize("n", [2, 5, 9, 17, 130, 300])
def test_dense_pieces_read_in_the_cores_layout_add_as_reduceat_does(n, k):
    # the per-group contribution fields of a dense piece, read without the copy into rows, are the
    # numbers np.add.reduceat / np.maximum.reduceat give over the rows, bit for bit
    from corrgrpo_core._group_stats import _contributions, _Prepared

    rng = np.random.default_rng(n * 10 + k)
    groups = 3 + 2000 // n
    block = rng.normal(size=(n, k, groups)) * np.exp(rng.normal(size=(n, k, groups)) * 8)
    values = block.transpose(2, 0, 1)  # (B, n, K) over a position-major block, as the core returns
    prep = _Prepared(np.zeros((groups * n, k)), np.repeat(np.arange(groups), n), np.full(groups, n))
    assert prep.size == n
    first = np.arange(0, groups * n, n)
    top, total = _contributions(prep, values, first)
    rows = np.ascontiguousarray(values).reshape(-1, k)
    np.testing.assert_array_equal(top, np.maximum.reduceat(np.abs(rows.sum(axis=1)), first))
    np.testing.assert_array_equal(total, np.add.reduceat(np.abs(rows), first, axis=0))
