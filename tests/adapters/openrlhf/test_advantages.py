"""The patched ``compute_advantages_and_returns`` on real OpenRLHF ``Experience`` objects."""

from __future__ import annotations

import pytest
import torch

import corrgrpo_core as cc
from corrgrpo_adapters import METRIC_PREFIX, RANGES
from corrgrpo_adapters.openrlhf import hook
from corrgrpo_adapters.openrlhf.config import AdapterConfig

N_SAMPLES = 4
PROMPTS = 5


def _components(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    total = N_SAMPLES * PROMPTS
    acc = (torch.rand(total, generator=gen) > 0.5).float()
    fmt = torch.rand(total, generator=gen)
    length = torch.randn(total, generator=gen) * 3.0
    acc[:N_SAMPLES] = 1.0  # one group where accuracy does not vary
    return {"acc": acc, "fmt": fmt, "length": length}


@pytest.mark.parametrize(
    ("kl_coef", "overlong_buffer_len", "gamma"),
    [(0.0, None, 1.0), (0.05, None, 1.0), (0.0, 3.0, 1.0), (0.05, 3.0, 1.0), (0.05, None, 0.9)],
)
def test_grpo_on_the_reward_matches_openrlhf_group_norm(orl, patch_with, kl_coef, overlong_buffer_len, gamma):
    # OpenRLHF's group_norm is GRPO with eps=1e-9 outside the square root and the unbiased std; the
    # reward key "reward" is OpenRLHF's scalar reward after its own length penalties. OpenRLHF
    # overrides gamma to 1 for group_norm, and so does the patch.
    args = orl.make_args(N_SAMPLES, overlong_buffer_len=overlong_buffer_len)
    args.algo.advantage.gamma = gamma
    experiences = orl.make_experiences(_components(), n_samples=N_SAMPLES, micro_batch=3)
    expected = orl.make_maker(args, kl_coef=kl_coef).compute_advantages_and_returns(orl.copy(experiences))

    patch_with(AdapterConfig("grpo", ("reward",), options={"eps": 1e-9}))
    args.algo.advantage.gamma = gamma
    got = orl.make_maker(args, kl_coef=kl_coef).compute_advantages_and_returns(orl.copy(experiences))

    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g.advantages, e.advantages)
        torch.testing.assert_close(g.returns, e.returns)
        torch.testing.assert_close(g.info["return"], e.info["return"])
        torch.testing.assert_close(g.info["group_reward_std"], e.info["group_reward_std"])
        assert g.kl is None  # consumed, as OpenRLHF does
    # The case is not vacuous: advantages vary, and with the penalty some rewards really changed.
    assert torch.cat([e.advantages.flatten() for e in got]).abs().max() > 0.5
    if overlong_buffer_len is not None:
        assert any(not torch.equal(g.rewards, e.rewards) for g, e in zip(got, experiences, strict=True))


@pytest.mark.parametrize(
    ("estimator", "weights", "options"),
    [
        ("corrgrpo", None, {}),
        ("corrgrpo", (1.0, 0.5, 0.25), {"eps": 1e-4}),
        ("gdpo", (2.0, 1.0, 1.0), {}),
        ("rloo", None, {}),
        ("dara", None, {"variant": "sym"}),
    ],
)
def test_token_advantages_are_the_core_advantages_under_the_action_mask(
    orl, patch_with, estimator, weights, options
):
    components = _components(seed=1)
    keys = ("acc", "fmt", "length")
    experiences = orl.make_experiences(components, n_samples=N_SAMPLES, micro_batch=6, seed=1)
    patch_with(AdapterConfig(estimator, keys, weights=weights, options=options))
    got = orl.make_maker(orl.make_args(N_SAMPLES)).compute_advantages_and_returns(experiences)

    scores = torch.stack([components[k] for k in keys], dim=-1)
    groups = torch.arange(len(scores)) // N_SAMPLES
    kwargs = dict(options) | ({} if weights is None else {"weights": list(weights)})
    core = cc.compute_advantages(scores, groups, estimator=estimator, **kwargs)
    assert core.abs().max() > 0.1

    for experience in got:
        expected = cc.broadcast_to_tokens(core[experience.index], experience.action_mask)
        torch.testing.assert_close(experience.advantages, expected.to(experience.advantages.dtype))
        torch.testing.assert_close(experience.returns, experience.advantages)
        assert experience.advantages.dtype == torch.float32


def test_the_per_token_returns_loop_runs_once_per_experience(orl, patch_with, monkeypatch):
    # It is a Python loop over the response length, the costly part of the step.
    experiences = orl.make_experiences(_components(), n_samples=N_SAMPLES, micro_batch=3)
    patch_with(AdapterConfig("corrgrpo", ("acc", "fmt")))
    maker = orl.make_maker(orl.make_args(N_SAMPLES))
    calls = []
    loop = maker.get_cumulative_returns
    monkeypatch.setattr(
        maker, "get_cumulative_returns", lambda *a: calls.append(1) or loop(*a), raising=False
    )
    maker.compute_advantages_and_returns(experiences)
    assert len(calls) == len(experiences)


