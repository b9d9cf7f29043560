"""Config validation: every mistake is reported with a message that names the problem and the fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from corrgrpo_adapters.verl import ConfigError, check_trainer, reward_spec

pytestmark = pytest.mark.usefixtures("verl_imported")


def call(estimator: str, batch: Any, config: Any, **kwargs: Any) -> Any:
    """Call the estimator exactly as verl's dispatcher does (the registry, verl's keyword arguments)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    return get_adv_estimator_fn(estimator)(
        token_level_rewards=batch.token_level_scores(),
        response_mask=batch.response_mask(),
        config=config,
        index=batch.uids,
        **kwargs,
    )


def test_spec_reads_keys_weights_and_options(algo: Any) -> None:
    spec = reward_spec(
        algo(reward_keys=["acc", "fmt"], reward_weights=[1, 0.5], estimator_kwargs={"eps": 1e-4})
    )
    assert spec.keys == ("acc", "fmt")
    assert spec.weights == (1.0, 0.5)
    assert spec.core_estimator == "corrgrpo"
    assert dict(spec.core_kwargs) == {"eps": 1e-4}
    # norm_adv_by_std_in_grpo=False keeps verl's meaning: no std division (Dr.GRPO).
    assert reward_spec(algo(norm_adv_by_std_in_grpo=False)).core_estimator == "dr_grpo"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reward_keys": ["acc", "fmt"], "reward_weights": [1.0]}, "reward_weights has 1 entries but"),
        ({"reward_keys": ["acc"], "reward_weights": [1.0, 2.0]}, "give one weight per key"),
        ({"reward_weights": [1.0]}, "reward_keys is not"),
        ({"reward_keys": []}, "reward_keys is empty"),
        ({"reward_keys": "acc"}, "must be a list"),
        ({"reward_keys": ["acc", "acc"]}, "more than once"),
        ({"reward_keys": ["acc"], "reward_weights": ["heavy"]}, "must be numbers"),
        ({"reward_keys": ["acc"], "reward_weights": [float("inf")]}, "must be finite"),
        ({"reward_keys": ["acc"], "gdpo_reward_keys": ["fmt"]}, "disagree"),
        ({"adv_estimator": "mo_grpo", "norm_adv_by_std_in_grpo": False}, "has no meaning for 'mo_grpo'"),
        ({"estimator_kwargs": {"weights": [1.0]}}, "may not set 'weights'"),
        ({"adv_estimator": "corrgrp"}, "not a corrgrpo estimator"),
    ],
)
def test_bad_options_are_named(algo: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        reward_spec(algo(**options))


def test_unknown_reward_key_lists_the_keys_present(batch: Any, algo: Any) -> None:
    from verl.protocol import DataProto
    from verl.trainer.ppo import ray_trainer

    data = DataProto.from_dict(
        tensors={"token_level_rewards": batch.token_level_scores(), "response_mask": batch.response_mask()},
        non_tensors={"uid": batch.uids, "acc": batch.components["acc"], "format": batch.components["fmt"]},
    )
    with pytest.raises(
        ConfigError, match=r"\[.fmt.\] not found in non_tensor_batch.*present: \['acc', 'format', 'uid'\]"
    ):
        ray_trainer.compute_advantage(data, "corrgrpo", config=algo(reward_keys=["acc", "fmt"]))


def test_component_length_and_type_errors(batch: Any, algo: Any) -> None:
    config = algo(reward_keys=["acc"])
    with pytest.raises(ConfigError, match="has 3 values for a batch of 15"):
        call("corrgrpo", batch, config, non_tensor_batch={"acc": np.ones(3)})
    with pytest.raises(ConfigError, match="non-numeric"):
        call("corrgrpo", batch, config, non_tensor_batch={"acc": np.array(["yes"] * batch.n, dtype=object)})


def test_components_missing_names_the_trainer_mode(batch: Any, algo: Any) -> None:
    """What verl's stock V1 trainer does: call the estimator with no components at all."""
    with pytest.raises(ConfigError, match=r"trainer\.v1\.trainer_mode=corrgrpo"):
        call("corrgrpo", batch, algo(reward_keys=["acc"]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"epsilon": 1e-3},
            r"sets \['epsilon'\], which estimator 'corrgrpo' does not take; its options: eps, ",
        ),
        (
            {"eps_placement": "middle"},
            "rejected by estimator 'corrgrpo': eps_placement must be one of 'inside', 'outside', got 'middle'",
        ),
        ({"min_correlation_sum": -1}, "rejected by estimator 'corrgrpo': min_correlation_sum must be"),
    ],
)
def test_bad_estimator_kwargs_fail_at_config_time(algo: Any, kwargs: dict[str, Any], message: str) -> None:
    # at config time (verl's validate_config, in the driver), not at the first training step
    from omegaconf import OmegaConf

    config = OmegaConf.create(
        {
            "algorithm": {"adv_estimator": "corrgrpo", "estimator_kwargs": kwargs},
            "trainer": {"v1": {"trainer_mode": "corrgrpo"}},
        }
    )
    with pytest.raises(ConfigError, match=message):
        check_trainer(config)


