"""Run under ``torchrun --nproc_per_node 2``: train the adapter where one group of 8 completions spans
both ranks (4 per rank), and write what each rank saw to ``<out>/<estimator>-rank<r>.pt``.

Usage: ``torchrun --standalone --nproc_per_node 2 ddp_worker.py MODEL_DIR OUT_DIR``"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import trl_fixtures


def main(model: str, out: Path) -> None:
    for estimator in ("corrgrpo", "gdpo"):
        trainer = trl_fixtures.make_trainer(model, out / estimator, advantage_estimator=estimator,
                                            advantage_eps=1e-4, per_device_train_batch_size=4,
                                            num_generations=8, max_steps=2)
        # TRL's built-in block computes its GDPO too, for comparison (see test_trainer.py)
        trainer.multi_objective_aggregation = "normalize_then_sum"
        trainer.train()
        checked = trl_fixtures.check_core_advantages_used(trainer)
        rank = trainer.accelerator.process_index
        torch.save({"world_size": trainer.accelerator.num_processes, "checked": checked,
                    **{k: trainer.record[k] for k in ("rewards", "advantages", "trl_advantages", "prompts")}},
                   out / f"{estimator}-rank{rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
