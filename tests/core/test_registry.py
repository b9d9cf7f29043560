"""Estimator facts are declared once, on the registry's spec, and every consumer reads them there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import corrgrpo_core as cc
from corrgrpo_core import _registry
from corrgrpo_core.objectives import filter_criterion_for, informative_groups
from corrgrpo_core.testing import check_advantage_estimator, dr_grpo_oracle

ALL = cc.estimator_names()


def _half_dr_grpo(scores: Any, group_ids: Any = None, *, nan_policy: str = "raise") -> Any:
    """A user's estimator: half the centred total (a positive group factor times it)."""
    return 0.5 * cc.dr_grpo_advantage(scores, group_ids, nan_policy=nan_policy)


def _half_oracle(scores: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    return 0.5 * dr_grpo_oracle(scores, group_ids)


@pytest.fixture
def registered() -> Iterator[cc.EstimatorSpec]:
    """A custom estimator declared as group-local, total-based and centred, removed afterwards."""
    spec = cc.register_estimator(
        "half_dr_grpo",
        _half_dr_grpo,
        "half the centred total",
        scope="group",
        numerator="total",
        centred=True,
        unnormalised="dr_grpo",
        oracle=_half_oracle,
    )
    yield spec
    del _registry._REGISTRY["half_dr_grpo"]


def test_a_registered_estimator_gets_its_declared_behaviour_everywhere(registered: cc.EstimatorSpec) -> None:
    assert registered.group_local()
    assert registered.filter_criterion == "total"
    # DAPO's filter: the declared numerator decides, not a list of names
    assert filter_criterion_for("half_dr_grpo") == "total"
    # the conformance kit: its oracle, its zero sum per group, its positive multiple of GRPO
    check_advantage_estimator(
        lambda s, g: cc.compute_advantages(s, g, estimator="half_dr_grpo"),
        kind="half_dr_grpo",
        max_examples=30,
    )
    with pytest.raises(AssertionError, match="half_dr_grpo: differs from the reference loop"):
        check_advantage_estimator(
            lambda s, g: cc.dr_grpo_advantage(s, g), kind="half_dr_grpo", max_examples=30
        )
    # and its options as a config may set them (no weights or xp: an adapter supplies those)
    assert registered.config_options == ("nan_policy",)
    assert registered.diagnostic_kwargs({"nan_policy": "ignore"}) == {"nan_policy": "ignore"}


def test_an_undeclared_estimator_gets_the_safe_defaults() -> None:
    spec = cc.register_estimator("plain", _half_dr_grpo, "no facts given")
    try:
        assert (spec.scope, spec.numerator, spec.centred, spec.unnormalised, spec.oracle) == (
            "batch",
            "components",
            False,
            None,
            None,
        )
        assert filter_criterion_for("plain") == "any_component"  # never drops a group with signal
        with pytest.raises(ValueError, match=r"unknown kind .an estimator with an oracle. 'plain'"):
            check_advantage_estimator(lambda s, g: s[:, 0], kind="plain", max_examples=1)
    finally:
        del _registry._REGISTRY["plain"]


def test_listeners_hear_of_every_later_registration_once() -> None:
    """What an adapter with its own registry (verl's plugin) subscribes to, however late an estimator
    is registered; a refused registration is not announced, and unsubscribing stops the calls."""
    heard: list[str] = []

    def listener(spec: cc.EstimatorSpec) -> None:
        assert cc.get_estimator(spec.name) is spec  # registered before the listeners run
        heard.append(spec.name)

    stop = cc.on_estimator_registered(listener)
    assert cc.on_estimator_registered(listener) is not stop  # subscribing again adds no second call
    try:
        cc.register_estimator("heard_once", _half_dr_grpo, "x")
        with pytest.raises(ValueError, match="already registered"):
            cc.register_estimator("heard_once", _half_dr_grpo, "x")
        with pytest.raises(ValueError, match="scope must be one of"):
            cc.register_estimator("never", _half_dr_grpo, "x", scope="rows")  # type: ignore[arg-type]
        assert heard == ["heard_once"]
        stop()
        cc.register_estimator("not_heard", _half_dr_grpo, "x")
        assert heard == ["heard_once"]
        stop()  # twice is harmless
    finally:
        stop()
        for name in ("heard_once", "not_heard"):
            _registry._REGISTRY.pop(name, None)


def test_declared_facts_are_checked() -> None:
    with pytest.raises(ValueError, match="scope must be one of 'group', 'batch', got 'rows'"):
        cc.register_estimator("x", _half_dr_grpo, "x", scope="rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown estimator .unnormalised. 'nope'"):
        cc.register_estimator("x", _half_dr_grpo, "x", unnormalised="nope")
    assert "x" not in cc.estimator_names()


@pytest.mark.parametrize("name", ALL)
def test_the_declared_facts_hold_for_every_built_in(name: str) -> None:
    """What each spec says is what the estimator does, on a batch of three groups."""
    spec = cc.get_estimator(name)
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(12, 3)) * np.array([1.0, 5.0, 0.1])
    scores[4:8, :] = [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]  # totals tie
    scores[8:12, 2] = 0.3  # constant in the last group: DARA's densities differ
    ids = np.repeat(np.arange(3), 4)
    whole = np.asarray(cc.compute_advantages(scores, ids, estimator=name))
    alone = np.concatenate([cc.compute_advantages(scores[ids == g], estimator=name) for g in range(3)])
    assert spec.group_local() == bool(np.allclose(whole, alone, rtol=1e-12, atol=1e-12))
    sums = np.bincount(ids, weights=whole)
    assert spec.centred == bool(np.allclose(sums, 0.0, atol=1e-12))
    tied = np.abs(whole[4:8]).max() <= 1e-12
    assert (spec.numerator == "total") == tied  # a total-based estimator learns nothing from tied totals
    kept = informative_groups(scores, ids, criterion=spec.filter_criterion)
    assert bool(kept[4]) == (not tied)
    if spec.unnormalised is not None:
        assert cc.get_estimator(spec.unnormalised).numerator == "total"


def test_grpo_is_batch_scope_with_one_batch_std() -> None:
    spec = cc.get_estimator("grpo")
    assert spec.group_local()
    assert spec.group_local({"std_scope": "group"})
    assert not spec.group_local({"std_scope": "batch"})


def test_chunked_evaluation_follows_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generic path cuts a large batch into pieces only where the spec says group-local."""
    from corrgrpo_core import _batch

    monkeypatch.setattr(_batch, "CHUNK_ROWS", 8)
    calls: list[str] = []
    real = _batch.Batch._cut

    def spy(self: _batch.Batch) -> Any:
        calls.append("cut")
        return real(self)

    monkeypatch.setattr(_batch.Batch, "_cut", spy)
    x = np.random.default_rng(1).normal(size=(6, 4, 2))
    for name in ALL:
        calls.clear()
        cc.compute_advantages(x, estimator=name)
        assert bool(calls) == cc.get_estimator(name).group_local(), name
