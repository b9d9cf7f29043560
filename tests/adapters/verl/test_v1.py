"""verl's default V1 trainer: trajectories in a real TransferQueue (on a local Ray, no workers), laid out as
``AgentLoopWorkerTQ`` puts them, then the registered trainer mode's ``_compute_advantage`` and verl's
DAPO replay buffer, against the core on the same matrix."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytestmark = [
    pytest.mark.usefixtures("verl_imported"),
    pytest.mark.filterwarnings("ignore::UserWarning"),  # TransferQueue's thread-count notice on small hosts
]

_partitions = itertools.count()


@pytest.fixture(scope="module")
def tq() -> Iterator[Any]:
    import ray
    import transfer_queue

    # TransferQueue's controller and storage unit are Ray actors; nothing else starts.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        transfer_queue.init()
        yield transfer_queue
        transfer_queue.close()
    finally:
        ray.shutdown()


def put_group_rollouts(
    tq: Any, batch: Any, *, prompts_finished: bool = False, outputs: Any = None
) -> tuple[str, list[str]]:
    """Store ``batch`` as the agent loop does: key ``{uid}_{session}_{index}``, ragged tensors, and the reward
    manager's ``reward_extra_info`` (every key of compute_score's dict) in ``extra_fields``. ``outputs[i]``
    is how many outputs row i's session emits; like verl, each carries the final output's reward."""
    import torch
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    partition = f"train-{next(_partitions)}"
    sessions: dict[str, int] = {}
    keys, fields, tags = [], [], []
    for i, uid in enumerate(batch.uids):
        session = sessions[uid] = sessions.get(uid, -1) + 1
        length = int(batch.lengths[i])
        score = torch.zeros(length)
        score[-1] = float(batch.matrix()[i].sum())
        info = {k: float(v[i]) for k, v in batch.components.items()}
        for index in range(1 if outputs is None else int(outputs[i])):
            keys.append(f"{uid}_{session}_{index}")
            fields.append(
                {
                    "uid": str(uid),
                    "response_mask": torch.ones(length, dtype=torch.int64),
                    "rm_scores": score,
                    "extra_fields": {"reward_extra_info": {"score": float(score[-1]), **info}},
                }
            )
            tags.append({"status": "success", "response_len": length, "global_steps": 0})
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(fields), tags=tags)
    if prompts_finished:
        for uid in sessions:
            tq.kv_put(
                key=uid,
                partition_id=partition,
                tag={"is_prompt": True, "status": "finished", "global_steps": 0},
            )
    return partition, keys


def trainer(mode: str, config: Any) -> Any:
    """The registered trainer class, holding ``config``; its constructor (workers, GPUs) is not run."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    obj = get_trainer_cls(mode).__new__(get_trainer_cls(mode))
    obj.config = config
    obj.trainer_mode = getattr(obj, "base_mode", mode)
    return obj


def compute(
    tq: Any, mode: str, config: Any, batch: Any, outputs: Any = None
) -> tuple[np.ndarray, dict[str, Any]]:
    from transfer_queue import KVBatchMeta

    partition, keys = put_group_rollouts(tq, batch, outputs=outputs)
    meta = KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id=partition)
    metrics: dict[str, Any] = {}
    trainer(mode, config)._compute_advantage(meta, metrics)
    out = tq.kv_batch_get(keys=keys, partition_id=partition, select_fields=["advantages", "returns"])
    padded = out.to_padded_tensor()
    assert (padded["advantages"] == padded["returns"]).all()
    return padded["advantages"].numpy(), metrics


