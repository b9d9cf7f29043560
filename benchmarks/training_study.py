"""The estimator studies of ``corrgrpo train``: run them in parts, merge, publish a small copy for the docs.

    python -m benchmarks.training_study commands --task scales --parts 4     # the shell lines to run
    python -m benchmarks.training_study publish MERGED docs/experiments/scales

The pre-registered study (docs/experiments.md, "The pre-registered study"; its design is
``corrgrpo_tasks.training.study``) has its own sub-commands, every one resumable:

    python -m benchmarks.training_study plan --root R          # every part, its cost and whether it is done
    python -m benchmarks.training_study part ID --root R       # run one part (one process, nice 10, 1 thread)
    python -m benchmarks.training_study choose-lr --root R     # the frozen lr per arm, from the tuning parts
    python -m benchmarks.training_study merge CONFIG --root R  # a configuration's test seeds as one run folder
    python -m benchmarks.training_study analyse --root R       # the pre-registered test, once parts are in
    python -m benchmarks.training_study step0 RUN... --out D   # c_q against alignment; zero sums vs entropy
    python -m benchmarks.training_study tests DOCS...          # published studies: t, sign-flip, Holm, MDE
    python -m benchmarks.training_study collect --root R --docs D  # finished seeds, slim, to commit

``commands`` prints one ``corrgrpo train`` per part (disjoint seed ranges, each in the background under
``nice -n 10``) and the ``--merge`` that joins them. ``publish`` copies a merged run's evals.csv and
run.json, writes steps.csv with only the columns the report and plots read (floats to 4 significant
digits: a few hundred kB instead of tens of MB), and redraws report.md and the plots from that copy,
so ``corrgrpo train --report-only --out DOCS`` reproduces the published report. See docs/experiments.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ESTIMATORS = "grpo,dr_grpo,corrgrpo,gdpo,gdpo_corr"
# steps.csv columns the report and the plots read (besides rewards/<component>/mean).
KEPT = (
    "task",
    "estimator",
    "seed",
    "step",
    "max_abs_advantage",
    "mean_abs_advantage",
    "reward_seconds",
    "reward_samples",
    "grad_norm",
    "entropy",
    "step_time",
    "frac_reward_zero_std",
    "completions/mean_length",
    "corrgrpo/c_q/mean",
    "corrgrpo/c_q/min",
    "corrgrpo/c_q/max",
    "corrgrpo/correlation_sum/mean",
    "corrgrpo/covariance_sum/mean",
    "corrgrpo/degenerate_groups",
    "corrgrpo/zero_signal_groups",
    "lr",
    "warm_seed",
)


def _round(value: Any) -> Any:
    return float(f"{value:.4g}") if isinstance(value, float) else value


def slim_steps(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's columns of ``rows`` (steps.csv records), floats to 4 significant digits.

    >>> slim_steps([{"step": 1, "loss": 0.5, "grad_norm": 1.234567, "rewards/a/mean": 0.1}])
    [{'step': 1, 'grad_norm': 1.235, 'rewards/a/mean': 0.1}]
    """
    return [
        {
            k: _round(v)
            for k, v in row.items()
            if k in KEPT or (k.startswith("rewards/") and k.endswith("/mean"))
        }
        for row in rows
    ]


def publish(run: Path, docs: Path) -> str:
    """Copy ``run`` (a ``corrgrpo train`` output folder) into ``docs`` slimmed; returns the report."""
    from corrgrpo_tasks.training import load_records, write_outputs

    records = load_records(run)
    records.steps = slim_steps(records.steps)
    docs.mkdir(parents=True, exist_ok=True)
    shutil.copy(run / "run.json", docs / "run.json")
    return write_outputs(records, docs)


#: What a study seed's published steps keep beyond the report's columns: the clipped share the
#: pre-registration reports per run, and the loss.
STUDY_KEPT = ("completions/clipped_ratio", "loss")


