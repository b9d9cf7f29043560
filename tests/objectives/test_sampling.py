"""DAPO's dynamic-sampling filter and soft overlong penalty: examples and property tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import corrgrpo_core as cc
from corrgrpo_core.objectives import filter_criterion_for, informative_groups, overlong_penalty

# Rewards on a coarse grid so that ties (within a group, and between totals) are common.
_reward = st.sampled_from([0.0, 0.25, 0.5, 1.0])


@st.composite
def _ragged_batch(draw: Any) -> tuple[np.ndarray, np.ndarray]:
    k = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    rows = [[draw(_reward) for _ in range(k)] for _ in range(sum(sizes))]
    ids = np.repeat(np.arange(len(sizes)), sizes)
    perm = np.asarray(draw(st.permutations(list(range(len(ids))))), dtype=np.int64)
    return np.asarray(rows, dtype=np.float64)[perm], ids[perm]


@pytest.fixture(params=["numpy", "array_api_strict", "torch"])
def filter_xp(request: pytest.FixtureRequest, xp_for: Any) -> Any:
    """Backends for the filter's eager tests; jax runs it under jit below (eager jax spends seconds
    dispatching the core's statistics op by op, which the core's own suite already covers)."""
    return xp_for(request.param)


def _per_group(keep: np.ndarray, ids: np.ndarray) -> dict[int, bool]:
    out: dict[int, bool] = {}
    for g in np.unique(ids):
        values = set(keep[ids == g].tolist())
        assert len(values) == 1, "the keep mask must be constant within a group"
        out[int(g)] = values.pop()
    return out


def test_doc_example_tied_totals(filter_xp: Any, to_numpy: Any) -> None:
    xp = filter_xp
    scores = xp.asarray([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    ids = xp.asarray([0, 0, 0, 0, 1])
    total = to_numpy(informative_groups(scores, ids))
    anyc = to_numpy(informative_groups(scores, ids, criterion="any_component"))
    assert total.tolist() == [0, 0, 0, 0, 0]
    assert anyc.tolist() == [1, 1, 1, 1, 0]  # the singleton group 1 is never informative


def test_dense_layouts_give_leading_shape(filter_xp: Any, to_numpy: Any) -> None:
    xp = filter_xp
    one = xp.asarray([[1.0, 0.0], [0.0, 0.0]])
    assert to_numpy(informative_groups(one)).tolist() == [1, 1]
    batch = xp.asarray([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]])
    assert to_numpy(informative_groups(batch)).tolist() == [[1, 1], [0, 0]]


def test_weights_define_the_total(to_numpy: Any) -> None:
    scores = np.asarray([[1.0, 0.0], [0.0, 2.0]])
    assert not informative_groups(scores, weights=np.asarray([2.0, 1.0])).any()
    assert informative_groups(scores).all()


def test_round_off_ties_count_as_ties() -> None:
    scores = np.asarray([[0.1, 0.2], [0.3, 0.0]])  # totals 0.30000000000000004 and 0.3
    assert not informative_groups(scores).any()
    assert informative_groups(scores, atol=0.0).all()


@given(_ragged_batch())
def test_constant_components_dropped_under_both_criteria(batch: tuple[np.ndarray, np.ndarray]) -> None:
    scores, ids = batch
    in_group0 = (ids == 0)[:, None]
    scores = np.where(in_group0, scores[ids == 0][0], scores)  # every component constant in group 0
    for criterion in ("total", "any_component"):
        keep = informative_groups(scores, ids, criterion=criterion)  # type: ignore[arg-type]
        assert not _per_group(keep, ids)[0]


@given(_ragged_batch())
def test_criteria_agree_with_their_definitions(batch: tuple[np.ndarray, np.ndarray]) -> None:
    scores, ids = batch
    total = _per_group(informative_groups(scores, ids), ids)
    anyc = _per_group(informative_groups(scores, ids, criterion="any_component"), ids)
    for g in total:
        rows = scores[ids == g]
        assert total[g] == bool(np.ptp(rows.sum(-1)) > 1e-9)
        assert anyc[g] == bool((np.ptp(rows, axis=0) > 0).any())
        # tied totals with varying components: kept only under any_component
        assert total[g] <= anyc[g]


@given(_ragged_batch(), st.sampled_from(sorted(cc.estimator_names())))
def test_dropped_groups_have_zero_advantage(batch: tuple[np.ndarray, np.ndarray], estimator: str) -> None:
    """The recommended criterion never throws away a group the estimator can learn from: a dropped
    group's advantages do not vary within it (a batch-level shift, as DARA's batch z-score gives,
    carries no signal), and they are zero for the estimators the registry declares centred."""
    scores, ids = batch
    criterion = filter_criterion_for(estimator)
    keep = informative_groups(scores, ids, criterion=criterion)
    adv = np.asarray(cc.compute_advantages(scores, ids, estimator=estimator))
    for g in np.unique(ids[~keep]):
        assert np.ptp(adv[ids == g]) <= 1e-9, (g, adv[ids == g])
    if cc.get_estimator(estimator).centred:
        np.testing.assert_allclose(adv[~keep], 0.0, atol=1e-9)
    if criterion == "total":  # and for total-based estimators it keeps exactly the others
        nonzero = {g: bool(np.abs(adv[ids == g]).max() > 1e-9) for g in np.unique(ids)}
        assert nonzero == _per_group(keep, ids)


def test_corrgrpo_gives_zero_advantage_on_tied_totals_gdpo_does_not() -> None:
    scores = np.asarray([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    assert np.allclose(cc.compute_advantages(scores, estimator="corrgrpo"), 0.0)
    assert not np.allclose(cc.compute_advantages(scores, estimator="gdpo"), 0.0)
    assert filter_criterion_for("corrgrpo") == "total"
    assert filter_criterion_for("gdpo") == "any_component"


def test_filter_under_jax_jit(xp_for: Any) -> None:
    jax = pytest.importorskip("jax")
    xp_for("jax")  # x64 on, as everywhere in these tests
    scores = jax.numpy.asarray([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    ids = jax.numpy.asarray([0, 0, 1, 1])
    f = jax.jit(lambda s, i: informative_groups(s, i, criterion="any_component"))
    assert np.asarray(f(scores, ids)).tolist() == [True, True, False, False]
    dense = jax.numpy.asarray([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]])
    assert np.asarray(jax.jit(informative_groups)(dense)).tolist() == [[True, True], [False, False]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"criterion": "sum"}, "criterion must be one of 'total', 'any_component', got 'sum'"),
        ({"atol": -1.0}, "atol must be a non-negative number, got -1.0"),
    ],
)
def test_filter_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        informative_groups(np.zeros((2, 2)), **kwargs)


# ---------------------------------------------------------------- overlong penalty


def test_overlong_values(xp: Any, to_numpy: Any) -> None:
    lengths = xp.asarray([0, 16, 17, 18, 20, 21, 1000])
    got = to_numpy(overlong_penalty(lengths, max_length=20, cache_length=4, penalty_factor=0.5))
    np.testing.assert_allclose(got, [0.0, 0.0, -0.125, -0.25, -0.5, -0.5, -0.5])


def test_overlong_dtypes(xp: Any) -> None:
    assert (
        overlong_penalty(xp.asarray([1.0], dtype=xp.float32), max_length=4, cache_length=2).dtype
        == xp.float32
    )
    out = overlong_penalty(xp.asarray([1]), max_length=4, cache_length=2, dtype=xp.float64)
    assert out.dtype == xp.float64


@given(
    st.integers(1, 4096),
    st.data(),
    st.floats(0.0, 4.0, allow_nan=False),
)
def test_overlong_properties(max_length: int, data: Any, factor: float) -> None:
    cache = data.draw(st.integers(1, max_length))
    lengths = np.arange(0, max_length + cache + 3)
    pen = overlong_penalty(lengths, max_length=max_length, cache_length=cache, penalty_factor=factor)
    assert np.all(pen[lengths <= max_length - cache] == 0.0)  # 0 below the buffer
    assert np.all(pen[lengths >= max_length] == pytest.approx(-factor))  # -factor at and past the limit
    assert np.all(np.diff(pen) <= 0)  # monotone
    assert np.all(np.abs(np.diff(pen)) <= factor / cache + 1e-12)  # continuous: Lipschitz, slope 1/L_cache


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_length": 10, "cache_length": 0}, "cache_length"),
        ({"max_length": 10, "cache_length": 11}, "cache_length"),
        ({"max_length": 10, "cache_length": 2, "penalty_factor": -1.0}, "penalty_factor"),
    ],
)
def test_overlong_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        overlong_penalty(np.asarray([1]), **kwargs)
