"""CorrGRPO inside TRL's GRPOTrainer: the smallest complete script.

    pip install 'corrgrpo-core[trl]'
    python examples/trl_quickstart.py                      # tiny random-weight model, CPU, seconds
    python examples/trl_quickstart.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 200   # a real checkpoint (hub id or local path), on the GPU

Three reward functions on different scales are three reward components; CorrGRPO normalises their
centred sum by the group's correlation norm instead of GRPO's std, so the largest-scale reward does not
drown the others. Any other core estimator is one flag away (--estimator grpo|gdpo|gdpo_corr|dara|...).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch
from datasets import Dataset

from corrgrpo_adapters.trl import CorrGRPOConfig, CorrGRPOTrainer


def correct(completions: list[str], answer: list[str], **_: object) -> list[float]:
    """10 when the first number in the completion is the answer, else 0."""
    found = [re.search(r"-?\d+", c) for c in completions]
    return [10.0 if m is not None and m.group() == a else 0.0 for m, a in zip(found, answer, strict=True)]


def has_number(completions: list[str], **_: object) -> list[float]:
    """1 when the completion contains any digit."""
    return [float(any(ch.isdigit() for ch in c)) for c in completions]


def brevity(completions: list[str], **_: object) -> list[float]:
    """Between 0 and 0.1, shorter is better."""
    return [0.1 / (1 + len(c)) for c in completions]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="checkpoint (hub id or local path); default: a tiny local model on CPU"
    )
    parser.add_argument("--estimator", default="corrgrpo", help="a corrgrpo_core estimator name")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--output-dir", default="trl-quickstart-out")
    opts = parser.parse_args(argv)

    real = opts.model is not None
    gpu = real and torch.cuda.is_available()
    if real:
        model = opts.model
    else:
        from corrgrpo_adapters.trl.testing import make_tiny_model

        model = make_tiny_model(Path(opts.output_dir) / "tiny-model")

    pairs = [(a, b) for a in range(10) for b in range(10)]
    data = Dataset.from_dict(
        {"prompt": [f"{a}+{b}=" for a, b in pairs], "answer": [str(a + b) for a, b in pairs]}
    )
    args = CorrGRPOConfig(
        output_dir=opts.output_dir,
        advantage_estimator=opts.estimator,
        reward_weights=[1.0, 1.0, 1.0],
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=32 if real else 8,
        max_steps=opts.steps,
        learning_rate=1e-6 if real else 1e-3,
        logging_steps=1,
        use_cpu=not gpu,
        bf16=gpu,
        gradient_checkpointing=False,
        report_to="none",  # "wandb" / "tensorboard": the corrgrpo/ metrics go there too
        save_strategy="no",
    )
    trainer = CorrGRPOTrainer(
        model=model, reward_funcs=[correct, has_number, brevity], args=args, train_dataset=data
    )
    trainer.train()
    last = next(e for e in reversed(trainer.state.log_history) if "corrgrpo/c_q/mean" in e)
    print({k: round(v, 4) for k, v in last.items() if k.startswith(("corrgrpo/", "reward", "step_time"))})


if __name__ == "__main__":
    main()
