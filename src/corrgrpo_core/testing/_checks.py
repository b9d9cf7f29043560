"""Invariant checks any advantage estimator can be run against (the conformance kit).

What to check comes from the registry (:class:`corrgrpo_core.EstimatorSpec`): ``kind`` names a
registered estimator, whose ``oracle`` the advantages must match, whose ``centred`` says they sum
to zero per group, and whose ``numerator="total"`` says they are a positive group factor times
GRPO's. An estimator added with :func:`corrgrpo_core.register_estimator` is checked the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, given, settings

from .._oracles import grpo_oracle
from .._registry import EstimatorSpec, estimator_names, get_estimator
from .._validation import unknown_name
from ._strategies import RewardBatch, reward_batches

F64 = npt.NDArray[np.float64]
Estimator = Callable[[Any, Any], Any]


def _spec(kind: str) -> EstimatorSpec:
    """The registered estimator ``kind``, which must declare an oracle."""
    checkable = [n for n in estimator_names() if get_estimator(n).oracle is not None]
    if kind not in checkable:
        raise unknown_name("kind (an estimator with an oracle)", kind, checkable)
    return get_estimator(kind)


def _group_sums(values: F64, ids: npt.NDArray[Any]) -> F64:
    _, inverse = np.unique(ids, return_inverse=True)
    return np.asarray(np.bincount(inverse, weights=values), dtype=np.float64)


def _close(actual: F64, desired: F64, rtol: float, atol: float, what: str) -> None:
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, err_msg=what)


def _centred_totals(batch: RewardBatch) -> F64:
    total = batch.scores.sum(axis=1)
    _, inverse, counts = np.unique(batch.group_ids, return_inverse=True, return_counts=True)
    return np.asarray(total - (np.bincount(inverse, weights=total) / counts)[inverse], dtype=np.float64)


def check_batch(
    fn: Estimator,
    batch: RewardBatch,
    *,
    kind: str = "corrgrpo",
    eps: float = 1e-6,
    eps_placement: str = "inside",
    rtol: float = 1e-6,
    atol: float = 1e-7,
    to_array: Callable[[F64], Any] = np.asarray,
    to_numpy: Callable[[Any], F64] = np.asarray,
) -> None:
    """Run every check of ``kind`` on one ragged batch; raise AssertionError naming the one that fails."""
    spec = _spec(kind)
    oracle = spec.oracle
    assert oracle is not None

    def call(scores: F64, ids: npt.NDArray[Any]) -> F64:
        return np.asarray(to_numpy(fn(to_array(scores), to_array(ids))), dtype=np.float64)

    x, ids = batch.scores, batch.group_ids
    adv = call(x, ids)
    assert adv.shape == (x.shape[0],), f"output shape {adv.shape}, expected ({x.shape[0]},)"
    assert np.all(np.isfinite(adv)), f"non-finite advantages {adv} for finite scores"
    takes = inspect.signature(oracle).parameters
    oracle_kw = {k: v for k, v in (("eps", eps), ("eps_placement", eps_placement)) if k in takes}
    scale = max(1.0, float(np.max(np.abs(adv), initial=0.0)))
    _close(adv, oracle(x, ids, **oracle_kw), rtol, atol * scale, f"{kind}: differs from the reference loop")
    if spec.centred:
        sums = _group_sums(adv, ids)
        _close(
            sums, np.zeros_like(sums), 0, atol * scale * 10, f"{kind}: advantages do not sum to 0 per group"
        )

    perm = np.random.default_rng(0).permutation(x.shape[0])
    _close(call(x[perm], ids[perm]), adv[perm], rtol, atol * scale, f"{kind}: not permutation-equivariant")

    if spec.numerator == "total" and x.shape[0]:
        grpo = grpo_oracle(x, ids, eps=0.0)
        # A = c_q * A_grpo with c_q > 0 shared by the group
        _, inverse = np.unique(ids, return_inverse=True)
        for g in range(inverse.max() + 1):
            rows = (inverse == g) & (np.abs(grpo) > 1e-6)
            if rows.sum() >= 1:
                ratio = adv[rows] / grpo[rows]
                assert np.all(ratio > 0), f"{kind}: sign differs from GRPO in group {g}: ratios {ratio}"
                _close(
                    ratio, np.full_like(ratio, ratio[0]), 1e-6, 0, f"{kind}: c_q not constant in group {g}"
                )
    if kind == "corrgrpo" and x.shape[0]:  # the paper's property of the correlation norm
        centred = _centred_totals(batch)
        # the denominator is invariant to positive affine maps of each component
        rng = np.random.default_rng(1)
        a = 10.0 ** rng.uniform(-2, 2, x.shape[1])
        b = rng.normal(size=x.shape[1]) * 5
        mapped = x * a + b
        adv2 = call(mapped, ids)
        num2 = _centred_totals(RewardBatch(mapped, ids))
        keep = (np.abs(centred) > 1e-6 * np.abs(centred).max(initial=1)) & (
            np.abs(num2) > 1e-6 * np.abs(num2).max(initial=1)
        )
        if keep.any():
            _close(
                adv2[keep] / num2[keep],
                adv[keep] / centred[keep],
                1e-5,
                0,
                "corrgrpo: denominator changed under a positive affine map of a component",
            )


def check_advantage_estimator(
    fn: Estimator,
    *,
    kind: str = "corrgrpo",
    max_examples: int = 100,
    equal_sizes: bool = False,
    eps: float = 1e-6,
    eps_placement: str = "inside",
    rtol: float = 1e-6,
    atol: float = 1e-7,
    to_array: Callable[[F64], Any] = np.asarray,
    to_numpy: Callable[[Any], F64] = np.asarray,
) -> None:
    """Check ``fn(scores, group_ids) -> advantages`` against the invariants of ``kind``.

    ``fn`` takes a ragged batch, ``scores`` (N, K) and integer ``group_ids`` (N,) (converted
    with ``to_array``), and returns (N,) advantages (read back with ``to_numpy``). Batches come
    from :func:`reward_batches`: singletons, pairs, constant, binary, duplicated and
    anti-correlated components on scales 1e-3..1e3. Checks: finite output, agreement with a
    reference loop (the registered estimator ``kind``'s ``oracle``), zero sum per group where it
    declares ``centred``, permutation equivariance, A = c_q A_grpo with c_q > 0 per group where it
    declares ``numerator="total"``, and for CorrGRPO an affine-invariant denominator.
    Raises AssertionError with hypothesis's falsifying example.

    Examples
    --------
    >>> import corrgrpo_core as cc
    >>> from corrgrpo_core.testing import check_advantage_estimator
    >>> check_advantage_estimator(lambda s, g: cc.corrgrpo_advantage(s, g), max_examples=20)
    """

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=reward_batches(equal_sizes=equal_sizes))
    def run(batch: RewardBatch) -> None:
        check_batch(
            fn,
            batch,
            kind=kind,
            eps=eps,
            eps_placement=eps_placement,
            rtol=rtol,
            atol=atol,
            to_array=to_array,
            to_numpy=to_numpy,
        )

    run()


__all__ = ["check_advantage_estimator", "check_batch"]
