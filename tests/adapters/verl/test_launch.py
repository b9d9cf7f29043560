"""The launch recipe: verl's GRPO command plus our overrides, composed by Hydra from verl's own
``ppo_trainer.yaml`` and run through ``verl.trainer.main_ppo.main`` up to the point where it would start Ray."""

from __future__ import annotations

from typing import Any

import pytest

from corrgrpo_adapters.verl import ConfigError

pytestmark = [
    pytest.mark.usefixtures("verl_imported"),
    # verl's own notice for every non-GAE estimator, GRPO included.
    pytest.mark.filterwarnings("ignore:Disabled critic as algorithm.adv_estimator:UserWarning"),
]


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Replace only the Ray launch of ``main_ppo``; config composition and validation run for real."""
    from verl.trainer import main_ppo

    calls: list[tuple[Any, Any]] = []
    monkeypatch.setattr(
        main_ppo, "run_ppo", lambda config, task_runner_class: calls.append((config, task_runner_class))
    )
    return calls


def main(overrides: list[str], compose: Any) -> Any:
    from verl.trainer import main_ppo

    config = compose(overrides)
    main_ppo.main(config)  # hydra.main passes a given config straight to the task function
    return config


def test_v1_recipe_is_accepted(launched: list[Any], compose: Any, recipes: Any) -> None:
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.ppo.v1 import get_trainer_cls

    config = main(recipes.grpo + recipes.corrgrpo, compose)
    ((passed, runner),) = launched
    assert runner is TaskRunnerV1
    assert passed.algorithm.adv_estimator == "corrgrpo"
    assert list(passed.algorithm.reward_keys) == ["acc", "fmt"]
    # What TaskRunnerV1.run does first, in the same process here.
    assert get_trainer_cls(config.trainer.v1.trainer_mode).base_mode == "sync"


@pytest.mark.parametrize(
    ("extra", "runner"),
    [
        pytest.param(
            [
                "algorithm.adv_estimator=gdpo_corr",
                "+algorithm.reward_keys=[acc,fmt,len]",
                "+algorithm.reward_weights=[1.0,0.5,0.25]",
                "+algorithm.estimator_kwargs={eps:1e-4}",
                "trainer.v1.trainer_mode=corrgrpo_colocate_async",
                "algorithm.filter_groups.enable=True",
                "algorithm.filter_groups.metric=reward_components",
            ],
            "verl.trainer.main_ppo:TaskRunnerV1",
            id="options-and-dapo",
        ),
        pytest.param(  # the paper's launchers: alias estimator and gdpo_reward_keys, plus our trainer mode
            [
                "algorithm.adv_estimator=grpo_covariance_coefficient",
                "+algorithm.gdpo_reward_keys=[utility_reward,safety_reward]",
                "trainer.v1.trainer_mode=corrgrpo",
            ],
            "verl.trainer.main_ppo:TaskRunnerV1",
            id="reference-fork",
        ),
        pytest.param(
            ["algorithm.adv_estimator=corrgrpo", "+algorithm.reward_keys=[acc,fmt]", "trainer.use_v1=False"],
            "verl.trainer.main_ppo_v0:TaskRunner",
            id="legacy-trainer",
        ),
    ],
)
def test_other_recipes_are_accepted(
    launched: list[Any], compose: Any, recipes: Any, extra: list[str], runner: str
) -> None:
    import importlib

    main([*recipes.grpo, *extra], compose)
    ((_, task_runner),) = launched
    module, name = runner.split(":")
    assert task_runner is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(
    ("extra", "error", "message"),
    [
        (["trainer.v1.trainer_mode=sync"], ConfigError, "needs trainer.v1.trainer_mode=corrgrpo"),
        (["+algorithm.reward_weights=[1.0]"], ConfigError, "reward_weights has 1 entries"),
        (
            ["algorithm.adv_estimator=corrgrp"],
            ConfigError,
            "unknown algorithm.adv_estimator='corrgrp'.*'corrgrpo'",
        ),
        (["trainer.v1.trainer_mode=corrgrpo_sync"], ValueError, "Unknown trainer 'corrgrpo_sync'.*corrgrpo"),
    ],
)
def test_bad_recipes_stop_before_ray(
    launched: list[Any], compose: Any, recipes: Any, extra: list[str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        main(recipes.grpo + recipes.corrgrpo + extra, compose)
    assert launched == []
