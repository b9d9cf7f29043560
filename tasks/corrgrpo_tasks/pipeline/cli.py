"""``corrgrpo pipeline DOMAIN --framework verl|trl``: train, convert, evaluate every benchmark, one table.

Registered on the ``corrgrpo`` command through the ``corrgrpo.commands`` entry point (``COMMAND``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TextIO

from corrgrpo_core.cli.plugin import CliError, Command

from ..domains import domain_argument, domain_metavar
from ._steps import FRAMEWORKS, plan, run_pipeline

__all__ = ["COMMAND", "add_arguments", "run"]

_DESCRIPTION = """\
Train with the domain's launch recipe (the paper's hyperparameters), convert the final checkpoint to
a Hugging Face model where the framework shards it (verl's FSDP checkpoints, with verl's own merger),
evaluate it on every benchmark of the domain given --data NAME=PATH, and write one table beside the
paper's numbers (OUT/results.md). --dry-run prints every step. Rerunning the same command resumes:
finished steps are skipped and each evaluation resumes its run folder.

Settings are --set name=value ...: a recipe hyperparameter when the name is one (python -m
corrgrpo_tasks.recipes DOMAIN FRAMEWORK --dry-run lists them: model, train_files, lr, max_steps, ...),
otherwise passed to the framework as it is (a verl hydra override such as trainer.nnodes=2, a TRL
GRPOConfig field such as use_cpu=true).

  corrgrpo pipeline code --framework verl --data humaneval=HumanEval.jsonl.gz \\
      --data livecodebench=test6.jsonl --set model=Qwen2.5-Coder-7B-Instruct --dry-run"""


def _data(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--data {text!r}: expected BENCHMARK=PATH")
    return name.strip(), path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pipeline`` sub-command's options."""
    parser.add_argument("domain", type=domain_argument, metavar=domain_metavar(), help="task domain")
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS, help="training framework")
    parser.add_argument("--estimator", default="corrgrpo", help="advantage estimator [corrgrpo]")
    parser.add_argument(
        "--out", default=None, metavar="DIR", help="pipeline folder [pipeline-DOMAIN-FRAMEWORK-ESTIMATOR]"
    )
    parser.add_argument(
        "--data",
        type=_data,
        action="append",
        default=[],
        metavar="BENCHMARK=PATH",
        help="a benchmark's local data (repeat per benchmark; docs/evaluation.md lists the layouts)",
    )
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="PATH",
        help="evaluate this Hugging Face folder instead of training (skips train and convert)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print every step and run none")
    for flag, kind, default, text in (
        ("--limit", int, None, "cases per benchmark [all]"),
        ("--max-new-tokens", int, None, "tokens per generation [evaluate's default]"),
        ("--batch-size", int, None, "conversations per generate call [evaluate's default]"),
        ("--threads", int, None, "torch threads for generation [evaluate's default]"),
        ("--backend", str, None, "generation backend [evaluate's default]"),
        ("--generation-kwargs", str, None, "JSON keyword arguments for generate"),
        ("--sandbox-packages", str, None, "code: installed packages the candidate may import"),
    ):
        parser.add_argument(flag, type=kind, default=default, help=f"evaluation: {text}")
    parser.add_argument("--no-progress", action="store_true", help="evaluation: no progress bar")
    parser.add_argument(
        "--set",
        dest="settings",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=VALUE",
        help="recipe hyperparameters (by name: model, train_files, lr, ...), else framework settings "
        "(verl hydra overrides, TRL GRPOConfig fields); repeatable",
    )


def split_settings(settings: list[str]) -> tuple[list[str], list[str]]:
    """(recipe hyperparameter overrides, framework settings): by whether the name is an ``HParams``
    field.

    >>> split_settings(["lr=2e-6", "use_cpu=true", "trainer.nnodes=2"])
    (['lr=2e-6'], ['use_cpu=true', 'trainer.nnodes=2'])
    """
    from corrgrpo_tasks.recipes import HParams

    known = {f.name for f in dataclasses.fields(HParams)}
    recipe: list[str] = []
    framework: list[str] = []
    for item in settings:
        name, sep, _ = item.partition("=")
        if not sep:
            raise CliError(f"setting {item!r} is not name=value")
        (recipe if name.strip() in known else framework).append(item)
    return recipe, framework


def _evaluate_args(args: argparse.Namespace) -> list[str]:
    forwarded = []
    for name in (
        "limit",
        "max_new_tokens",
        "batch_size",
        "threads",
        "backend",
        "generation_kwargs",
        "sandbox_packages",
    ):
        value = getattr(args, name)
        if value is not None:
            forwarded += [f"--{name.replace('_', '-')}", str(value)]
    if args.generation_kwargs is not None:
        try:
            json.loads(args.generation_kwargs)
        except ValueError as exc:
            raise CliError(f"--generation-kwargs is not JSON: {exc}") from None
    return [*forwarded, *(["--no-progress"] if args.no_progress else [])]


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``corrgrpo pipeline`` from parsed arguments."""
    data = dict(args.data)
    folder = args.out or f"pipeline-{args.domain}-{args.framework}-{args.estimator}"
    overrides, extra = split_settings(list(args.settings))
    if not any(o.partition("=")[0].strip() == "output_dir" for o in overrides):
        overrides.append(f"output_dir={Path(folder) / 'checkpoints'}")
    try:
        pipeline = plan(
            args.domain,
            args.framework,
            out=folder,
            estimator=args.estimator,
            overrides=overrides,
            extra=extra,
            data=data,
            checkpoint=args.checkpoint,
            evaluate_args=_evaluate_args(args),
        )
    except (ValueError, FileNotFoundError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    if args.dry_run:
        out.write(pipeline.describe())
        return 0
    if not pipeline.benchmarks:
        raise CliError("no benchmark to evaluate: give --data BENCHMARK=PATH (see --dry-run)")
    train = pipeline.steps[0]
    if not train.skip and "missing:" in train.note:
        raise CliError(f"cannot launch yet; {train.note}")
    try:
        table = run_pipeline(pipeline, log=lambda line: print(line, file=sys.stderr, flush=True))
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    out.write(table.read_text(encoding="utf-8"))
    out.write(f"\nwritten: {table}\n")
    return 0


COMMAND = Command(
    "pipeline",
    "train with a recipe, convert the checkpoint, evaluate every benchmark, one table",
    add_arguments,
    run,
    description=_DESCRIPTION,
    raw_description=True,
)
