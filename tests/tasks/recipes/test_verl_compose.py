"""The verl recipes compose through verl's own hydra config (``ppo_trainer.yaml``) without errors.

Needs verl (listed in ci/envs/verl/recipes.args); composing reads verl's YAML only, so no GPU, no Ray.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from corrgrpo_tasks.recipes import SUPPORTED, build_recipe

VERL = importlib.util.find_spec("verl")
assert VERL is not None, "verl is not installed"
assert VERL.submodule_search_locations
CONFIG_DIR = Path(next(iter(VERL.submodule_search_locations))) / "trainer" / "config"
VERL_DOMAINS = [d for d, frameworks in SUPPORTED.items() if "verl" in frameworks]


def compose_recipe(
    domain: str, estimator: str = "corrgrpo", overrides: tuple[str, ...] = (), extra: tuple[str, ...] = ()
):  # type: ignore[no-untyped-def]
    recipe = build_recipe(domain, "verl", estimator=estimator, overrides=overrides, extra=extra)
    assert recipe.argv[1:3] == ("-m", "verl.trainer.main_ppo")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return recipe, compose(config_name="ppo_trainer", overrides=list(recipe.argv[3:]))


@pytest.mark.parametrize("domain", VERL_DOMAINS)
def test_every_verl_recipe_composes(domain: str) -> None:
    recipe, cfg = compose_recipe(domain)
    hp = recipe.hparams
    assert cfg.algorithm.adv_estimator == "corrgrpo"
    assert list(cfg.algorithm.reward_keys) == list(hp.reward_keys)
    assert list(cfg.algorithm.reward_weights) == [1.0] * len(hp.reward_keys)
    assert cfg.data.train_batch_size == hp.train_batch_size
    assert cfg.actor_rollout_ref.rollout.n == hp.group_size
    assert cfg.actor_rollout_ref.actor.optim.lr == hp.lr
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == hp.mini_batch_size
    assert cfg.actor_rollout_ref.actor.use_kl_loss == hp.use_kl_loss
    assert cfg.trainer.total_epochs == hp.epochs
    assert cfg.trainer.use_v1 is False
    assert cfg.reward.custom_reward_function.path.endswith("verl_reward.py")
    # Interpolations (rollout lengths follow the data lengths) resolve.
    resolved = OmegaConf.to_container(cfg.actor_rollout_ref.rollout, resolve=True)
    assert resolved["response_length"] == hp.max_response_length


def test_agent_security_turns_on_the_multi_turn_agent_loop() -> None:
    recipe, cfg = compose_recipe("agent_security")
    multi = cfg.actor_rollout_ref.rollout.multi_turn
    assert multi.enable is True
    assert (multi.max_user_turns, multi.max_assistant_turns, multi.format) == (8, 8, "hermes")
    assert multi.max_parallel_calls == 1  # the paper's: verl drops a turn's further calls
    _, wider = compose_recipe("agent_security", overrides=("max_parallel_calls=4",))
    assert wider.actor_rollout_ref.rollout.multi_turn.max_parallel_calls == 4
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "agentdojo_agent"
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == recipe.hparams.agent_loop_config
    assert cfg.data.return_raw_chat is True


@pytest.mark.parametrize("estimator", ["grpo", "gdpo", "rloo", "dr_grpo", "mo_grpo", "dara", "gdpo_corr"])
def test_every_estimator_composes_and_changes_only_the_algorithm(estimator: str) -> None:
    _, base = compose_recipe("tool_calling")
    _, other = compose_recipe("tool_calling", estimator=estimator)
    assert other.algorithm.adv_estimator == {"dr_grpo": "corrgrpo"}.get(estimator, estimator)
    if estimator == "gdpo":
        assert list(other.algorithm.gdpo_reward_keys) == list(base.algorithm.reward_keys)
    for cfg in (base, other):
        del cfg.algorithm
        del cfg.trainer.experiment_name
        del cfg.trainer.default_local_dir
    assert OmegaConf.to_container(other) == OmegaConf.to_container(base)


def test_the_v1_trainer_mode_composes() -> None:
    _, cfg = compose_recipe("tool_calling", overrides=("verl_legacy_trainer=false",))
    assert cfg.trainer.use_v1 is True
    assert cfg.trainer.v1.trainer_mode == "corrgrpo"


def test_overrides_and_raw_hydra_extras_reach_the_config() -> None:
    _, cfg = compose_recipe(
        "code",
        overrides=("lr=3e-6", "reward_weights=[1,1,1,1,2,1,1]", "max_steps=5"),
        extra=("actor_rollout_ref.actor.ppo_epochs=2",),
    )
    assert cfg.actor_rollout_ref.actor.optim.lr == 3e-6
    assert list(cfg.algorithm.reward_weights) == [1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0]
    assert cfg.trainer.total_training_steps == 5
    assert cfg.actor_rollout_ref.actor.ppo_epochs == 2


def test_a_misspelt_hydra_key_is_rejected_by_verl() -> None:
    with pytest.raises(Exception, match=r"trainer\.n_gpu"):
        compose_recipe("tool_calling", extra=("trainer.n_gpu=1",))


@pytest.mark.parametrize("domain", VERL_DOMAINS)
def test_verl_accepts_the_composed_config(domain: str) -> None:
    """verl's own pre-flight check (batch-size divisibility, micro-batch settings, critic/ref needs)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    _, cfg = compose_recipe(domain)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert need_critic(cfg) is False
    assert need_reference_policy(cfg) is cfg.actor_rollout_ref.actor.use_kl_loss


@pytest.mark.parametrize("legacy", [True, False])
@pytest.mark.parametrize("estimator", ["corrgrpo", "dr_grpo", "mo_grpo", "gdpo_corr", "dara", "grpo", "rloo"])
def test_our_verl_plugin_accepts_the_composed_config(estimator: str, legacy: bool) -> None:
    """The plugin's own pre-flight check: components reach the estimator, options are valid."""
    plugin = pytest.importorskip("corrgrpo_adapters.verl")
    _, cfg = compose_recipe("tool_calling", estimator=estimator, overrides=(f"verl_legacy_trainer={legacy}",))
    spec = plugin.check_trainer(cfg)
    if estimator in ("grpo", "rloo"):
        assert spec is None  # verl's own estimator on the scalar score
    else:
        assert spec.keys == ("function_name_reward", "parameter_reward", "values_reward", "format_reward")
        assert spec.core_estimator == estimator