def collect(root: Path, docs: Path) -> list[Path]:
    """Copy every finished seed of the study parts under ``root`` that ``docs`` lacks, slim, into
    ``docs/parts/PART/seed-S``: run.json, evals.csv and the seed's provenance as they are, steps.csv
    with the report's columns and :data:`STUDY_KEPT` to 4 significant digits, gzip-compressed (about
    65 kB a seed), and the step-0 statistic of each arm from its rollouts (``step0.md`` and
    ``step0_steps.csv``; the rollouts themselves, 1.4 MB a seed compressed, stay behind). ``docs`` is
    then a study root the harness reads (``plan``, ``choose-lr``, ``analyse --root docs``). Returns
    the seed folders written."""
    import csv
    import gzip

    from corrgrpo_tasks.training import load_records, write_csv
    from corrgrpo_tasks.training import study as _study
    from corrgrpo_tasks.training.step0 import step0, summary

    written = []
    for part in _study.parts():
        for seed in part.seeds:
            run, copy = _study.seed_folder(root, part, seed), _study.seed_folder(docs, part, seed)
            if not _study.finished(run) or _study.finished(copy):
                continue
            copy.mkdir(parents=True, exist_ok=True)
            for name in ("run.json", "evals.csv"):
                shutil.copy(run / name, copy / name)
            provenance = run.parent / f"seed-{seed}.provenance.json"
            if provenance.is_file():
                shutil.copy(provenance, copy.parent / provenance.name)
            steps = load_records(run).steps
            kept = [
                {**slim, **{k: _round(row[k]) for k in STUDY_KEPT if k in row}}
                for row, slim in zip(steps, slim_steps(steps), strict=True)
            ]
            fields = list(dict.fromkeys(k for row in kept for k in row))
            with gzip.open(copy / "steps.csv.gz", "wt", newline="", compresslevel=9) as handle:
                writer = csv.DictWriter(handle, fieldnames=fields)
                writer.writeheader()
                writer.writerows(kept)
            if (run / "rollouts").is_dir():  # the step-0 statistic of every arm, from its rollouts
                groups, per_step = step0(run)
                write_csv(copy / "step0_steps.csv", [{k: _round(v) for k, v in r.items()} for r in per_step])
                (copy / "step0.md").write_text(summary(groups, per_step) + "\n")
            written.append(copy)
    return written


