"""CISPO through the patched ``PolicyLoss.forward``, against OpenRLHF's own PPO loss."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

from corrgrpo_adapters.openrlhf import hook, launcher
from corrgrpo_adapters.openrlhf.config import AdapterConfig

EPS_LOW, EPS_HIGH = 0.2, 0.28


def _batch(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    old = torch.log(torch.rand(3, 5, generator=gen) * 0.8 + 0.1)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    advantages = torch.randn(3, 1, generator=gen).expand(3, 5) * mask
    return old, advantages, mask


def _grad(loss_fn, log_probs, old, advantages, mask, **kwargs):
    """(loss, gradient, clip ratio, KL, the IS-correction metrics that follow: 1 before OpenRLHF 0.11.2,
    2 from it on)."""
    log_probs = log_probs.clone().requires_grad_(True)
    loss, clip_ratio, ppo_kl, *correction_metrics = loss_fn(
        log_probs, old, advantages, action_mask=mask, **kwargs
    )
    loss.backward()
    return loss.detach(), log_probs.grad, clip_ratio, ppo_kl, tuple(correction_metrics)


def _is_correction_on(policy_loss) -> dict:
    """PolicyLoss arguments that turn its IS correction on, in the API the installed OpenRLHF has."""
    import inspect

    params = inspect.signature(policy_loss).parameters
    if "is_correction_level" in params:  # OpenRLHF 0.11.2 on
        return {"is_correction_level": "token"}
    assert "enable_vllm_is_correction" in params, list(params)
    return {"enable_vllm_is_correction": True, "vllm_is_truncated_threshold": [0.5, 5.0]}


@pytest.fixture
def cispo(orl, patch_with):
    patch_with(AdapterConfig("corrgrpo", ("acc",), policy_loss="cispo"))
    return orl


@pytest.mark.parametrize("token_level_loss", [True, False])
def test_on_policy_cispo_has_ppo_gradient(cispo, token_level_loss):
    # At ratio 1 neither clip binds: both gradients are -A * grad log pi, aggregated the same way.
    old, advantages, mask = _batch()

    def make():
        return cispo.PolicyLoss(EPS_LOW, EPS_HIGH, token_level_loss=token_level_loss)

    _, grad_cispo, clip_ratio, ppo_kl, extra = _grad(make(), old, old, advantages, mask)
    hook.unpatch_openrlhf()
    _, grad_ppo, _, _, ppo_extra = _grad(make(), old, old, advantages, mask)
    torch.testing.assert_close(grad_cispo, grad_ppo)
    assert grad_cispo.abs().max() > 0
    assert float(clip_ratio) == 0.0
    assert float(ppo_kl) == 0.0
    # As many values as OpenRLHF's own loss returns (its actor unpacks exactly that many), and the
    # IS-correction metrics empty, as OpenRLHF's are with the correction off.
    assert len(ppo_extra) in (1, 2)
    assert extra == ppo_extra == (None,) * len(ppo_extra)


@pytest.mark.parametrize(
    ("token_level_loss", "aggregation"), [(True, "token-mean"), (False, "seq-mean-token-mean")]
)
def test_the_loss_is_the_core_cispo_loss(cispo, token_level_loss, aggregation):
    from corrgrpo_core.objectives import cispo_loss

    old, advantages, mask = _batch(seed=3)
    log_probs = old + torch.linspace(-0.5, 0.5, 5)
    loss_fn = cispo.PolicyLoss(EPS_LOW, EPS_HIGH, token_level_loss=token_level_loss)
    loss, *_ = _grad(loss_fn, log_probs, old, advantages, mask)
    core = cispo_loss(
        log_probs, old, advantages, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, aggregation=aggregation
    )
    torch.testing.assert_close(loss, core.loss)


def test_off_policy_tokens_keep_a_clipped_weight(cispo):
    # Ratios far outside [1 - eps_low, 1 + eps_high]: PPO zeroes some gradients, CISPO never does;
    # its per-token gradient is -clip(r) * A / (number of valid tokens).
    old, advantages, mask = _batch(seed=1)
    shift = torch.tensor([[-1.0, -0.1, 0.0, 0.1, 1.0]]).expand(3, 5)
    log_probs = old + shift
    loss_fn = cispo.PolicyLoss(EPS_LOW, EPS_HIGH)
    _, grad, clip_ratio, ppo_kl, _ = _grad(loss_fn, log_probs, old, advantages, mask)
    weight = shift.exp().clamp(1 - EPS_LOW, 1 + EPS_HIGH)
    torch.testing.assert_close(grad, -weight * advantages * mask / mask.sum())
    outside = (shift.exp() < 1 - EPS_LOW) | (shift.exp() > 1 + EPS_HIGH)
    assert float(clip_ratio) == pytest.approx(float((outside & mask).sum() / mask.sum()))
    assert float(ppo_kl) == pytest.approx(float((-shift * mask).sum() / mask.sum()))


def test_data_parallel_normalisation_stays_openrlhfs(cispo):
    # OpenRLHF divides by the global token count and multiplies by dp_size; CISPO must inherit that.
    old, advantages, mask = _batch(seed=2)
    loss_fn = cispo.PolicyLoss(EPS_LOW, EPS_HIGH)
    local, *_ = _grad(loss_fn, old + 0.3, old, advantages, mask)
    scaled, *_ = _grad(
        loss_fn, old + 0.3, old, advantages, mask, dp_size=2, batch_num_tokens=2 * float(mask.sum())
    )
    torch.testing.assert_close(scaled, local)


@pytest.mark.parametrize("variant", ["gspo", "dual_clip", "is_correction"])
def test_cispo_refuses_the_ppo_variants_it_replaces(cispo, variant):
    kwargs = {
        "gspo": {"policy_loss_type": "gspo"},
        "dual_clip": {"dual_clip": 3.0},
        "is_correction": _is_correction_on(cispo.PolicyLoss),
    }[variant]
    old, advantages, mask = _batch()
    with pytest.raises(ValueError, match="CISPO replaces") as refused:
        cispo.PolicyLoss(EPS_LOW, EPS_HIGH, **kwargs)(old, old, advantages, action_mask=mask)
    # It names the IS-correction option that the installed OpenRLHF's own CLI has.
    option = re.search(r"--algo\.advantage\.is_correction_\w+", str(refused.value))
    assert option is not None
    assert f'"{option.group(0)}"' in _openrlhf_cli_source()


def test_the_launcher_refuses_the_is_correction_option_this_openrlhf_has():
    # Whichever API the installed OpenRLHF has, its IS-correction option is among those refused.
    refused = [name for name in launcher._CISPO_REPLACES if "is_correction" in name]
    assert [name for name in refused if f'"{name}"' in _openrlhf_cli_source()] != []


def _openrlhf_cli_source() -> str:
    spec = importlib.util.find_spec(launcher.OPENRLHF_ENTRY)
    assert spec is not None
    assert spec.origin is not None
    return Path(spec.origin).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "extra",
    [
        ["--actor.policy_loss_type", "gspo"],
        ["--actor.dual_clip=3"],
        ["--algo.advantage.is_correction_level", "seq"],  # OpenRLHF 0.11.2's IS correction
        ["--algo.advantage.is_correction_enable"],  # and the one before it
    ],
)
def test_launcher_refuses_cispo_with_the_ppo_variants_it_replaces(cispo, capsys, extra):
    argv = [
        "--corrgrpo.reward_keys",
        "acc",
        "--corrgrpo.policy_loss",
        "cispo",
        "--rollout.n_samples_per_prompt",
        "4",
    ]
    with pytest.raises(SystemExit):
        launcher.parse_launch([*argv, *extra], environ={})
    assert "--corrgrpo.policy_loss cispo replaces" in capsys.readouterr().err


def test_without_cispo_the_loss_is_openrlhfs_again(cispo, patch_with):
    patch_with(AdapterConfig("corrgrpo", ("acc",)))
    assert hook.is_patched() == {"compute_advantages_and_returns": True, "policy_loss": False}


def test_a_core_without_objectives_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "corrgrpo_core.objectives", None)  # makes the import fail
    with pytest.raises(RuntimeError, match=r"needs corrgrpo_core\.objectives"):
        AdapterConfig("corrgrpo", ("acc",), policy_loss="cispo")
