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
