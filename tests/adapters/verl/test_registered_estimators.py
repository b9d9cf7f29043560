"""A user's ``corrgrpo_core.register_estimator`` is selectable in verl by its name, through verl's own
``get_adv_estimator_fn``, and gets its advantages; verl's own names stay verl's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import corrgrpo_core as cc
from corrgrpo_core import _registry

pytestmark = pytest.mark.usefixtures("verl_imported")


def _half_dr_grpo(
    scores: Any, group_ids: Any = None, *, weights: Any = None, nan_policy: str = "raise"
) -> Any:
    return 0.5 * cc.dr_grpo_advantage(scores, group_ids, weights=weights, nan_policy=nan_policy)


@pytest.fixture
def user_estimator() -> Iterator[str]:
    from corrgrpo_adapters.verl import _config

    cc.register_estimator("half_dr_grpo_verl", _half_dr_grpo, "half of Dr.GRPO", scope="group")
    yield "half_dr_grpo_verl"
    del _registry._REGISTRY["half_dr_grpo_verl"]
    _config.REGISTERED.discard("half_dr_grpo_verl")
    from verl.trainer.ppo import core_algos

    core_algos.ADV_ESTIMATOR_REGISTRY.pop("half_dr_grpo_verl", None)


def test_a_registered_estimator_is_selected_by_name_in_verl(user_estimator: str, algo: Any) -> None:
    from verl.trainer.ppo import core_algos

    from corrgrpo_adapters.verl import plugin, reward_spec

    # registered in the core after verl's import: in verl's registry already, with no call of ours
    assert getattr(core_algos.ADV_ESTIMATOR_REGISTRY.get(user_estimator), "corrgrpo_estimator", None) == (
        user_estimator
    )
    assert plugin.register_core_estimators() == []  # nothing left for the explicit call to do
    index = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    scores = torch.tensor([1.0, 0.0, 2.0, 5.0, 5.0, 2.0])
    rewards = torch.zeros((6, 3))
    rewards[:, -1] = scores
    mask = torch.ones((6, 3), dtype=torch.int64)
    fn = core_algos.get_adv_estimator_fn(user_estimator)
    config = algo(adv_estimator=user_estimator)
    adv, _ = fn(token_level_rewards=rewards, response_mask=mask, config=config, index=index)
    want = 0.5 * (scores.view(2, 3) - scores.view(2, 3).mean(1, keepdim=True)).reshape(-1)
    torch.testing.assert_close(adv[:, 0], want)
    assert reward_spec(config).core_estimator == user_estimator
    assert plugin.ours(user_estimator)


def test_verl_keeps_its_own_names_and_dr_grpo_is_selectable() -> None:
    from verl.trainer.ppo import core_algos

    from corrgrpo_adapters.verl import _config, plugin

    plugin.register_core_estimators()
    assert "dr_grpo" in _config.REGISTERED  # a core estimator verl has no name for
    for verl_own in ("grpo", "rloo", "gdpo"):
        assert not plugin.ours(verl_own)
        assert not hasattr(core_algos.get_adv_estimator_fn(verl_own), "corrgrpo_estimator")


def test_suggestions_come_from_the_live_registries(user_estimator: str, compose: Any, recipes: Any) -> None:
    """A misspelt estimator name is matched against what is registered now, the user's own included."""
    from corrgrpo_adapters.verl import ConfigError, _config
    from corrgrpo_adapters.verl.plugin import check_config

    assert user_estimator in _config.selectable()
    with pytest.raises(ConfigError, match=f"did you mean '{user_estimator}'.*'{user_estimator}'"):
        check_config(compose([*recipes.grpo, "algorithm.adv_estimator=half_dr_grpo_vrl"]))
    with pytest.raises(ConfigError, match=f"choose one of .*'{user_estimator}'"):
        _config.reward_spec({"adv_estimator": "nope"})