def width(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    return expected[:, : got.shape[1]]


@pytest.mark.parametrize(
    ("mode", "estimator", "core_name"),
    [
        ("corrgrpo", "corrgrpo", "corrgrpo"),
        ("corrgrpo_colocate_async", "gdpo_corr", "gdpo_corr"),
        ("corrgrpo_separate_async", "dara", "dara"),
    ],
)
def test_trainer_mode_feeds_components(
    tq: Any, compose: Any, recipes: Any, batch: Any, mode: str, estimator: str, core_name: str
) -> None:
    config = compose(
        [
            *recipes.grpo,
            f"algorithm.adv_estimator={estimator}",
            "+algorithm.reward_keys=[acc,fmt,len]",
            "+algorithm.reward_weights=[1.0,0.5,2.0]",
            f"trainer.v1.trainer_mode={mode}",
        ]
    )
    got, metrics = compute(tq, mode, config, batch)
    expected = batch.core(core_name, weights=np.array([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(got, width(expected, got), rtol=1e-5, atol=1e-6)
    assert np.abs(got).sum() > 0
    for key in ("acc", "fmt", "len"):
        assert f"corrgrpo/denominator_share/{key}" in metrics
        assert metrics[f"corrgrpo/reward/{key}/mean"] == pytest.approx(batch.components[key].mean())


def test_sessions_with_several_outputs_count_once(tq: Any, compose: Any, recipes: Any, batch: Any) -> None:
    """A multi-output agent loop: as verl's GRPO does, each session's final output is one response of its
    group, and the session's other outputs take its advantage."""
    outputs = np.random.default_rng(7).integers(1, 4, batch.n)
    assert outputs.max() > 1
    config = compose(
        [
            *recipes.grpo,
            "algorithm.adv_estimator=corrgrpo",
            "+algorithm.reward_keys=[acc,fmt,len]",
            "trainer.v1.trainer_mode=corrgrpo",
        ]
    )
    got, metrics = compute(tq, "corrgrpo", config, batch, outputs=outputs)
    expected = batch.core("corrgrpo")[np.repeat(np.arange(batch.n), outputs)]
    np.testing.assert_allclose(got, width(expected, got), rtol=1e-5, atol=1e-6)
    assert metrics["corrgrpo/groups"] == 5


def test_verl_grpo_runs_unchanged_on_our_trainer_mode(
    tq: Any, compose: Any, recipes: Any, batch: Any
) -> None:
    """Our mode adds components only for our estimators: verl's own GRPO gives what verl's sync mode gives."""
    ours, metrics = compute(
        tq, "corrgrpo", compose([*recipes.grpo, "trainer.v1.trainer_mode=corrgrpo"]), batch
    )
    stock, _ = compute(tq, "sync", compose(recipes.grpo), batch)
    np.testing.assert_array_equal(ours, stock)
    assert not metrics


def test_single_component_without_keys(tq: Any, compose: Any, recipes: Any, make_batch: Any) -> None:
    """No reward_keys: the one component is rm_scores' total, exactly as verl's GRPO reads it."""
    batch = make_batch(seed=5, keys=("acc", "fmt", "len"))
    config = compose([*recipes.grpo, "algorithm.adv_estimator=corrgrpo", "trainer.v1.trainer_mode=corrgrpo"])
    got, metrics = compute(tq, "corrgrpo", config, batch)
    import corrgrpo_core as cc

    total = batch.matrix().sum(1, keepdims=True).astype(np.float32).astype(np.float64)
    expected = cc.broadcast_to_tokens(
        cc.compute_advantages(total, batch.group_ids()), batch.response_mask().numpy()
    )
    np.testing.assert_allclose(got, width(expected, got), rtol=1e-5, atol=1e-6)
    assert "corrgrpo/denominator_share/reward" in metrics


def test_stock_trainer_mode_gives_a_clear_error(tq: Any, compose: Any, recipes: Any, batch: Any) -> None:
    from corrgrpo_adapters.verl import ConfigError

    config = compose([*recipes.grpo, "algorithm.adv_estimator=corrgrpo", "+algorithm.reward_keys=[acc,fmt]"])
    with pytest.raises(ConfigError, match=r"trainer\.v1\.trainer_mode=corrgrpo"):
        compute(tq, "sync", config, batch)


def test_missing_component_names_the_trajectory(tq: Any, compose: Any, recipes: Any, batch: Any) -> None:
    from corrgrpo_adapters.verl import ConfigError

    config = compose(
        [
            *recipes.grpo,
            "algorithm.adv_estimator=corrgrpo",
            "+algorithm.reward_keys=[acc,speed]",
            "trainer.v1.trainer_mode=corrgrpo",
        ]
    )
    with pytest.raises(
        ConfigError,
        match=r"\['speed'\] not found in reward_extra_info of trajectory prompt-.*"
        r"present: \['acc', 'fmt', 'len', 'score'\]",
    ):
        compute(tq, "corrgrpo", config, batch)


def dapo_filtered(tq: Any, buffer: Any, partition: str) -> set[str]:
    buffer._sync_metadata_from_transfer_queue()
    filtered, _counts = buffer._dapo_filtered_keys(partition)
    return filtered


def total_reward_metric() -> str:
    """The ``filter_groups.metric`` for which verl's own DAPO filter reads each response's total reward:
    ``reward``, where verl sums ``rm_scores`` for it (its ``FILTER_GROUPS_REWARD_METRIC``, from 0.9.1);
    before, every metric names a ``reward_extra_info`` key, and the total is there as ``score``, where
    verl's reward manager puts compute_score's ``score`` (and put_group_rollouts too)."""
    from verl.trainer.ppo.v1 import replay_buffer

    return str(getattr(replay_buffer, "FILTER_GROUPS_REWARD_METRIC", "score"))


def test_dapo_filtering(tq: Any, compose: Any, recipes: Any, make_batch: Any) -> None:
    """verl's filter_groups on the total drops a group whose components trade off with a tied total; the
    component-aware metric keeps it and still drops groups where every component is constant."""
    batch = make_batch(seed=1, group_sizes=(3, 3, 3))
    group = {u: g for g, u in enumerate(sorted(set(batch.uids)))}
    for uid, gid in group.items():
        rows = batch.uids == uid
        if gid == 0:  # tied total, components vary
            batch.components["acc"][rows] = [1.0, 0.0, 0.0]
            batch.components["fmt"][rows] = [0.0, 1.0, 0.5]
            batch.components["len"][rows] = [0.0, 0.0, 0.5]
        elif gid == 1:  # everything constant
            batch.components["acc"][rows] = 1.0
            batch.components["fmt"][rows] = 0.5
            batch.components["len"][rows] = 0.0
        else:  # varying total
            batch.components["acc"][rows] = [1.0, 0.0, 1.0]
    partition, _ = put_group_rollouts(tq, batch, prompts_finished=True)
    uid_of = {gid: uid for uid, gid in group.items()}

    total = f"algorithm.filter_groups.metric={total_reward_metric()}"
    stock_config = compose([*recipes.grpo, "algorithm.filter_groups.enable=True", total])
    stock = trainer("sync", stock_config)._build_replay_buffer()
    assert dapo_filtered(tq, stock, partition) == {uid_of[0], uid_of[1]}
    # verl's own metrics keep working unchanged under our trainer mode and estimator.
    plain = trainer(
        "corrgrpo",
        compose(recipes.grpo + recipes.corrgrpo + ["algorithm.filter_groups.enable=True", total]),
    )._build_replay_buffer()
    assert type(plain) is type(stock)
    assert dapo_filtered(tq, plain, partition) == {uid_of[0], uid_of[1]}

    ours_config = compose(
        [
            *recipes.grpo,
            "algorithm.adv_estimator=corrgrpo",
            "+algorithm.reward_keys=[acc,fmt,len]",
            "trainer.v1.trainer_mode=corrgrpo",
            "algorithm.filter_groups.enable=True",
            "algorithm.filter_groups.metric=reward_components",
        ]
    )
    buffer = trainer("corrgrpo", ours_config)._build_replay_buffer()
    assert type(buffer).__name__ == "ComponentFilterReplayBuffer"
    assert dapo_filtered(tq, buffer, partition) == {uid_of[1]}
    # Classifications are cached per finished group, as verl's are; a second poll agrees.
    assert dapo_filtered(tq, buffer, partition) == {uid_of[1]}


@pytest.mark.parametrize("mode", ["sync", "corrgrpo"])
def test_multi_output_sessions_count_once_in_every_mode(
    tq: Any, compose: Any, recipes: Any, batch: Any, mode: str
) -> None:
    """A multi-output agent loop with one summed reward, in verl's own V1 mode as in ours: each session's
    final output is one response of its group, as verl's grpo counts it."""
    import corrgrpo_core as cc

    outputs = np.random.default_rng(3).integers(1, 4, batch.n)
    assert outputs.max() > 1
    config = compose([*recipes.grpo, "algorithm.adv_estimator=corrgrpo", f"trainer.v1.trainer_mode={mode}"])
    got, _ = compute(tq, mode, config, batch, outputs=outputs)
    total = batch.matrix().sum(1, keepdims=True).astype(np.float32).astype(np.float64)
    per_session = cc.broadcast_to_tokens(
        cc.compute_advantages(total, batch.group_ids()), batch.response_mask().numpy()
    )
    expected = per_session[np.repeat(np.arange(batch.n), outputs)]
    np.testing.assert_allclose(got, width(expected, got), rtol=1e-5, atol=1e-6)