def commands(task: str, parts: int, seeds: int, out: str, extra: Sequence[str]) -> list[str]:
    """Shell lines for a study of ``seeds`` paired seeds split into ``parts`` background processes."""
    per = -(-seeds // parts)
    lines, folders = [], []
    for first in range(0, seeds, per):
        count = min(per, seeds - first)
        folder = f"{out}_s{first}"
        folders.append(folder)
        lines.append(
            f"nice -n 10 corrgrpo train --task {task} --estimators {ESTIMATORS} --seeds {count} "
            f"--first-seed {first} --out {folder} --no-progress {' '.join(extra)} > {folder}.log 2>&1 &".replace(
                "  ", " "
            )
        )
    lines += ["wait", f"corrgrpo train --merge {','.join(folders)} --out {out}"]
    return lines


STUDY_COMMANDS = ("plan", "part", "choose-lr", "merge", "analyse", "step0", "tests", "collect")


def _study_parsers(sub: Any) -> None:
    for name, text in (
        ("plan", "every part of the pre-registered study, its seeds done and its cost"),
        ("choose-lr", "freeze the lr per arm of every configuration whose tuning parts finished (lr.json)"),
        ("analyse", "the pre-registered test over the finished test seeds (corrgrpo - grpo AUC, Holm)"),
    ):
        sub.add_parser(name, help=text).add_argument("--root", type=Path, default=Path("study"))
    part = sub.add_parser("part", help="run one part's unfinished seeds, one process at a time, nice 10")
    part.add_argument("name")
    part.add_argument("--root", type=Path, default=Path("study"))
    part.add_argument("--dry-run", action="store_true", help="print the commands only")
    merge = sub.add_parser("merge", help="one configuration's finished test seeds as one run folder")
    merge.add_argument("config")
    merge.add_argument("--root", type=Path, default=Path("study"))
    merge.add_argument("--out", type=Path, default=None, help="[ROOT/merged/CONFIG]")
    tests = sub.add_parser("tests", help="paired t, sign-flip, Holm and MDEs of published study folders")
    tests.add_argument(
        "folders", nargs="+", type=Path, help="e.g. docs/experiments/scales docs/experiments/tool_calling"
    )
    gather = sub.add_parser("collect", help="copy finished seeds, slim, into a folder to commit")
    gather.add_argument("--root", type=Path, default=Path("study"))
    gather.add_argument("--docs", type=Path, default=Path("docs/experiments/study"))
    step0 = sub.add_parser("step0", help="c_q against alignment per group; degenerate groups against entropy")
    step0.add_argument("runs", nargs="+", type=Path, help="corrgrpo train folders with rollouts/")
    step0.add_argument("--out", type=Path, required=True, help="folder for groups.csv and steps.csv")


def _study_main(args: argparse.Namespace) -> int:
    from corrgrpo_tasks.training import study as _study

    if args.what == "plan":
        print("\n".join(_study.plan_lines(args.root)))
    elif args.what == "part":
        return _study.run_part(args.root, args.name, dry_run=args.dry_run)
    elif args.what == "choose-lr":
        print(json.dumps(_study.choose_lr(args.root), indent=1, sort_keys=True))
    elif args.what == "merge":
        out = args.out or args.root / "merged" / args.config
        _study.merge_config(args.root, args.config, out)
        print(out)
    elif args.what == "tests":
        print(_study.render_published(_study.published_tests(args.folders)))
    elif args.what == "collect":
        for folder in collect(args.root, args.docs):
            print(folder)
    elif args.what == "analyse":
        print(_study.render_analysis(_study.analyse(args.root)))
    else:
        print(_step0(args.runs, args.out))
    return 0


def _step0(runs: Sequence[Path], out: Path) -> str:
    from corrgrpo_tasks.training import write_csv
    from corrgrpo_tasks.training.step0 import step0, summary

    groups, steps = [], []
    for run in runs:
        g, s = step0(run)
        groups += g
        steps += s
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "groups.csv", [{k: _round(v) for k, v in r.items()} for r in groups])
    write_csv(out / "steps.csv", [{k: _round(v) for k, v in r.items()} for r in steps])
    return summary(groups, steps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training_study", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("commands", help="print the study's shell lines")
    c.add_argument("--task", default="scales", choices=("tool_calling", "code", "scales", "scales_mirror"))
    c.add_argument("--parts", type=int, default=4)
    c.add_argument("--seeds", type=int, default=8)
    c.add_argument("--out", default="study")
    c.add_argument("extra", nargs=argparse.REMAINDER, help="more corrgrpo train options")
    p = sub.add_parser("publish", help="copy a merged run into the docs, slimmed, and redraw its report")
    p.add_argument("run", type=Path)
    p.add_argument("docs", type=Path)
    _study_parsers(sub)
    args = parser.parse_args(argv)
    if args.what in STUDY_COMMANDS:
        try:
            return _study_main(args)
        except (FileNotFoundError, ValueError) as err:
            print(f"training_study: {err}", file=sys.stderr)
            return 2
    if args.what == "commands":
        extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra  # `-- --eval-size 512`
        print("\n".join(commands(args.task, args.parts, args.seeds, args.out, extra)))
        return 0
    try:
        report = publish(args.run, args.docs)
    except (FileNotFoundError, ValueError, json.JSONDecodeError) as err:
        print(f"training_study: {err}", file=sys.stderr)
        return 2
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