def test_groups_follow_experience_index_not_batch_order(orl, patch_with):
    # Swap two samples of different prompts between micro-batches while keeping their index: the
    # advantage must travel with the index (the prompt), not with the position in the batch.
    components = _components(seed=2)
    experiences = orl.make_experiences(components, n_samples=N_SAMPLES, micro_batch=5, seed=2)
    patch_with(AdapterConfig("corrgrpo", ("acc", "fmt")))
    maker = orl.make_maker(orl.make_args(N_SAMPLES))
    base = maker.compute_advantages_and_returns(orl.copy(experiences))
    per_sample = orl.prompt_order(base, [e.advantages[:, 0] for e in base])

    for experience in experiences:
        experience.index = experience.index[::-1]
        for key in ("acc", "fmt", "reward"):
            experience.info[key] = experience.info[key].flip(0)
        experience.rewards = experience.rewards.flip(0)
        experience.action_mask = experience.action_mask.flip(0)
        experience.kl = experience.kl.flip(0)
    flipped = maker.compute_advantages_and_returns(experiences)
    torch.testing.assert_close(orl.prompt_order(flipped, [e.advantages[:, 0] for e in flipped]), per_sample)


@pytest.mark.parametrize("estimator", ["corrgrpo", "grpo", "gdpo"])
def test_core_diagnostics_reach_info_and_survive_openrlhf_batching(orl, patch_with, estimator):
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch, split_experience_batch

    components = _components(seed=3)
    experiences = orl.make_experiences(components, n_samples=N_SAMPLES, micro_batch=4, seed=3)
    patch_with(AdapterConfig(estimator, ("acc", "fmt")))
    got = orl.make_maker(orl.make_args(N_SAMPLES)).compute_advantages_and_returns(experiences)

    scores = torch.stack([components["acc"], components["fmt"]], dim=-1)
    summary = cc.advantage_stats(scores, torch.arange(len(scores)) // N_SAMPLES).summary(
        component_names=["acc", "fmt"]
    )
    # the names every adapter logs, for every estimator: the zero-signal and degenerate-group metrics too
    assert {
        "c_q/mean",
        "zero_signal_groups",
        "degenerate_groups",
        "degenerate/max_abs_advantage",
        "degenerate/c_q_max",
        "max_abs_advantage",
        "denominator_share/acc",
        "denominator_share/fmt",
    } <= set(summary)
    for experience in got:
        for name, value in summary.items():
            logged = experience.info[METRIC_PREFIX + name]
            assert logged.shape == (len(experience.index),)
            torch.testing.assert_close(logged, torch.full_like(logged, value))
    # OpenRLHF splits experiences per sample and re-batches them before training and logging; its
    # size checks reject any info entry that is not per-sample.
    items = [item for experience in got for item in split_experience_batch(experience)]
    batch = make_experience_batch(items)
    logged = batch.info[METRIC_PREFIX + "c_q/mean"]
    assert type(logged) is type(batch.info["reward"])  # batched exactly like OpenRLHF's own metrics
    # PolicyModelActor.training_step turns such a list into a tensor and logs its mean.
    assert torch.tensor(logged, dtype=torch.float).mean().item() == pytest.approx(
        summary["c_q/mean"], rel=1e-6
    )


def test_no_stats_leaves_info_alone(orl, patch_with):
    experiences = orl.make_experiences(_components(), n_samples=N_SAMPLES, micro_batch=4)
    patch_with(AdapterConfig("corrgrpo", ("acc", "fmt"), log_stats=False))
    got = orl.make_maker(orl.make_args(N_SAMPLES)).compute_advantages_and_returns(experiences)
    assert not [k for k in got[0].info if k.startswith(METRIC_PREFIX)]


def test_missing_component_names_the_key_and_what_info_has(orl, patch_with):
    experiences = orl.make_experiences(_components(), n_samples=N_SAMPLES, micro_batch=4)
    patch_with(AdapterConfig("corrgrpo", ("acc", "toxicity")))
    with pytest.raises(KeyError, match=r"'toxicity'.*extra_logs") as info:
        orl.make_maker(orl.make_args(N_SAMPLES)).compute_advantages_and_returns(experiences)
    assert "'acc'" in str(info.value)


def test_nan_components_follow_the_core_nan_policy(orl, patch_with):
    components = _components(seed=4)
    components["fmt"][3] = float("nan")
    experiences = orl.make_experiences(components, n_samples=N_SAMPLES, micro_batch=4, seed=4)
    patch_with(AdapterConfig("corrgrpo", ("acc", "fmt")))
    maker = orl.make_maker(orl.make_args(N_SAMPLES))
    with pytest.raises(ValueError, match="NaN"):
        maker.compute_advantages_and_returns(orl.copy(experiences))
    patch_with(AdapterConfig("corrgrpo", ("acc", "fmt"), options={"nan_policy": "ignore"}))
    got = maker.compute_advantages_and_returns(experiences)
    assert all(torch.isfinite(e.advantages).all() for e in got)


