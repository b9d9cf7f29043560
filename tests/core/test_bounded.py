"""The bounded CorrGRPO (``min_correlation_sum`` = f > 0): the bound docs/method.md derives holds.

For a row i of a group with centred weighted total c_i and correlation sum S,
A_i = c_i / sqrt(max(S, f) + eps) (or / (sqrt(max(S, f)) + eps)), so for every input

    |A_i| <= |c_i| / sqrt(f)                       (never more than Dr.GRPO's |A| when f = 1)
          <= (n - 1) / n * range_q(total) / sqrt(f)
    and, with ddof = 1, <= (n - 1) / sqrt(n) * s_T / sqrt(f)   (GRPO's bound times the total's std).

The paper's definition (f = 0) has no such bound: the 7-vs-1 group below gives 1400.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import corrgrpo_core as cc
from corrgrpo_core.testing import reward_batches

SLACK = 1e-9  # relative: float64 rounding of the advantage and of the bound


@st.composite
def few_answer_batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Groups of a few distinct reward vectors repeated (duplicate completions: the degenerate case)."""
    k = draw(st.integers(1, 4))
    values = st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0, -1.0, 8.0])
    rows, ids = [], []
    for g in range(draw(st.integers(1, 4))):
        answers = draw(st.lists(st.lists(values, min_size=k, max_size=k), min_size=1, max_size=3))
        picks = draw(st.lists(st.integers(0, len(answers) - 1), min_size=1, max_size=8))
        rows += [answers[p] for p in picks]
        ids += [g] * len(picks)
    return np.asarray(rows, dtype=np.float64), np.asarray(ids)


def _group_bounds(
    totals: np.ndarray, ids: np.ndarray, ddof: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: |centred total|, (n-1)/n * range, and (n-1)/sqrt(n) * std (ddof 1) of its group."""
    centred, by_range, by_std = (np.zeros_like(totals) for _ in range(3))
    for g in np.unique(ids):
        at = ids == g
        t, n = totals[at], int(at.sum())
        centred[at] = np.abs(t - t.mean())
        by_range[at] = (n - 1) / n * (t.max() - t.min())
        by_std[at] = (n - 1) / np.sqrt(n) * (t.std(ddof=1) if n > 1 else 0.0) if ddof == 1 else np.inf
    return centred, by_range, by_std


def _check_bound(
    scores: np.ndarray, ids: np.ndarray, weights: np.ndarray, floor: float, **options: object
) -> None:
    adv = cc.corrgrpo_advantage(scores, ids, weights=weights, min_correlation_sum=floor, **options)
    ddof = int(options.get("ddof", 1))
    centred, by_range, by_std = _group_bounds(scores @ weights, ids, ddof)
    root = np.sqrt(floor)
    for bound in (centred, by_range, by_std):
        assert np.all(np.abs(adv) <= bound / root * (1 + SLACK) + 1e-12), (np.abs(adv).max(), bound.max())


options_st = st.fixed_dictionaries(
    {
        "eps": st.sampled_from([0.0, 1e-9, 1e-6, 1e-2]),
        "eps_placement": st.sampled_from(["inside", "outside"]),
        "ddof": st.sampled_from([0, 1]),
    }
)
floors = st.sampled_from([1e-3, 0.25, 1.0, 2.0, 9.0])


@settings(max_examples=300, deadline=None)
@given(batch=few_answer_batches(), floor=floors, options=options_st, data=st.data())
def test_bound_holds_on_few_answer_groups(batch, floor, options, data):
    scores, ids = batch
    k = scores.shape[1]
    weights = np.asarray(data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 0.05]), min_size=k, max_size=k)))
    _check_bound(scores, ids, weights, floor, **options)


@settings(max_examples=200, deadline=None)
@given(batch=reward_batches(), floor=floors, options=options_st, data=st.data())
def test_bound_holds_on_any_batch(batch, floor, options, data):
    k = batch.scores.shape[1]
    weights = np.asarray(data.draw(st.lists(st.floats(0.01, 10.0), min_size=k, max_size=k)))
    _check_bound(batch.scores, batch.group_ids, weights, floor, **options)


def test_the_reviews_group_is_bounded_with_the_floor_and_not_without():
    group = np.asarray([[0.1, 0.1, 3.0]] * 7 + [[0.5, 0.1, 1.0]])
    paper = cc.corrgrpo_advantage(group)
    bounded = cc.corrgrpo_advantage(group, min_correlation_sum=1.0)
    np.testing.assert_allclose(paper[[0, 7]], [200.0, -1400.0], rtol=1e-6)
    np.testing.assert_allclose(bounded[[0, 7]], [0.2, -1.4], rtol=1e-5)
    # a 7-vs-1 group attains the bound (n-1)/n * range = 7/8 * 1.6
    np.testing.assert_allclose(abs(bounded[7]), 7 / 8 * 1.6, rtol=1e-5)
    stats = cc.advantage_stats(group, min_correlation_sum=1.0).summary()
    assert stats["degenerate_groups"] == 1.0  # still degenerate (a property of the group) ...
    np.testing.assert_allclose(stats["degenerate/max_abs_advantage"], 1.4, rtol=1e-5)  # ... but bounded


def test_with_one_varying_component_the_floor_of_one_changes_nothing():
    rng = np.random.default_rng(0)
    scores = np.column_stack([rng.normal(size=32) * 50, np.full(32, 0.3)])
    ids = np.repeat(np.arange(4), 8)
    dr = cc.compute_advantages(scores, ids, estimator="dr_grpo")
    np.testing.assert_allclose(cc.corrgrpo_advantage(scores, ids), dr, rtol=1e-6)
    np.testing.assert_allclose(cc.corrgrpo_advantage(scores, ids, min_correlation_sum=1.0), dr, rtol=1e-6)
