"""Data, rewards and a recording trainer for the TRL tests and the torchrun worker (a plain module, so
the worker script can import it too)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

import corrgrpo_core as cc
from corrgrpo_adapters.trl import CorrGRPOConfig, CorrGRPOTrainer

# CPU, tiny and fast: 8 completions per step in 2 groups of 4, 8 new tokens each.
BASE_CONFIG: dict[str, Any] = {
    "bf16": False,
    "use_cpu": True,
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "max_completion_length": 8,
    "max_steps": 3,
    "learning_rate": 1e-2,
    "report_to": "none",
    "save_strategy": "no",
    "logging_steps": 1,
    "gradient_checkpointing": False,
    "log_completions": False,
    "disable_tqdm": True,
    "seed": 0,
}


def dataset(n: int = 32) -> Any:
    from datasets import Dataset

    pairs = [(a, b) for a in range(8) for b in range(8)][:n]
    return Dataset.from_dict(
        {"prompt": [f"{a}+{b}=" for a, b in pairs], "answer": [str(a + b) for a, b in pairs]}
    )


# Three components on very different scales, so GRPO's denominator is dominated by the largest.
def length_bonus(completions: list[str], **_: Any) -> list[float]:
    return [len(c) / 8 for c in completions]  # 0 .. 1


def vowel_count(completions: list[str], **_: Any) -> list[float]:
    return [10.0 * sum(c.count(v) for v in "aeiou") for c in completions]  # 0 .. 80


def answer_digit(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    return [100.0 if a[0] in c else -5.0 for c, a in zip(completions, answer, strict=True)]  # -5 or 100


REWARD_FUNCS = [length_bonus, vowel_count, answer_digit]


class _RecordTRL(GRPOTrainer):
    """Sits between the adapter and TRL in the MRO: sees TRL's gathered rewards and TRL's own advantages."""

    record: dict[str, list[Any]]

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.record["rewards"].append(rewards.clone())
        return rewards

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        out = super()._generate_and_score_completions(inputs)
        self.record["trl_advantages"].append(out["advantages"].clone())
        return out


class RecordingTrainer(CorrGRPOTrainer, _RecordTRL):
    """The adapter's trainer, recording per generation: mode, local prompts, TRL's gathered rewards and
    its own advantages, the adapter's advantages, the completions log; and per loss call: which
    generation its batch came from and the advantages it received (after TRL's shuffle and split)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.record = defaultdict(list)
        super().__init__(*args, **kwargs)

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        out = super()._generate_and_score_completions(inputs)
        n_global = self.record["rewards"][-1].shape[0]
        self.record["mode"].append("train" if self.model.training else "eval")
        self.record["prompts"].append([x["prompt"] for x in inputs])
        self.record["advantages"].append(out["advantages"].clone())
        self.record["logged"].append(list(self._logs["advantages"])[-n_global:])
        return out

    def compute_loss(
        self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        self.record["loss_batches"].append((len(self.record["advantages"]) - 1, inputs["advantages"].clone()))
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def make_trainer(
    model: str,
    out: Path,
    *,
    reward_funcs: list[Any] | None = None,
    eval_dataset: Any = None,
    callbacks: list[Any] | None = None,
    config_cls: type = CorrGRPOConfig,
    **config: Any,
) -> RecordingTrainer:
    """``config_cls``: CorrGRPOConfig, or TRL's own GRPOConfig (the trainer then reproduces TRL's estimator)."""
    from transformers import AutoTokenizer

    args = config_cls(**{**BASE_CONFIG, "output_dir": str(out), **config})
    return RecordingTrainer(
        model=model,
        reward_funcs=reward_funcs or REWARD_FUNCS,
        args=args,
        train_dataset=dataset(),
        eval_dataset=eval_dataset,
        processing_class=AutoTokenizer.from_pretrained(model),
        callbacks=callbacks,
    )


def core_advantages(trainer: CorrGRPOTrainer, rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """The core's advantages for a gathered reward matrix, through the ragged group_ids path (the
    adapter uses the dense one), so the test also checks the adapter's reading of TRL's group layout."""
    group_ids = torch.arange(rewards.shape[0]) // group_size
    plan = trainer.advantage_plan
    return cc.compute_advantages(
        rewards, group_ids, estimator=plan.estimator, weights=trainer.reward_weights.tolist(), **plan.options
    )


def check_core_advantages_used(trainer: RecordingTrainer) -> int:
    """Assert that every generation's advantages are the core's, that the completions log shows them, and
    that the loss received exactly them (each train generation reused num_iterations times). Returns the
    number of generations checked."""
    rec = trainer.record
    rank, ranks = trainer.accelerator.process_index, trainer.accelerator.num_processes
    assert rec["advantages"], "no generation happened"
    for i, (mode, rewards, adv, logged) in enumerate(
        zip(rec["mode"], rec["rewards"], rec["advantages"], rec["logged"], strict=True)
    ):
        group_size = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        expected = core_advantages(trainer, rewards, group_size)
        assert expected.shape[0] == adv.shape[0] * ranks
        local = expected[rank * adv.shape[0] : (rank + 1) * adv.shape[0]]
        torch.testing.assert_close(adv, local.to(adv.dtype), rtol=1e-6, atol=1e-6)
        assert torch.isfinite(adv).all()
        torch.testing.assert_close(torch.tensor(logged), expected.to(torch.float32), rtol=1e-6, atol=1e-6)

        used = [a for j, batch in rec["loss_batches"] if j == i for a in batch.tolist()]
        assert used, f"generation {i} reached no loss call"
        assert not Counter(used) - Counter(adv.tolist() * trainer.args.num_iterations), (
            "the loss received advantages that were not produced for its generation"
        )
        full_cycle = trainer.args.steps_per_generation * trainer.args.num_iterations if mode == "train" else 1
        if sum(j == i for j, _ in rec["loss_batches"]) == full_cycle:
            reps = trainer.args.num_iterations if mode == "train" else 1
            assert Counter(used) == Counter(adv.tolist() * reps)
    return len(rec["advantages"])