def test_core_options_pass_through(batch: Any, algo: Any) -> None:
    out, _ = call("corrgrpo", batch, algo(estimator_kwargs={"eps": 0.5}))
    import corrgrpo_core as cc

    single = batch.token_level_scores().sum(-1, keepdim=True).double().numpy()
    expected = cc.broadcast_to_tokens(
        cc.compute_advantages(single, batch.group_ids(), eps=0.5), batch.response_mask().numpy()
    )
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert out.dtype == torch.float32


def test_uid_is_required(batch: Any, algo: Any) -> None:
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    with pytest.raises(ConfigError, match="uid"):
        get_adv_estimator_fn("corrgrpo")(
            token_level_rewards=batch.token_level_scores(), response_mask=batch.response_mask(), config=algo()
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {
                "algorithm": {"adv_estimator": "corrgrpo", "reward_keys": ["acc"]},
                "trainer": {"v1": {"trainer_mode": "sync"}},
            },
            "needs trainer.v1.trainer_mode=corrgrpo",
        ),
        (
            {
                "algorithm": {"adv_estimator": "dara", "reward_keys": ["acc"]},
                "trainer": {"v1": {"trainer_mode": "colocate_async"}},
            },
            "trainer_mode=corrgrpo_colocate_async",
        ),
        (
            {
                "algorithm": {
                    "adv_estimator": "corrgrpo",
                    "filter_groups": {"enable": True, "metric": "reward_components"},
                },
                "trainer": {"v1": {"trainer_mode": "corrgrpo"}},
            },
            "needs \\+algorithm.reward_keys",
        ),
        (
            {
                "algorithm": {
                    "adv_estimator": "corrgrpo",
                    "reward_keys": ["acc"],
                    "filter_groups": {"enable": True, "metric": "reward_components"},
                },
                "trainer": {"use_v1": False},
            },
            "implemented by the corrgrpo trainer modes",
        ),
    ],
)
def test_trainer_cross_checks(overrides: dict[str, Any], message: str) -> None:
    from omegaconf import OmegaConf

    with pytest.raises(ConfigError, match=message):
        check_trainer(OmegaConf.create(overrides))


def test_trainer_cross_checks_accept_valid_setups() -> None:
    from omegaconf import OmegaConf

    v1 = OmegaConf.create(
        {
            "algorithm": {"adv_estimator": "corrgrpo", "reward_keys": ["acc"]},
            "trainer": {"v1": {"trainer_mode": "corrgrpo_separate_async"}},
        }
    )
    assert check_trainer(v1).keys == ("acc",)
    legacy = OmegaConf.create(
        {
            "algorithm": {"adv_estimator": "gdpo_corr", "reward_keys": ["acc"]},
            "trainer": {"use_v1": False, "v1": {"trainer_mode": "sync"}},
        }
    )
    assert check_trainer(legacy).core_estimator == "gdpo_corr"
    # Not our estimator: nothing to check, and verl's own GRPO still runs on our trainer mode.
    assert (
        check_trainer(
            OmegaConf.create(
                {"algorithm": {"adv_estimator": "grpo"}, "trainer": {"v1": {"trainer_mode": "corrgrpo"}}}
            )
        )
        is None
    )


@pytest.mark.parametrize(
    ("algorithm", "message"),
    [
        (
            {"adv_estimator": "grpo", "reward_keys": ["acc", "fmt"]},
            (
                r"reward_keys=\['acc', 'fmt'\] is read only by the corrgrpo estimators; algorithm.adv_estimator=grpo would "
                "ignore it"
            ),
        ),
        (
            {"adv_estimator": "gdpo", "reward_keys": ["acc"]},
            r"verl's own gdpo reads \+algorithm.gdpo_reward_keys",
        ),
    ],
)
def test_reward_keys_that_would_be_ignored_are_refused(algorithm: dict[str, Any], message: str) -> None:
    from omegaconf import OmegaConf

    with pytest.raises(ConfigError, match=message):
        check_trainer(OmegaConf.create({"algorithm": algorithm, "trainer": {"use_v1": False}}))


def test_reward_keys_for_component_filtering_with_verl_grpo_are_kept() -> None:
    from omegaconf import OmegaConf

    config = OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": "grpo",
                "reward_keys": ["acc"],
                "filter_groups": {"enable": True, "metric": "reward_components"},
            },
            "trainer": {"v1": {"trainer_mode": "corrgrpo"}},
        }
    )
    assert check_trainer(config) is None


def test_estimators_registered_only_in_the_workers_pass_the_config_check(compose: Any, recipes: Any) -> None:
    from corrgrpo_adapters.verl.plugin import check_config

    # a team's own estimator, registered only in the workers: stock verl accepts the config, so do we
    assert check_config(compose([*recipes.grpo, "algorithm.adv_estimator=team_private_estimator"])) is None
    # a misspelling of one of ours is still caught in the driver
    with pytest.raises(ConfigError, match="did you mean 'corrgrpo'"):
        check_config(compose([*recipes.grpo, "algorithm.adv_estimator=corrgrp"]))


def test_the_installed_verl_is_in_range_and_one_outside_warns_naming_it(
    compose: Any, recipes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    from corrgrpo_adapters.verl.plugin import check_config

    config = compose([*recipes.grpo, *recipes.corrgrpo])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_config(config)  # the installed release: inside the range, silent
    monkeypatch.setattr("corrgrpo_adapters.installed_version", lambda _: "0.10.0")
    with pytest.warns(UserWarning, match=r"supports verl>=.*verl 0\.10\.0 is outside"):
        check_config(config)
