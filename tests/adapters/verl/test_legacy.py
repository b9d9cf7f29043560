"""verl's legacy trainer path: ``ray_trainer.compute_advantage`` on a DataProto shaped as ``RayPPOTrainer.fit``
builds it (reward components in ``non_tensor_batch``, ``uid`` strings), against the core on the same matrix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from corrgrpo_adapters.verl import ConfigError

pytestmark = pytest.mark.usefixtures("verl_imported")


def legacy_data(batch: Any, *, prompt_len: int = 3) -> Any:
    """A DataProto as ``RayPPOTrainer.fit`` holds it right before ``compute_advantage``."""
    from verl.protocol import DataProto

    scores = batch.token_level_scores()
    response_mask = batch.response_mask()
    attention = torch.cat([torch.ones(batch.n, prompt_len, dtype=torch.int64), response_mask], dim=1)
    tensors = {
        "prompts": torch.ones(batch.n, prompt_len, dtype=torch.int64),
        "responses": torch.ones(batch.n, batch.max_len, dtype=torch.int64),
        "attention_mask": attention,
        "response_mask": response_mask,
        "token_level_scores": scores,
        "token_level_rewards": scores.clone(),
    }
    # fit(): batch.non_tensor_batch.update({k: np.array(v) for k, v in reward_extra_infos_dict.items()})
    extra = {k: np.array(list(v)) for k, v in batch.components.items()}
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": batch.uids, **extra})


def run(data: Any, estimator: str, config: Any) -> Any:
    from verl.trainer.ppo import ray_trainer

    return ray_trainer.compute_advantage(
        data,
        adv_estimator=estimator,
        num_repeat=4,
        norm_adv_by_std_in_grpo=config.get("norm_adv_by_std_in_grpo", True),
        config=config,
    )


@pytest.mark.parametrize(
    ("estimator", "core_name"),
    [
        ("corrgrpo", "corrgrpo"),
        ("grpo_covariance_coefficient", "corrgrpo"),
        ("gdpo_corr", "gdpo_corr"),
        ("mo_grpo", "mo_grpo"),
        ("dara", "dara"),
    ],
)
def test_advantages_equal_core(batch: Any, algo: Any, estimator: str, core_name: str) -> None:
    weights = [1.0, 0.5, 2.0]
    config = algo(adv_estimator=estimator, reward_keys=list(batch.keys), reward_weights=weights)
    out = run(legacy_data(batch), estimator, config)
    expected = batch.core(core_name, weights=np.asarray(weights))
    np.testing.assert_allclose(out.batch["advantages"].numpy(), expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(out.batch["returns"], out.batch["advantages"])
    assert out.batch["advantages"].dtype == torch.float32
    # Zero outside the response mask, and non-trivial inside it.
    assert torch.all(out.batch["advantages"][batch.response_mask() == 0] == 0)
    assert out.batch["advantages"].abs().sum() > 0


def test_reference_fork_key_names(batch: Any, algo: Any) -> None:
    """The paper's launchers use ``grpo_covariance_coefficient`` with ``gdpo_reward_keys``."""
    config = algo(adv_estimator="grpo_covariance_coefficient", gdpo_reward_keys=["acc", "fmt"])
    out = run(legacy_data(batch), "grpo_covariance_coefficient", config)
    np.testing.assert_allclose(
        out.batch["advantages"].numpy(), batch.core("corrgrpo", ["acc", "fmt"]), rtol=1e-5, atol=1e-6
    )


def test_component_columns_follow_key_order(batch: Any, algo: Any) -> None:
    a = run(legacy_data(batch), "corrgrpo", algo(reward_keys=["acc", "len"], reward_weights=[1.0, 3.0]))
    b = run(legacy_data(batch), "corrgrpo", algo(reward_keys=["len", "acc"], reward_weights=[3.0, 1.0]))
    np.testing.assert_allclose(a.batch["advantages"].numpy(), b.batch["advantages"].numpy(), atol=1e-6)


