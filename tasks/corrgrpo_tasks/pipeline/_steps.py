"""The pipeline's steps as plain data (:func:`plan`), how they run (:func:`run_pipeline`) and the table.

Nothing here imports a training framework: the steps are command lines run as their own processes, so
``--dry-run`` and the planning tests need none of verl, TRL or transformers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo_tasks.domains import FRAMEWORKS as _FRAMEWORKS
from corrgrpo_tasks.domains import get_domain, get_framework
from corrgrpo_tasks.evaluation._benchmarks import BENCHMARKS
from corrgrpo_tasks.evaluation._report import PAPER, model_size

VERL_TRACKER = "latest_checkpointed_iteration.txt"


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: a name, the command line and extra environment, and why it is skipped (if it is)."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    skip: str = ""
    note: str = ""

    def command(self) -> str:
        prefix = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join([*prefix, shlex.join(self.argv)])


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A resolved pipeline: where it writes, the trained checkpoint, the model evaluated, the steps."""

    domain: str
    framework: str
    estimator: str
    out: Path
    checkpoint_dir: Path
    model_dir: Path
    steps: tuple[Step, ...]
    benchmarks: tuple[str, ...]
    missing_data: tuple[str, ...]

    def describe(self) -> str:
        """What ``--dry-run`` prints: every step's command, skipped ones marked, then the table's path."""
        lines = [
            f"# pipeline: {self.domain} on {self.framework}, estimator {self.estimator}, into {self.out}"
        ]
        for n, step in enumerate(self.steps, start=1):
            lines.append(f"\n# step {n}: {step.name}" + (f" (skipped: {step.skip})" if step.skip else ""))
            if step.note:
                lines.append(f"# {step.note}")
            lines.append(step.command())
        for name in self.missing_data:
            lines.append(
                f"\n# not evaluated: {name} (no --data {name}=PATH; layout: {BENCHMARKS[name].layout})"
            )
        lines.append(f"\n# then: the table of every benchmark beside the paper's, {self.out / 'results.md'}")
        return "\n".join(lines) + "\n"


def latest_verl_actor(checkpoint_dir: str | Path) -> Path:
    """The actor folder of verl's latest checkpoint (its tracker file names the step).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / VERL_TRACKER).write_text("40")
    >>> latest_verl_actor(root).relative_to(root).as_posix()
    'global_step_40/actor'
    """
    root = Path(checkpoint_dir)
    tracker = root / VERL_TRACKER
    if not tracker.is_file():
        raise FileNotFoundError(f"{tracker} is missing: verl saved no checkpoint (trainer.save_freq > 0?)")
    step = tracker.read_text(encoding="utf-8").strip()
    if not step.isdigit():
        raise ValueError(f"{tracker}: expected a step number, got {step[:40]!r}")
    return root / f"global_step_{int(step)}" / "actor"


def _marker(out: Path, name: str) -> Path:
    return out / "steps" / f"{name}.done"


def _verl_convert(python: str, checkpoint_dir: Path, model_dir: Path, skip: str) -> Step:
    """verl's merger on the FSDP shards of the latest step (known once training has run)."""
    actor = checkpoint_dir / "global_step_<latest>" / "actor"
    if (checkpoint_dir / VERL_TRACKER).is_file():
        actor = latest_verl_actor(checkpoint_dir)
    argv = (python, "-m", "verl.model_merger", "merge", "--backend", "fsdp")
    return Step(
        "convert",
        (*argv, "--local_dir", str(actor), "--target_dir", str(model_dir)),
        skip=skip,
        note=f"verl's merger: the FSDP shards of the latest step ({VERL_TRACKER}) to a Hugging Face "
        "folder (bfloat16)",
    )


# What a framework's checkpoint needs before ``corrgrpo evaluate`` loads it (``FrameworkSpec.checkpoint``):
# nothing (a Hugging Face folder), or a conversion step into ``OUT/hf_model``.
CONVERTERS: dict[str, Callable[[str, Path, Path, str], Step] | None] = {
    "huggingface": None,
    "verl_fsdp": _verl_convert,
}
FRAMEWORKS: tuple[str, ...] = tuple(f.name for f in _FRAMEWORKS.values() if f.checkpoint in CONVERTERS)


def _skip(checkpoint: str | None, root: Path, name: str) -> str:
    if checkpoint is not None:
        return "--checkpoint given"
    return "done" if _marker(root, name).is_file() else ""


def _evaluate_step(
    python: str, domain: str, name: str, model_dir: Path, data: str, out: Path, evaluate_args: Sequence[str]
) -> Step:
    argv = (python, "-m", "corrgrpo_core.cli", "evaluate", domain, "--benchmark", name)
    return Step(
        f"evaluate {name}",
        (*argv, "--model", str(model_dir), "--data", str(data), "--out", str(out), *evaluate_args),
        note="resumes its run folder",
    )


