"""Run under ``torchrun --nproc_per_node 2``: train the adapter where one group of 8 completions spans
both ranks (4 per rank), and write what each rank saw to ``<out>/<label>-rank<r>.pt``.

Usage: ``torchrun --standalone --nproc_per_node 2 ddp_worker.py MODEL_DIR OUT_DIR``"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import trl_fixtures
from trl import GRPOConfig

RUNS = {  # label -> config: our estimators, and TRL's own GRPOConfig with a batch-wide std
    "corrgrpo": {"advantage_estimator": "corrgrpo"},
    "gdpo": {"advantage_estimator": "gdpo"},
    "trl-batch": {"config_cls": GRPOConfig, "scale_rewards": "batch"},
}


def main(model: str, out: Path) -> None:
    for label, config in RUNS.items():
        trainer = trl_fixtures.make_trainer(
            model, out / label, per_device_train_batch_size=4, num_generations=8, max_steps=2, **config
        )
        if label == "corrgrpo":  # TRL's built-in block computes its GDPO too (compared for "gdpo" only)
            trainer.multi_objective_aggregation = "normalize_then_sum"
        trainer.train()
        checked = trl_fixtures.check_core_advantages_used(trainer)
        rank = trainer.accelerator.process_index
        torch.save(
            {
                "world_size": trainer.accelerator.num_processes,
                "checked": checked,
                **{k: trainer.record[k] for k in ("rewards", "advantages", "trl_advantages", "prompts")},
            },
            out / f"{label}-rank{rank}.pt",
        )
    # An orderly teardown: a process group left to the interpreter's exit can abort a rank
    # ("terminate called without an active exception" from gloo's threads) after its work is done.
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