def test_tied_totals_with_varying_components_get_advantages(make_batch: Any, algo: Any) -> None:
    """Components that trade off exactly: verl's GRPO sees a constant score (acc + fmt) and gives 0;
    MO-GRPO, and CorrGRPO once the components are weighted, still rank the responses."""
    batch = make_batch(group_sizes=(4,))
    batch.components["acc"] = np.array([1.0, 0.0, 0.0, 1.0])
    batch.components["fmt"] = np.array([0.0, 1.0, 0.0, 0.5])
    batch.components["len"] = 1.0 - batch.components["acc"] - batch.components["fmt"]
    assert np.ptp(batch.matrix().sum(1)) == 0
    weights = np.array([2.0, 1.0, 1.0])
    corr = run(
        legacy_data(batch), "corrgrpo", algo(reward_keys=list(batch.keys), reward_weights=weights.tolist())
    )
    np.testing.assert_allclose(
        corr.batch["advantages"].numpy(), batch.core("corrgrpo", weights=weights), atol=1e-6
    )
    assert corr.batch["advantages"].abs().max() > 0.1
    mo = run(legacy_data(batch), "mo_grpo", algo(adv_estimator="mo_grpo", reward_keys=list(batch.keys)))
    assert mo.batch["advantages"].abs().max() > 0.1
    grpo = run(legacy_data(batch), "grpo", algo(adv_estimator="grpo"))
    assert grpo.batch["advantages"].abs().max() == 0


@pytest.mark.parametrize("estimator", ["corrgrpo", "mo_grpo", "core_grpo"])
def test_metrics_reach_the_step_log(batch: Any, algo: Any, estimator: str) -> None:
    from verl.trainer.ppo import ray_trainer

    data = run(legacy_data(batch), estimator, algo(adv_estimator=estimator, reward_keys=list(batch.keys)))
    metrics = ray_trainer.compute_data_metrics(batch=data, use_critic=False)
    assert "critic/advantages/mean" in metrics  # verl's own metrics are still there
    # the core's summary under the names every adapter logs, for every estimator
    for name in (
        "zero_signal_groups",
        "degenerate_groups",
        "degenerate/max_abs_advantage",
        "degenerate/c_q_max",
        "max_abs_advantage",
        "c_q/mean",
    ):
        assert np.isfinite(metrics[f"corrgrpo/{name}"])
    for key in batch.keys:
        assert f"corrgrpo/denominator_share/{key}" in metrics
        assert metrics[f"corrgrpo/reward/{key}/mean"] == pytest.approx(batch.components[key].mean())
    assert metrics["corrgrpo/groups"] == 5
    assert metrics["corrgrpo/singleton_groups"] == 1
    assert "corrgrpo_metrics" not in data.meta_info  # consumed, not sent on to the workers again


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_single_component_matches_verl_grpo(make_batch: Any, algo: Any, norm_by_std: bool) -> None:
    """No reward_keys: the one component is verl's sequence reward. Our GRPO-equivalent estimator on one
    component (mo_grpo with std, corrgrpo = Dr.GRPO without) equals verl's ``grpo`` except on singleton
    groups, where verl keeps the raw score (mean 0, std 1) and the core gives 0."""
    batch = make_batch(seed=3, keys=("len",))
    ours = "mo_grpo" if norm_by_std else "corrgrpo"
    config = algo(adv_estimator=ours, norm_adv_by_std_in_grpo=norm_by_std)
    mine = run(legacy_data(batch), ours, config).batch["advantages"]
    theirs = run(
        legacy_data(batch), "grpo", algo(adv_estimator="grpo", norm_adv_by_std_in_grpo=norm_by_std)
    ).batch["advantages"]
    sizes = {u: int((batch.uids == u).sum()) for u in batch.uids}
    singleton = torch.as_tensor([sizes[u] == 1 for u in batch.uids])
    assert singleton.sum() == 1
    torch.testing.assert_close(mine[~singleton], theirs[~singleton], rtol=1e-5, atol=1e-6)
    assert torch.all(mine[singleton] == 0)
    assert theirs[singleton].abs().sum() > 0