def test_a_maker_not_on_group_norm_is_refused(orl, patch_with):
    args = orl.make_args(N_SAMPLES)
    args.algo.advantage.estimator = "gae"
    experiences = orl.make_experiences(_components(), n_samples=N_SAMPLES, micro_batch=4)
    patch_with(AdapterConfig("corrgrpo", ("acc",)))
    with pytest.raises(RuntimeError, match="group_norm"):
        orl.make_maker(args).compute_advantages_and_returns(experiences)


def test_patching_twice_replaces_and_unpatching_restores(orl):
    original = orl.RemoteExperienceMaker.compute_advantages_and_returns
    try:
        hook.patch_openrlhf(AdapterConfig("grpo", ("acc",)))
        hook.patch_openrlhf(AdapterConfig("corrgrpo", ("acc", "fmt")))
        patched = orl.RemoteExperienceMaker.compute_advantages_and_returns
        assert patched.__corrgrpo_original__ is original  # no wrapper around a wrapper
        assert hook.is_patched() == {"compute_advantages_and_returns": True, "policy_loss": False}
    finally:
        hook.unpatch_openrlhf()
    assert orl.RemoteExperienceMaker.compute_advantages_and_returns is original
    assert hook.is_patched()["compute_advantages_and_returns"] is False


def test_setup_hook_runs_the_user_hook_then_patches(orl, monkeypatch):
    from corrgrpo_adapters.openrlhf.config import CONFIG_ENV_VAR

    calls = []
    monkeypatch.setattr(__import__(orl.stubs_module), "install", lambda: calls.append("user"))
    config = AdapterConfig("corrgrpo", ("acc",), user_setup_hook=f"{orl.stubs_module}.install")
    monkeypatch.setenv(CONFIG_ENV_VAR, config.to_json())
    try:
        hook.setup()
        assert calls == ["user"]
        assert hook.is_patched()["compute_advantages_and_returns"]
    finally:
        hook.unpatch_openrlhf()


def test_setup_hook_without_the_launcher_says_so(monkeypatch):
    from corrgrpo_adapters.openrlhf.config import CONFIG_ENV_VAR

    monkeypatch.delenv(CONFIG_ENV_VAR, raising=False)
    with pytest.raises(RuntimeError, match="corrgrpo-openrlhf launcher"):
        hook.setup()


@pytest.mark.parametrize(
    ("target", "name", "replacement", "message"),
    [
        (
            "experience_maker",
            "RemoteExperienceMaker",
            "missing_method",
            "compute_advantages_and_returns does not",
        ),
        ("experience_maker", "compute_reward", "other_signature", r"compute_reward takes \(r, kl\)"),
    ],
)
def test_a_changed_openrlhf_layout_is_a_clear_error(orl, monkeypatch, target, name, replacement, message):
    import openrlhf.trainer.ppo_utils.experience_maker as maker_module

    if replacement == "missing_method":
        monkeypatch.delattr(orl.RemoteExperienceMaker, "compute_advantages_and_returns")
    else:
        monkeypatch.setattr(maker_module, name, lambda r, kl: r)
    with pytest.raises(hook.OpenRLHFLayoutError, match=message) as info:
        hook.patch_openrlhf(AdapterConfig("corrgrpo", ("acc",)))
    assert RANGES["openrlhf"].describe() in str(info.value)


def test_a_registered_estimator_logs_with_its_declared_diagnostic_options():
    """An estimator registered once with the core: the adapter validates it, runs it, and passes its
    diagnostics exactly the options its spec declares as shared (no list kept in the adapter)."""
    from corrgrpo_core import _registry

    def half_corrgrpo(scores, group_ids=None, *, eps=1e-6, nan_policy="raise"):
        return 0.5 * cc.corrgrpo_advantage(scores, group_ids, eps=eps, nan_policy=nan_policy)

    cc.register_estimator(
        "half_corrgrpo", half_corrgrpo, "half CorrGRPO", diagnostic_options=("eps", "nan_policy")
    )
    try:
        config = AdapterConfig("half_corrgrpo", ("a", "b"), options={"eps": 1e-4, "nan_policy": "ignore"})
        assert hook._stats_kwargs(config) == {"eps": 1e-4, "nan_policy": "ignore"}
        with pytest.raises(ValueError, match="takes no option"):
            AdapterConfig("half_corrgrpo", ("a", "b"), options={"ddof": 0})
    finally:
        del _registry._REGISTRY["half_corrgrpo"]


def test_the_installed_openrlhf_is_in_range_and_one_outside_warns_naming_it(orl, monkeypatch):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hook.check_openrlhf()  # the installed release: inside the range, silent
    monkeypatch.setattr("corrgrpo_adapters.installed_version", lambda _: "0.12.0")
    with pytest.warns(UserWarning, match=r"supports openrlhf>=.*openrlhf 0\.12\.0 is outside"):
        hook.check_openrlhf()
