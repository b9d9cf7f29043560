"""Objective values against hand-written numpy formulas, on every backend; autograd checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_api_compat import array_namespace

from corrgrpo_core.objectives import (
    aggregate_loss,
    cispo_loss,
    dapo_loss,
    gspo_loss,
    kl_penalty,
    policy_loss,
    ppo_clip_loss,
)

# ---------------------------------------------------------------- numpy references (the formulas)


def _token_mean(loss: np.ndarray, m: np.ndarray) -> float:
    return float((loss * m).sum() / m.sum())


def _seq_mean_token_mean(loss: np.ndarray, m: np.ndarray) -> float:
    return float(((loss * m).sum(-1) / m.sum(-1)).mean())


def _ref_clip(b: dict[str, np.ndarray], lo: float, hi: float, dual: float | None = None) -> np.ndarray:
    r = np.exp(b["log_prob"] - b["old_log_prob"])
    a = b["advantages"][:, None]
    tok = np.maximum(-a * r, -a * np.clip(r, 1 - lo, 1 + hi))
    if dual is not None:
        tok = np.where(a < 0, np.minimum(tok, -a * dual), tok)
    return tok


def _cispo_weight(b: dict[str, np.ndarray], lo: float | None, hi: float) -> np.ndarray:
    return np.clip(np.exp(b["log_prob"] - b["old_log_prob"]), lo, hi)


def _ref_gspo(b: dict[str, np.ndarray], lo: float, hi: float) -> np.ndarray:
    m = b["mask"].astype(float)
    s = np.exp(((b["log_prob"] - b["old_log_prob"]) * m).sum(-1) / m.sum(-1))[:, None]
    a = b["advantages"][:, None]
    return np.broadcast_to(np.maximum(-a * s, -a * np.clip(s, 1 - lo, 1 + hi)), m.shape)


def _on(xp: Any, b: dict[str, np.ndarray]) -> list[Any]:
    return [xp.asarray(b[k]) for k in ("log_prob", "old_log_prob", "advantages", "mask")]


# ---------------------------------------------------------------- values on every backend

CASES = [
    ("ppo", {}, lambda b: _token_mean(_ref_clip(b, 0.2, 0.2), b["mask"])),
    ("ppo", {"dual_clip": 1.3}, lambda b: _token_mean(_ref_clip(b, 0.2, 0.2, 1.3), b["mask"])),
    ("dapo", {}, lambda b: _token_mean(_ref_clip(b, 0.2, 0.28), b["mask"])),
    (
        "dapo",
        {"aggregation": "seq-mean-token-mean"},
        lambda b: _seq_mean_token_mean(_ref_clip(b, 0.2, 0.28), b["mask"]),
    ),
    (
        "cispo",
        {},
        lambda b: _token_mean(
            -_cispo_weight(b, None, 1.2) * b["advantages"][:, None] * b["log_prob"], b["mask"]
        ),
    ),
    (
        "cispo",
        {"bound": "absolute", "eps_high": 1.1},
        lambda b: _token_mean(
            -_cispo_weight(b, None, 1.1) * b["advantages"][:, None] * b["log_prob"], b["mask"]
        ),
    ),
    (
        "cispo",
        {"eps_low": 0.1, "eps_high": 0.3},
        lambda b: _token_mean(
            -_cispo_weight(b, 0.9, 1.3) * b["advantages"][:, None] * b["log_prob"], b["mask"]
        ),
    ),
    ("gspo", {}, lambda b: _seq_mean_token_mean(_ref_gspo(b, 3e-4, 4e-4), b["mask"])),
    (
        "gspo",
        {"eps_low": 0.05, "eps_high": 0.1},
        lambda b: _seq_mean_token_mean(_ref_gspo(b, 0.05, 0.1), b["mask"]),
    ),
]


@pytest.mark.parametrize(("objective", "options", "reference"), CASES)
def test_loss_value_matches_formula(
    xp: Any, objective: str, options: dict[str, Any], reference: Any, make_batch: Any, to_numpy: Any
) -> None:
    b = make_batch(0)
    out = policy_loss(*_on(xp, b), objective=objective, **options)
    np.testing.assert_allclose(to_numpy(out.loss), reference(b), rtol=1e-10)
    assert out.token_loss.shape == b["mask"].shape
    assert float(to_numpy(out.token_loss)[~b["mask"]].max(initial=0.0)) == 0.0
    assert array_namespace(out.loss) is array_namespace(xp.asarray(b["mask"]))


def test_float32_in_float32_out(xp: Any, make_batch: Any) -> None:
    b = make_batch(1)
    args = [xp.asarray(b[k].astype(np.float32)) for k in ("log_prob", "old_log_prob", "advantages")]
    out = dapo_loss(*args, xp.asarray(b["mask"]))
    assert out.loss.dtype == xp.float32
    assert all(v.dtype == xp.float32 for v in out.metrics.values())


def test_per_token_advantages_equal_broadcast_sequence_advantages(
    xp: Any, make_batch: Any, to_numpy: Any
) -> None:
    b = make_batch(2)
    lp, old, adv, m = _on(xp, b)
    per_token = xp.asarray(np.broadcast_to(b["advantages"][:, None], b["mask"].shape).copy())
    np.testing.assert_allclose(
        to_numpy(cispo_loss(lp, old, per_token, m).loss), to_numpy(cispo_loss(lp, old, adv, m).loss)
    )


def test_metrics(xp: Any, make_batch: Any, to_numpy: Any) -> None:
    b = make_batch(3)
    out = ppo_clip_loss(*_on(xp, b), eps_high=0.28, dual_clip=1.5)
    mt = {k: float(to_numpy(v)) for k, v in out.metrics.items()}
    m = b["mask"]
    r = np.exp(b["log_prob"] - b["old_log_prob"])
    a = b["advantages"][:, None] + 0 * r
    low = (r < 0.8) & (a < 0)
    high = (r > 1.28) & (a > 0)
    assert mt["clip_fraction_low"] == pytest.approx(low[m].mean())
    assert mt["clip_fraction_high"] == pytest.approx(high[m].mean())
    assert mt["clip_fraction"] == pytest.approx(mt["clip_fraction_low"] + mt["clip_fraction_high"])
    assert 0 < mt["clip_fraction"] < 1  # the batch exercises both branches
    assert mt["dual_clip_fraction"] == pytest.approx(((r > 1.5) & (a < 0))[m].mean())
    assert mt["ratio_mean"] == pytest.approx(r[m].mean())
    assert mt["ratio_min"] == pytest.approx(r[m].min())
    assert mt["ratio_max"] == pytest.approx(r[m].max())
    assert mt["approx_kl"] == pytest.approx((b["old_log_prob"] - b["log_prob"])[m].mean())
    assert mt["policy_loss"] == pytest.approx(float(to_numpy(out.loss)))
    assert "kl" not in mt


def test_cispo_clip_fraction_counts_clipped_weights(xp: Any, make_batch: Any, to_numpy: Any) -> None:
    b = make_batch(4)
    r = np.exp(b["log_prob"] - b["old_log_prob"])[b["mask"]]
    rel = cispo_loss(*_on(xp, b), eps_low=0.1, eps_high=0.1).metrics
    assert float(to_numpy(rel["clip_fraction"])) == pytest.approx(((r > 1.1) | (r < 0.9)).mean())
    ab = cispo_loss(*_on(xp, b), bound="absolute", eps_high=1.0).metrics
    assert float(to_numpy(ab["clip_fraction_high"])) == pytest.approx((r > 1.0).mean())
    assert float(to_numpy(ab["clip_fraction_low"])) == 0.0


def test_kl_term_adds_coef_times_aggregated_kl(xp: Any, make_batch: Any, to_numpy: Any) -> None:
    b = make_batch(5)
    ref = b["old_log_prob"] - 0.3
    lp, old, adv, m = _on(xp, b)
    plain = dapo_loss(lp, old, adv, m)
    with_kl = dapo_loss(lp, old, adv, m, ref_log_prob=xp.asarray(ref), kl_coef=0.1)
    d = ref - b["log_prob"]
    k3 = _token_mean(np.exp(d) - d - 1, b["mask"])
    assert float(to_numpy(with_kl.metrics["kl"])) == pytest.approx(k3)
    assert float(to_numpy(with_kl.loss)) == pytest.approx(float(to_numpy(plain.loss)) + 0.1 * k3)


@pytest.mark.parametrize(
    ("kind", "formula"),
    [("k1", lambda d: -d), ("k2", lambda d: 0.5 * d * d), ("k3", lambda d: np.exp(d) - d - 1)],
)
def test_kl_penalty_kinds(xp: Any, kind: str, formula: Any, to_numpy: Any) -> None:
    lp = np.log(np.asarray([0.2, 0.5, 0.9]))
    ref = np.log(np.asarray([0.4, 0.5, 0.3]))
    got = to_numpy(kl_penalty(xp.asarray(lp), xp.asarray(ref), kind=kind))  # type: ignore[arg-type]
    np.testing.assert_allclose(got, formula(ref - lp), rtol=1e-12)


def test_kl_bound_clips(xp: Any, to_numpy: Any) -> None:
    got = to_numpy(kl_penalty(xp.asarray([-30.0]), xp.asarray([0.0]), bound=10.0))
    assert got.tolist() == [10.0]


def test_empty_mask_gives_zero_loss_not_nan(xp: Any, make_batch: Any, to_numpy: Any) -> None:
    b = make_batch(6)
    b["mask"] = np.zeros_like(b["mask"])
    for name in ("ppo", "cispo", "gspo"):
        out = policy_loss(*_on(xp, b), objective=name)
        assert float(to_numpy(out.loss)) == 0.0
        assert np.isfinite(to_numpy(out.metrics["clip_fraction"]))


def test_inputs_not_mutated(make_batch: Any) -> None:
    b = make_batch(7)
    copies = {k: v.copy() for k, v in b.items()}
    for name in ("ppo", "dapo", "cispo", "gspo"):
        policy_loss(b["log_prob"], b["old_log_prob"], b["advantages"], b["mask"], objective=name)
    for k, v in b.items():
        np.testing.assert_array_equal(v, copies[k])


# ---------------------------------------------------------------- aggregation


def test_aggregation_modes_by_hand(xp: Any, to_numpy: Any) -> None:
    loss = xp.asarray([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [5.0, 5.0, 0.0]])
    mask = xp.asarray([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    expected = {
        "token-mean": 10 / 4,
        "token-sum": 10.0,
        "seq-mean-token-mean": (2.0 + 4.0) / 2,
        "seq-mean-token-sum": (6.0 + 4.0) / 2,
        "seq-mean-token-sum-norm": (6.0 + 4.0) / 2 / 3,
    }
    for mode, value in expected.items():
        got = float(to_numpy(aggregate_loss(loss, mask, mode=mode)))  # type: ignore[arg-type]
        assert got == pytest.approx(value), mode
    assert float(to_numpy(aggregate_loss(loss, mask, num_tokens=8))) == pytest.approx(10 / 8)
    got = aggregate_loss(loss, mask, mode="seq-mean-token-sum-norm", num_sequences=4, loss_scale_factor=10)
    assert float(to_numpy(got)) == pytest.approx(10 / 4 / 10)


def test_nan_in_padding_never_leaks(xp: Any, to_numpy: Any) -> None:
    loss = xp.asarray([[1.0, float("nan")]])
    mask = xp.asarray([[True, False]])
    assert float(to_numpy(aggregate_loss(loss, mask))) == 1.0


# ---------------------------------------------------------------- gradients (torch and jax autograd)


def _grad_wrt_log_prob(ad: Any, b: dict[str, np.ndarray], name: str, **options: Any) -> np.ndarray:
    old, adv, m = (ad.asarray(b[k]) for k in ("old_log_prob", "advantages", "mask"))
    return ad.grad(lambda lp: policy_loss(lp, old, adv, m, objective=name, **options).loss, b["log_prob"])


@pytest.mark.parametrize(
    ("options", "lo", "hi"),
    [({}, None, 1.2), ({"eps_low": 0.1, "eps_high": 0.1}, 0.9, 1.1), ({"bound": "absolute"}, None, 5.0)],
)
def test_cispo_gradient_is_clipped_weight_times_advantage(
    ad: Any, options: dict[str, Any], lo: float | None, hi: float, make_batch: Any
) -> None:
    b = make_batch(8, spread=2.0)
    g = _grad_wrt_log_prob(ad, b, "cispo", **options)
    w = _cispo_weight(b, lo, hi)
    m = b["mask"].astype(float)
    np.testing.assert_allclose(g, -w * b["advantages"][:, None] * m / m.sum(), rtol=1e-10, atol=1e-15)
    assert np.all(g[b["mask"]] != 0)  # no token loses its gradient, unlike the PPO clip


def test_dapo_gradient_vanishes_exactly_in_clipped_regions(ad: Any, make_batch: Any) -> None:
    b = make_batch(9)
    g = _grad_wrt_log_prob(ad, b, "dapo")
    r = np.exp(b["log_prob"] - b["old_log_prob"])
    a = b["advantages"][:, None] + 0 * r
    clipped = ((a > 0) & (r > 1.28)) | ((a < 0) & (r < 0.8))
    m = b["mask"]
    assert clipped[m].any()
    assert (~clipped)[m].any()
    # d(-A r)/d log_prob = -A r, over the token count
    expected = np.where(clipped, 0.0, -a * r) * m / m.sum()
    np.testing.assert_allclose(g, expected, rtol=1e-10, atol=1e-15)
    assert np.all(g[clipped] == 0.0)


def test_dual_clip_gradient_vanishes_past_the_cap(ad: Any, make_batch: Any) -> None:
    b = make_batch(10, n=12, spread=1.5)
    g = _grad_wrt_log_prob(ad, b, "ppo", dual_clip=1.5)
    r = np.exp(b["log_prob"] - b["old_log_prob"])
    a = b["advantages"][:, None] + 0 * r
    zero = ((a > 0) & (r > 1.2)) | ((a < 0) & (r < 0.8)) | ((a < 0) & (r > 1.5))
    m = b["mask"]
    assert ((a < 0) & (r > 1.5))[m].any()
    np.testing.assert_allclose(g, np.where(zero, 0.0, -a * r) * m / m.sum(), rtol=1e-10, atol=1e-15)


def test_gspo_gradient_is_sequence_level(ad: Any, make_batch: Any) -> None:
    b = make_batch(11, spread=0.3)
    g = _grad_wrt_log_prob(ad, b, "gspo", eps_low=0.05, eps_high=0.05)
    m = b["mask"].astype(float)
    n = m.sum(-1)
    s = np.exp(((b["log_prob"] - b["old_log_prob"]) * m).sum(-1) / n)
    a = b["advantages"]
    clipped = ((a > 0) & (s > 1.05)) | ((a < 0) & (s < 0.95))
    assert clipped.any()
    assert (~clipped).any()
    # d/dlog_prob_t of -A s_i = -A s_i / |o_i| on each valid token; then the mean over sequences
    expected = np.where(clipped, 0.0, -a * s / n)[:, None] * m / m.shape[0]
    np.testing.assert_allclose(g, expected, rtol=1e-10, atol=1e-15)


def test_gspo_with_one_token_per_sequence_is_grpo(ad: Any, make_batch: Any, to_numpy: Any) -> None:
    b = make_batch(12, t=1)
    args = [ad.asarray(b[k]) for k in ("log_prob", "old_log_prob", "advantages", "mask")]
    opts = {"eps_low": 0.1, "eps_high": 0.15}
    gs = gspo_loss(*args, **opts)
    pp = ppo_clip_loss(*args, **opts)
    np.testing.assert_allclose(to_numpy(gs.loss), to_numpy(pp.loss), rtol=1e-12)
    g_gspo = _grad_wrt_log_prob(ad, b, "gspo", **opts)
    g_ppo = _grad_wrt_log_prob(ad, b, "ppo", **opts)
    np.testing.assert_allclose(g_gspo, g_ppo, rtol=1e-12)
    assert np.any(g_ppo == 0)
    assert np.any(g_ppo != 0)


def test_k3_gradient(ad: Any, make_batch: Any) -> None:
    b = make_batch(13)
    b["advantages"] = np.zeros_like(b["advantages"])  # isolate the KL term
    ref = b["old_log_prob"] + 0.2
    old, adv, m, rf = (ad.asarray(x) for x in (b["old_log_prob"], b["advantages"], b["mask"], ref))
    g = ad.grad(lambda lp: ppo_clip_loss(lp, old, adv, m, ref_log_prob=rf, kl_coef=0.5).loss, b["log_prob"])
    mask = b["mask"].astype(float)
    expected = 0.5 * (1 - np.exp(ref - b["log_prob"])) * mask / mask.sum()
    np.testing.assert_allclose(g, expected, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("name", ["ppo", "cispo", "gspo"])
def test_no_gradient_reaches_old_log_prob_or_advantages(name: str, make_batch: Any) -> None:
    torch = pytest.importorskip("torch")
    b = make_batch(14)
    lp, old, adv = (
        torch.tensor(b[k], requires_grad=True) for k in ("log_prob", "old_log_prob", "advantages")
    )
    ref = torch.tensor(b["old_log_prob"], requires_grad=True)
    out = policy_loss(lp, old, adv, torch.tensor(b["mask"]), objective=name, ref_log_prob=ref, kl_coef=0.1)
    out.loss.backward()
    assert lp.grad is not None
    assert old.grad is None
    assert adv.grad is None
    assert ref.grad is None
    assert all(not v.requires_grad for v in out.metrics.values())


@pytest.mark.parametrize("name", ["ppo", "dapo", "cispo", "gspo"])
def test_runs_under_jax_jit(name: str, make_batch: Any, to_numpy: Any) -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    b = make_batch(15)
    args = [jax.numpy.asarray(b[k]) for k in ("log_prob", "old_log_prob", "advantages", "mask")]
    eager = policy_loss(*args, objective=name)
    jitted = jax.jit(lambda *a: policy_loss(*a, objective=name))(*args)
    np.testing.assert_allclose(to_numpy(jitted.loss), to_numpy(eager.loss), rtol=1e-12)
    for key, value in eager.metrics.items():
        np.testing.assert_allclose(to_numpy(jitted.metrics[key]), to_numpy(value), rtol=1e-12)
    grad = jax.jit(jax.grad(lambda lp: policy_loss(lp, *args[1:], objective=name).loss))(args[0])
    assert np.all(np.isfinite(np.asarray(grad)))


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: ppo_clip_loss(a[0], a[1][:, :2], a[2], a[3]), "share one shape"),
        (lambda a: ppo_clip_loss(a[0], a[1], a[2][:2], a[3]), "advantages must have shape"),
        (lambda a: ppo_clip_loss(a[0][0], a[1][0], a[2], a[3][0]), r"shape \(N, T\)"),
        (lambda a: ppo_clip_loss(*a, eps_low=-0.1), "eps_low"),
        (lambda a: ppo_clip_loss(*a, dual_clip=0.5), "dual_clip must be a number > 1, got 0.5"),
        (lambda a: ppo_clip_loss(*a, kl_coef=0.1), "ref_log_prob"),
        (
            lambda a: ppo_clip_loss(*a, aggregation="mean"),
            "aggregation must be one of 'token-mean', 'token-sum'",
        ),
        (
            lambda a: cispo_loss(*a, bound="absolute", eps_low=0.2),
            "eps_low must be None with bound='absolute'",
        ),
        (
            lambda a: cispo_loss(*a, bound="one_plus"),
            "bound must be one of 'relative', 'absolute', got 'one_plus'",
        ),
        (
            lambda a: cispo_loss(*a, bound="absolute", eps_high=0.0),
            "eps_high must be a positive number, got 0.0",
        ),
        (lambda a: gspo_loss(*a, log_ratio_limit=0.0), "log_ratio_limit"),
        (
            lambda a: ppo_clip_loss(a[0], a[1], a[2], a[3], ref_log_prob=a[0][:, :1], kl_coef=1.0),
            "ref_log_prob",
        ),
        (lambda a: policy_loss(*a, objective="grpo"), "unknown objective"),
        (lambda a: kl_penalty(a[0], a[1], kind="k4"), "kind must be one of 'k1', 'k2', 'k3', got 'k4'"),
        (lambda a: aggregate_loss(a[0], a[3][:, :1]), "shape"),
    ],
)
def test_bad_input_errors(call: Any, message: str, make_batch: Any) -> None:
    b = make_batch(16)
    args = [b[k] for k in ("log_prob", "old_log_prob", "advantages", "mask")]
    with pytest.raises(ValueError, match=message):
        call(args)


def test_integer_log_probs_rejected(make_batch: Any) -> None:
    b = make_batch(17)
    with pytest.raises(TypeError, match="real floating"):
        ppo_clip_loss(np.zeros((6, 5), dtype=np.int64), b["old_log_prob"], b["advantages"], b["mask"])


def test_mixed_namespaces_rejected(make_batch: Any) -> None:
    torch = pytest.importorskip("torch")
    b = make_batch(18)
    with pytest.raises(TypeError, match="one library"):
        ppo_clip_loss(torch.tensor(b["log_prob"]), b["old_log_prob"], b["advantages"], b["mask"])


def test_importance_weighted_k3_gradient(ad: Any, make_batch: Any) -> None:
    """TRL's bias-corrected KL: r * k3, with r differentiable (d/dlp of r*k3 = r*k3 + r*(1 - e^delta))."""
    b = make_batch(19)
    b["advantages"] = np.zeros_like(b["advantages"])
    ref = b["old_log_prob"] + 0.2
    old, adv, m, rf = (ad.asarray(x) for x in (b["old_log_prob"], b["advantages"], b["mask"], ref))

    def loss(lp: Any) -> Any:
        return cispo_loss(lp, old, adv, m, ref_log_prob=rf, kl_coef=1.0, kl_importance_weighted=True).loss

    g = ad.grad(loss, b["log_prob"])
    r = np.exp(b["log_prob"] - b["old_log_prob"])
    d = ref - b["log_prob"]
    k3 = np.exp(d) - d - 1
    mask = b["mask"].astype(float)
    np.testing.assert_allclose(g, (r * k3 + r * (1 - np.exp(d))) * mask / mask.sum(), rtol=1e-10, atol=1e-15)