# --- issue 17: diagnostics with the advantages' options, mixed uids, missing components ---


def metrics_of(data: Any) -> dict[str, float]:
    from corrgrpo_adapters.verl._legacy import META_KEY

    return dict(data.meta_info[META_KEY])


def test_metrics_take_nan_policy_ignore(batch: Any, algo: Any) -> None:
    """The NaN error recommends nan_policy=ignore; the step must then not crash inside the metrics."""
    data = legacy_data(batch)
    acc = data.non_tensor_batch["acc"].astype(object)
    acc[[1, 4]] = None
    data.non_tensor_batch["acc"] = acc
    config = algo(reward_keys=list(batch.keys), estimator_kwargs={"nan_policy": "ignore"})
    out = run(data, "corrgrpo", config)
    metrics = metrics_of(out)
    assert np.isfinite(metrics["corrgrpo/c_q/mean"])
    present = np.delete(batch.components["acc"], [1, 4])
    assert metrics["corrgrpo/reward/acc/mean"] == pytest.approx(present.mean())
    assert torch.isfinite(out.batch["advantages"]).all()


def test_metrics_take_the_correlation_floor(batch: Any, algo: Any) -> None:
    """With min_correlation_sum the logged c_q is the one of the advantages used (A_corr = c_q * A_grpo)."""
    import corrgrpo_core as cc

    floor = 40.0
    config = algo(reward_keys=list(batch.keys), estimator_kwargs={"min_correlation_sum": floor})
    out = run(legacy_data(batch), "corrgrpo", config)
    metrics = metrics_of(out)
    stats = cc.advantage_stats(batch.matrix(), batch.group_ids(), min_correlation_sum=floor)
    assert metrics["corrgrpo/c_q/max"] == pytest.approx(float(stats.c_q.max()))
    grpo = cc.grpo_advantage(batch.matrix(), batch.group_ids(), eps_placement="inside")
    np.testing.assert_allclose(
        batch.core("corrgrpo", min_correlation_sum=floor)[:, 0], stats.c_q * grpo, rtol=1e-6, atol=1e-9
    )
    unfloored = cc.advantage_stats(batch.matrix(), batch.group_ids())
    assert float(unfloored.c_q.max()) > metrics["corrgrpo/c_q/max"]  # what the log showed before


def test_uids_of_mixed_types_group_as_verl_groups_them(batch: Any, algo: Any) -> None:
    from corrgrpo_adapters.verl._estimator import group_ids

    mixed = np.array([1, "1", 2.5, 1, "1", None, 2.5, None], dtype=object)
    np.testing.assert_array_equal(group_ids(mixed), [0, 1, 2, 0, 1, 3, 2, 3])
    data = legacy_data(batch)
    numbers = {u: i for i, u in enumerate(dict.fromkeys(batch.uids))}
    uids = np.array([numbers[u] if numbers[u] % 2 else u for u in batch.uids], dtype=object)  # str and int
    data.non_tensor_batch["uid"] = uids
    out = run(data, "corrgrpo", algo(reward_keys=list(batch.keys)))
    np.testing.assert_allclose(out.batch["advantages"].numpy(), batch.core("corrgrpo"), rtol=1e-5, atol=1e-6)


def test_a_missing_component_names_its_key(batch: Any, algo: Any) -> None:
    data = legacy_data(batch)
    fmt = data.non_tensor_batch["fmt"].astype(object)
    fmt[2] = None
    data.non_tensor_batch["fmt"] = fmt
    with pytest.raises(ConfigError, match=r"missing \(None or NaN\): 'fmt' in rows 2\. .*nan_policy=ignore"):
        run(data, "corrgrpo", algo(reward_keys=list(batch.keys)))