def plan(
    domain: str,
    framework: str,
    *,
    out: str | Path,
    estimator: str = "corrgrpo",
    overrides: Sequence[str] = (),
    extra: Sequence[str] = (),
    data: Mapping[str, str] | None = None,
    checkpoint: str | None = None,
    evaluate_args: Sequence[str] = (),
    python: str = sys.executable,
) -> Pipeline:
    """Resolve every step of the pipeline (pure: nothing runs, nothing is imported).

    ``data`` maps benchmark names of the domain to their local data; benchmarks without data are listed
    as not evaluated. ``checkpoint`` skips training and conversion and evaluates that Hugging Face folder.
    ``evaluate_args`` are passed to every ``corrgrpo evaluate`` (e.g. ``--max-new-tokens 512``).
    """
    from corrgrpo_tasks.recipes import build_recipe

    spec = get_domain(domain)
    kind = get_framework(framework).checkpoint
    if kind not in CONVERTERS:
        raise ValueError(f"the pipeline runs on {' or '.join(FRAMEWORKS)}, not {framework!r}")
    data = dict(data or {})
    ours = list(spec.benchmarks)
    unknown = sorted(set(data) - set(ours))
    if unknown:
        raise ValueError(
            f"--data {unknown[0]}: not a {spec.name} benchmark; the domain has {', '.join(ours)}"
        )
    root = Path(out)
    recipe = build_recipe(spec.name, framework, estimator=estimator, overrides=overrides, extra=extra)
    checkpoint_dir = Path(recipe.checkpoint_dir)
    convert = CONVERTERS[kind]
    model_dir = (
        Path(checkpoint) if checkpoint is not None else root / "hf_model" if convert else checkpoint_dir
    )
    steps = [
        Step(
            "train",
            tuple(recipe.argv),
            dict(recipe.env),
            skip=_skip(checkpoint, root, "train"),
            note="; ".join([*recipe.notes, *(f"missing: {m}" for m in recipe.missing)]),
        )
    ]
    if convert is not None:
        steps.append(convert(python, checkpoint_dir, model_dir, _skip(checkpoint, root, "convert")))
    steps += [
        _evaluate_step(python, spec.name, name, model_dir, data[name], root / "eval" / name, evaluate_args)
        for name in ours
        if name in data
    ]
    return Pipeline(
        spec.name,
        framework,
        estimator,
        root,
        checkpoint_dir,
        model_dir,
        tuple(steps),
        tuple(n for n in ours if n in data),
        tuple(n for n in ours if n not in data),
    )


def _headline_rows(name: str, metrics: Mapping[str, Any]) -> list[tuple[str, Any]]:
    bench = BENCHMARKS[name]
    keys = [bench.headline] + [k for k, _ in bench.metrics[:3] if k != bench.headline]
    return [(k, metrics.get(k)) for k in keys if k in metrics]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "-" if value is None else str(value)


def render_table(pipeline: Pipeline) -> str:
    """Every evaluated benchmark's main metrics for this run, then the paper's rows for the same
    benchmarks (labelled with the paper's model and size)."""
    lines = [
        f"# {pipeline.domain}: {pipeline.framework} / {pipeline.estimator}, model `{pipeline.model_dir}`",
        "",
        "| benchmark | metric | this run | cases scored |",
        "|---|---|---|---|",
    ]
    paper = []
    for name in pipeline.benchmarks:
        file = pipeline.out / "eval" / name / "metrics.json"
        payload = json.loads(file.read_text(encoding="utf-8"))
        config = payload["config"]
        scored = f"{config.get('n_selected')} of {config.get('n_total')}"
        for key, value in _headline_rows(name, payload["metrics"]):
            lines.append(f"| {name} | {key} | {_cell(value)} | {scored} |")
        paper += [(name, *row) for row in PAPER[name]]
    if paper:
        lines += [
            "",
            "The paper's numbers (percent), for the paper's own models, not this run's:",
            "",
            "| benchmark | paper's model (size) | metric | GRPO | CorrGRPO |",
            "|---|---|---|---|---|",
            *(
                f"| {b} | {m} ({model_size(m)}) | {metric} | {_cell(g)} | {_cell(c)} |"
                for b, m, metric, g, c in paper
            ),
        ]
    return "\n".join(lines) + "\n"


def run_pipeline(
    pipeline: Pipeline,
    *,
    runner: Callable[[Step], int] | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Run the steps not skipped, in order, marking each finished one; write and return ``results.md``.

    A step that fails raises ``RuntimeError`` naming it and its exit status; rerunning resumes.
    """
    run = runner or _subprocess
    pipeline.out.mkdir(parents=True, exist_ok=True)
    for step in pipeline.steps:
        if step.skip:
            log(f"step {step.name}: skipped ({step.skip})")
            continue
        if step.name == "convert":  # the step number is known only once training has finished
            actor = latest_verl_actor(pipeline.checkpoint_dir)
            argv = list(step.argv)
            argv[argv.index("--local_dir") + 1] = str(actor)
            step = dataclasses.replace(step, argv=tuple(argv))
        log(f"step {step.name}: {step.command()}")
        status = run(step)
        if status != 0:
            raise RuntimeError(
                f"step {step.name!r} failed with exit status {status}; rerun the same command to resume"
            )
        if not step.name.startswith("evaluate"):
            marker = _marker(pipeline.out, step.name)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(step.command() + "\n", encoding="utf-8")
    table = pipeline.out / "results.md"
    table.write_text(render_table(pipeline), encoding="utf-8")
    return table


def _subprocess(step: Step) -> int:
    return subprocess.call(list(step.argv), env={**os.environ, **step.env})
