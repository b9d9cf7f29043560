"""The paper's Figure 2 example, number by number, on every backend."""

import numpy as np
import pytest

import corrgrpo_core as cc

GRPO = [-1.0954, 0.5477, 1.0954, -0.5477]
CORR = [-1.8607, 0.9304, 1.8607, -0.9304]


def test_advantages_on_every_backend(backend, figure2):
    scores = backend.asarray(figure2)
    corr = cc.corrgrpo_advantage(scores)
    grpo = cc.grpo_advantage(scores)
    assert type(corr) is type(scores)
    np.testing.assert_allclose(backend.to_numpy(corr), CORR, atol=1e-4)
    np.testing.assert_allclose(backend.to_numpy(grpo), GRPO, atol=1e-4)


def test_statistics_of_the_example(figure2):
    stats = cc.advantage_stats(figure2)
    assert float(stats.covariance_sum[0]) == pytest.approx(15.5520, abs=1e-4)
    assert float(stats.correlation_sum[0]) == pytest.approx(5.3902, abs=1e-4)
    assert float(stats.variance_share[0, 2]) == pytest.approx(0.911, abs=1e-3)
    assert float(stats.c_q[0]) == pytest.approx(1.699, abs=1e-3)
    corr = np.corrcoef(figure2, rowvar=False)
    assert corr[0, 1] == pytest.approx(0.9756, abs=1e-4)
    assert corr[0, 2] == pytest.approx(0.1098, abs=1e-4)
    assert 1 / np.sqrt(15.5520) == pytest.approx(0.2536, abs=1e-4)
    summary = stats.summary(["r1", "r2", "r3"])
    assert summary["denominator_share/r3"] == pytest.approx(0.911, abs=1e-3)
    assert summary["c_q/mean"] == pytest.approx(1.699, abs=1e-3)
    assert summary["degenerate_groups"] == 0


def test_gdpo_numbers_of_the_reference(figure2):
    np.testing.assert_allclose(cc.gdpo_advantage(figure2), [-1.15339, -0.41193, 1.15339, 0.41193], atol=1e-5)


def test_eps_placement_changes_only_the_floor(figure2):
    inside = cc.corrgrpo_advantage(figure2, eps=1e-6, eps_placement="inside")
    outside = cc.corrgrpo_advantage(figure2, eps=1e-6, eps_placement="outside")
    np.testing.assert_allclose(inside, outside, rtol=1e-6)
    # in a degenerate group the placement decides the amplification: 1/sqrt(eps) versus 1/eps
    anti = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert np.all(cc.corrgrpo_advantage(anti, eps_placement="inside") == 0)  # totals tie
    pair = np.array([[0.0, 10.0], [1.0, 0.0]])  # rho = -1, S = 0, centred total non-zero
    big = cc.corrgrpo_advantage(pair, eps_placement="inside")
    np.testing.assert_allclose(np.abs(big), 4.5 / np.sqrt(1e-6))
    np.testing.assert_allclose(np.abs(cc.corrgrpo_advantage(pair, eps_placement="outside")), 4.5 / 1e-6)
    floored = cc.corrgrpo_advantage(pair, min_correlation_sum=1.0)
    np.testing.assert_allclose(np.abs(floored), 4.5 / np.sqrt(1.0 + 1e-6))
    assert bool(cc.advantage_stats(pair).degenerate[0])
