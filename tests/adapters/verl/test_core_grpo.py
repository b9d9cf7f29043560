"""``core_grpo`` through verl's registry gives verl's own GRPO advantages, in verl's own input format.

The speed paths of the estimator call (uid strings labelled without a sort, the fused token
broadcast) must not change a number: these compare against verl's functions themselves.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
import torch

import corrgrpo_core as cc

pytestmark = pytest.mark.usefixtures("verl_imported")


def verl_batch(n_groups: int, size: int, length: int, *, shuffled: bool, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    uids = [str(uuid.UUID(int=int(rng.integers(1 << 62)), version=4)) for _ in range(n_groups)]
    index = np.array([u for u in uids for _ in range(size)], dtype=object)
    n = len(index)
    scores = np.where(rng.random(n) < 0.3, rng.integers(0, 2, n), rng.normal(size=n)).astype(np.float32)
    if shuffled:
        perm = rng.permutation(n)
        index, scores = index[perm], scores[perm]
    lengths = rng.integers(1, length + 1, n)
    mask = (torch.arange(length)[None, :] < torch.as_tensor(lengths)[:, None]).to(torch.int64)
    rewards = torch.zeros((n, length), dtype=torch.float32)
    rewards[torch.arange(n), torch.as_tensor(lengths - 1)] = torch.as_tensor(scores)
    return {"token_level_rewards": rewards, "response_mask": mask, "index": index}


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("length", [1, 9])
@pytest.mark.parametrize("norm", [True, False])
def test_core_grpo_equals_verl_grpo_vectorized_and_loop(
    shuffled: bool, length: int, norm: bool, algo: Any
) -> None:
    from verl.trainer.ppo import core_algos

    batch = verl_batch(40, 8, length, shuffled=shuffled)
    config = algo(adv_estimator="core_grpo", norm_adv_by_std_in_grpo=norm)
    ours, returns = core_algos.get_adv_estimator_fn("core_grpo")(config=config, **batch)
    vec, _ = core_algos.compute_grpo_vectorized_outcome_advantage(norm_adv_by_std_in_grpo=norm, **batch)
    loop, _ = core_algos.compute_grpo_outcome_advantage(norm_adv_by_std_in_grpo=norm, **batch)
    assert ours is returns
    assert ours.dtype == torch.float32
    assert ours.shape == batch["response_mask"].shape
    torch.testing.assert_close(ours, vec, rtol=0, atol=1e-5)
    torch.testing.assert_close(ours, loop, rtol=0, atol=1e-5)


def test_uid_labels_follow_verl_groups_in_runs_and_scattered() -> None:
    from corrgrpo_adapters.verl._estimator import group_ids

    for shuffled in (False, True):
        index = verl_batch(30, 4, 1, shuffled=shuffled)["index"]
        labels = group_ids(index)
        _, want = np.unique(index, return_inverse=True)
        assert len(set(zip(labels.tolist(), want.tolist(), strict=True))) == len(set(want.tolist()))
    # a uid that comes back after another is not a run: the dict path labels it with its group
    assert group_ids(np.array(["a", "a", "b", "a"], dtype=object)).tolist() == [0, 0, 1, 0]


def test_token_broadcast_equals_verls_product() -> None:
    batch = verl_batch(10, 4, 6, shuffled=True)
    adv = torch.randn(40)
    got = cc.broadcast_to_tokens(adv, batch["response_mask"])
    torch.testing.assert_close(got, adv.unsqueeze(-1) * batch["response_mask"], rtol=0, atol=0)
