"""Shared helpers for the verl adapter tests: real verl code (each end of the supported range),
synthetic batches, no GPU, no network."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _pytest.config import parse_warning_filter

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

if find_spec("verl") is not None:  # else tests/conftest.py skips this folder without importing it
    # verl's config folder (ppo_trainer.yaml and its defaults), found without importing verl.
    VERL_CONFIG_DIR = next(
        Path(p) / "verl" / "trainer" / "config"
        for p in sys.path
        if (Path(p) / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file()
    )

# A verl GRPO launch (from verl's GSM8K GRPO example) that the adapter's overrides are added to.
GRPO_RECIPE = [
    "algorithm.adv_estimator=grpo",
    "data.train_files=/data/gsm8k/train.parquet",
    "data.val_files=/data/gsm8k/test.parquet",
    "data.train_batch_size=16",
    "data.max_prompt_length=512",
    "data.max_response_length=512",
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    "reward.custom_reward_function.path=my_reward.py",
    "reward.custom_reward_function.name=compute_score",
    "trainer.n_gpus_per_node=2",
    "trainer.nnodes=1",
    "trainer.logger=[console]",
]

# What a user adds to switch that launch to CorrGRPO (docs/adapters/verl.md shows the same lines).
CORRGRPO_OVERRIDES = [
    "algorithm.adv_estimator=corrgrpo",
    "+algorithm.reward_keys=[acc,fmt]",
    "trainer.v1.trainer_mode=corrgrpo",
]


# verl, ray and tensordict warn at import about optional engines and their own deprecations; the
# project turns warnings into errors, so silence exactly those.
_FRAMEWORK_WARNINGS = (
    "ignore:.*engine is not available:UserWarning",
    # verl 0.9.0's ray_trainer imports its MindSpeed engine, whose router-replay patch warns without megatron
    "ignore:NPU not support router replay:UserWarning",
    "ignore::DeprecationWarning",
    "ignore::FutureWarning",
    "ignore::PendingDeprecationWarning",
    "ignore:.*NonTensorData.*:UserWarning",
    "ignore:.*nested tensors.*:UserWarning",
    "ignore::ResourceWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    for line in _FRAMEWORK_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
        # Loaded during collection (`pytest tests`), this conftest comes after pytest has set the
        # collection's filters, and the test modules import verl then: apply the filter there too.
        warnings.filterwarnings(*parse_warning_filter(line, escape=False))


def _compose(overrides: Sequence[str]) -> Any:
    """verl's own ``ppo_trainer`` config, composed by Hydra with ``overrides`` (what main_ppo receives)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(VERL_CONFIG_DIR), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))


def algorithm(**options: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create({"adv_estimator": "corrgrpo", "norm_adv_by_std_in_grpo": True, **options})


def _run_python(
    code: str, *, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this environment (plugins load from installed metadata)."""
    environ = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        check=False,
    )


class Batch:
    """A synthetic multi-reward GRPO batch: ragged groups in shuffled order, string uids, ragged lengths."""

    def __init__(
        self,
        seed: int = 0,
        group_sizes: Sequence[int] = (4, 3, 1, 5, 2),
        keys: Sequence[str] = ("acc", "fmt", "len"),
        max_len: int = 7,
    ) -> None:
        rng = np.random.default_rng(seed)
        uids = [f"prompt-{g:02d}-{rng.integers(1 << 30):x}" for g in range(len(group_sizes))]
        rows = np.array([uids[g] for g, size in enumerate(group_sizes) for _ in range(size)], dtype=object)
        order = rng.permutation(len(rows))
        self.uids = rows[order]
        self.n = len(self.uids)
        self.keys = tuple(keys)
        self.components = {
            "acc": rng.integers(0, 2, self.n).astype(np.float64),
            "fmt": rng.choice([0.0, 0.5, 1.0], self.n),
            "len": rng.normal(size=self.n),
        }
        self.lengths = rng.integers(1, max_len + 1, self.n)
        self.max_len = max_len

    def matrix(self, keys: Sequence[str] | None = None) -> np.ndarray:
        return np.stack([self.components[k] for k in (keys or self.keys)], axis=1)

    def group_ids(self) -> np.ndarray:
        return np.unique(self.uids, return_inverse=True)[1]

    def response_mask(self) -> Any:
        import torch

        return (torch.arange(self.max_len)[None, :] < torch.as_tensor(self.lengths)[:, None]).to(torch.int64)

    def token_level_scores(self, total: np.ndarray | None = None) -> Any:
        """The total score at each response's last token, as verl's reward managers place it."""
        import torch

        total = self.matrix().sum(1) if total is None else total
        scores = torch.zeros(self.n, self.max_len)
        scores[torch.arange(self.n), torch.as_tensor(self.lengths) - 1] = torch.as_tensor(
            total, dtype=torch.float32
        )
        return scores

    def core(self, estimator: str, keys: Sequence[str] | None = None, **options: Any) -> np.ndarray:
        """The core's advantages on the same score matrix, broadcast to tokens."""
        import corrgrpo_core as cc

        adv = cc.compute_advantages(self.matrix(keys), self.group_ids(), estimator=estimator, **options)
        return np.asarray(cc.broadcast_to_tokens(adv, self.response_mask().numpy()))


@pytest.fixture
def batch() -> Batch:
    return Batch()


@pytest.fixture(scope="session")
def verl_imported() -> None:
    import verl  # noqa: F401  -- loads the plugin through its entry point

    from corrgrpo_adapters.verl import plugin

    assert not plugin.FAILURES, plugin.FAILURES


@pytest.fixture
def make_batch() -> type[Batch]:
    return Batch


@pytest.fixture
def algo() -> Any:
    return algorithm


@pytest.fixture
def run_python() -> Any:
    return _run_python


@pytest.fixture
def compose() -> Any:
    return _compose


@pytest.fixture
def recipes() -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(grpo=list(GRPO_RECIPE), corrgrpo=list(CORRGRPO_OVERRIDES))
