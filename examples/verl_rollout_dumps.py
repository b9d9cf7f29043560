"""A small GRPO run's rollout dumps in verl's format, for ``corrgrpo explain RUN_DIR``.

Run: ``python examples/verl_rollout_dumps.py rollouts && corrgrpo explain rollouts --plot run.png``.

verl writes one ``<step>.jsonl`` per training step when ``trainer.rollout_data_dir`` is set. This
script writes eight such steps for a synthetic math task with three reward components, the way a
``compute_score`` returning ``{"score", "acc", "format", "length"}`` would through verl 0.9.1's
legacy trainer: ``acc`` (pass/fail), ``format`` (0/1, almost always met) and ``length`` (a penalty in
[-1, 0] that, on hard prompts, punishes exactly the long answers that are correct). With verl
installed it calls verl's own writer (``RayPPOTrainer._write_generations``); otherwise a copy of
its format (one ``json.dumps(entry, ensure_ascii=False, default=str)`` line per rollout, keys
input, output, gts, score, step, then the reward function's extra keys).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def _write(inputs, outputs, gts, scores, extra, folder: str, step: int) -> None:
    try:
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    except ImportError:
        Path(folder).mkdir(parents=True, exist_ok=True)
        n = len(inputs)
        base = {"input": inputs, "output": outputs, "gts": gts, "score": scores, "step": [step] * n}
        base.update({k: v for k, v in extra.items() if len(v) == n})
        with open(Path(folder) / f"{step}.jsonl", "w") as handle:
            for i in range(n):
                entry = {k: v[i] for k, v in base.items()}
                handle.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        return
    RayPPOTrainer._write_generations(inputs, outputs, gts, scores, extra, folder, step)


def write_run(folder: str, *, steps: int = 8, prompts: int = 64, n: int = 8, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(-2.0, 2.0, prompts)  # logit of failing, per prompt
    hard = difficulty > 1.2  # on these, correct answers are the long ones
    for step in range(1, steps + 1):
        skill = 0.35 * (step - 1)
        p_acc = 1.0 / (1.0 + np.exp(np.repeat(difficulty, n) - skill))
        acc = rng.random(prompts * n) < p_acc
        fmt = (rng.random(prompts * n) < 0.9 + 0.01 * step).astype(int)
        tokens = rng.integers(80, 600, prompts * n)
        tokens = np.where(np.repeat(hard, n) & acc, tokens + 700, tokens)
        length = -np.clip((tokens - 400) / 800, 0.0, 1.0).round(3)
        score = acc + 0.2 * fmt + 0.5 * length
        inputs = [
            f"Problem {p}: compute the sum of the digits of {1000 + 37 * p}."
            for p in range(prompts)
            for _ in range(n)
        ]
        outputs = [f"... ({t} tokens) #### {int(a)}" for t, a in zip(tokens, acc, strict=True)]
        gts = [str(p % 10) for p in range(prompts) for _ in range(n)]
        extra = {
            "score": score.tolist(),
            "acc": acc.tolist(),
            "format": fmt.tolist(),
            "length": length.tolist(),
        }
        _write(inputs, outputs, gts, score.tolist(), extra, folder, step)


if __name__ == "__main__":
    write_run(sys.argv[1] if len(sys.argv) > 1 else "rollouts")
