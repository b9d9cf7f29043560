"""Our objectives reproduce verl's policy losses, aggregation and KL on the same tensors.

Runs verl's own functions from ``verl.trainer.ppo.core_algos`` (no mocks): the loss value, the
gradient with respect to the log-probabilities, and the logged clip fractions must agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
actor_config = pytest.importorskip("verl.workers.config.actor")

from corrgrpo_core.objectives import (
    aggregate_loss,
    cispo_loss,
    gspo_loss,
    kl_penalty,
    ppo_clip_loss,
)

MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "token-sum"]


def _config(low: float, high: float, mode: str, loss_mode: str, clip_ratio_c: float = 3.0) -> Any:
    return actor_config.ActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio=0.2,
        clip_ratio_low=low,
        clip_ratio_high=high,
        clip_ratio_c=clip_ratio_c,
        loss_agg_mode=mode,
        policy_loss=actor_config.PolicyLossConfig(loss_mode=loss_mode),
    )


def _batch(seed: int, spread: float = 0.8) -> dict[str, Any]:
    """float64 tensors; ratios fall on both sides of every clip range used below."""
    rng = np.random.default_rng(seed)
    n, t = 8, 6
    old = np.log(rng.uniform(0.05, 0.95, size=(n, t)))
    lp = np.minimum(old + rng.uniform(-spread, spread, size=(n, t)), -1e-3)
    adv = rng.normal(size=n)
    lengths = rng.integers(1, t + 1, size=n)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
    return {
        "log_prob": torch.tensor(lp),
        "old_log_prob": torch.tensor(old),
        # verl takes per-token advantages (bs, T); ours takes (N,) or (N, T)
        "advantages": torch.tensor(np.broadcast_to(adv[:, None], (n, t)).copy()),
        "mask": torch.tensor(mask),
    }


def _loss_and_grad(fn: Any, b: dict[str, Any]) -> tuple[float, np.ndarray, Any]:
    lp = b["log_prob"].clone().requires_grad_(True)
    loss, extra = fn(lp)
    loss.backward()
    return float(loss.detach()), lp.grad.numpy(), extra


def _verl(name: str, b: dict[str, Any], config: Any, mode: str) -> tuple[float, np.ndarray, dict[str, float]]:
    fn = core_algos.get_policy_loss_fn(name)
    return _loss_and_grad(
        lambda lp: fn(
            old_log_prob=b["old_log_prob"],
            log_prob=lp,
            advantages=b["advantages"],
            response_mask=b["mask"],
            loss_agg_mode=mode,
            config=config,
        ),
        b,
    )


def _ours(fn: Any, b: dict[str, Any], **options: Any) -> tuple[float, np.ndarray, dict[str, float]]:
    def run(lp: Any) -> tuple[Any, dict[str, float]]:
        out = fn(lp, b["old_log_prob"], b["advantages"], b["mask"], **options)
        return out.loss, {k: float(v) for k, v in out.metrics.items()}

    return _loss_and_grad(run, b)


def _assert_same(
    ours: tuple[float, np.ndarray, Any], theirs: tuple[float, np.ndarray, Any], mode: str
) -> None:
    # verl's seq-mean-token-mean divides by (token count + 1e-8); everything else is exact in float64
    rtol = 1e-7 if mode == "seq-mean-token-mean" else 1e-12
    assert ours[0] == pytest.approx(theirs[0], rel=rtol, abs=1e-14)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=rtol, atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("low", "high", "ours_low"), [(10.0, 0.2, None), (0.2, 0.2, 0.2), (0.1, 0.5, 0.1)])
def test_cispo_relative_matches_verl(mode: str, low: float, high: float, ours_low: float | None) -> None:
    b = _batch(0, spread=1.2)
    theirs = _verl("cispo", b, _config(low, high, mode, "cispo"), mode)
    ours = _ours(cispo_loss, b, eps_low=ours_low, eps_high=high, aggregation=mode)
    _assert_same(ours, theirs, mode)
    assert ours[2]["clip_fraction"] == pytest.approx(theirs[2]["actor/pg_clipfrac"])
    assert ours[2]["approx_kl"] == pytest.approx(theirs[2]["actor/ppo_kl"])
    assert 0 < ours[2]["clip_fraction"] < 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("low", "high"), [(0.2, 0.2), (0.2, 0.28)])
def test_vanilla_ppo_and_dapo_clip_match_verl(mode: str, low: float, high: float) -> None:
    b = _batch(1, spread=1.4)
    # one token with A < 0 and ratio ~ 9 so that verl's dual clip (c = 3) bites
    row = int(np.flatnonzero(b["advantages"][:, 0].numpy() < 0)[0])
    b["old_log_prob"][row, 0], b["log_prob"][row, 0] = float(np.log(0.1)), float(np.log(0.9))
    theirs = _verl("vanilla", b, _config(low, high, mode, "vanilla", clip_ratio_c=3.0), mode)
    # verl's vanilla loss always applies the dual clip (clip_ratio_c, default 3)
    ours = _ours(ppo_clip_loss, b, eps_low=low, eps_high=high, dual_clip=3.0, aggregation=mode)
    _assert_same(ours, theirs, mode)
    assert ours[2]["clip_fraction"] == pytest.approx(theirs[2]["actor/pg_clipfrac"])
    assert ours[2]["dual_clip_fraction"] == pytest.approx(theirs[2]["actor/pg_clipfrac_lower"])
    assert ours[2]["approx_kl"] == pytest.approx(theirs[2]["actor/ppo_kl"])
    assert theirs[2]["actor/pg_clipfrac"] > 0
    assert theirs[2]["actor/pg_clipfrac_lower"] > 0


def _gspo_aggregation(b: dict[str, Any], mode: str) -> str:
    """The aggregation verl's GSPO applies when asked for ``mode``: verl 0.9.0 aggregates GSPO per
    sequence (seq-mean-token-mean) whatever ``loss_agg_mode`` says, 0.9.1 honours it. Told by verl's own
    losses on a batch where the two aggregations differ (ours must differ there too)."""
    per_sequence = "seq-mean-token-mean"
    if mode == per_sequence:
        return mode
    ours = [_ours(gspo_loss, b, eps_low=0.05, eps_high=0.08, aggregation=m)[0] for m in (mode, per_sequence)]
    assert ours[0] != pytest.approx(ours[1], rel=1e-6)
    theirs = [_verl("gspo", b, _config(0.05, 0.08, m, "gspo"), m)[0] for m in (mode, per_sequence)]
    return per_sequence if theirs[0] == theirs[1] else mode


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_gspo_matches_verl(mode: str) -> None:
    b = _batch(2, spread=0.3)
    theirs = _verl("gspo", b, _config(0.05, 0.08, mode, "gspo"), mode)
    applied = _gspo_aggregation(b, mode)
    ours = _ours(gspo_loss, b, eps_low=0.05, eps_high=0.08, aggregation=applied)
    _assert_same(ours, theirs, applied)
    assert ours[2]["clip_fraction"] == pytest.approx(theirs[2]["actor/pg_clipfrac"])
    assert 0 < theirs[2]["actor/pg_clipfrac"] < 1


@pytest.mark.parametrize("mode", MODES)
def test_agg_loss_matches_verl(mode: str) -> None:
    b = _batch(3)
    b["mask"][2] = 0.0  # an empty sequence: verl leaves it out of the sequence count, so do we
    loss = b["log_prob"] * 3.0
    theirs = core_algos.agg_loss(loss, b["mask"], mode)
    ours = aggregate_loss(loss, b["mask"], mode=mode)
    assert float(ours) == pytest.approx(float(theirs), rel=1e-7)  # verl's seq-mean-token-mean adds 1e-8
    # global-batch normalisers: verl divides by global counts and multiplies by dp_size
    theirs = core_algos.agg_loss(
        loss, b["mask"], mode, dp_size=2, batch_num_tokens=60, global_batch_size=16, loss_scale_factor=9
    )
    ours = aggregate_loss(loss, b["mask"], mode=mode, num_tokens=30, num_sequences=8, loss_scale_factor=9)
    assert float(ours) == pytest.approx(float(theirs) / (2 if mode == "token-sum" else 1), rel=1e-7)


@pytest.mark.parametrize(
    ("verl_name", "kind", "bound"), [("k1", "k1", None), ("mse", "k2", None), ("low_var_kl", "k3", 10.0)]
)
def test_kl_matches_verl(verl_name: str, kind: str, bound: float | None) -> None:
    b = _batch(4, spread=3.0)
    ref = b["old_log_prob"] + 3.0
    theirs = core_algos.kl_penalty(b["log_prob"], ref, verl_name)
    ours = kl_penalty(b["log_prob"], ref, kind=kind, bound=bound)  # type: ignore[arg-type]
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    if kind == "k3":
        assert float(theirs.max()) == 10.0  # the batch reaches verl's clamp
