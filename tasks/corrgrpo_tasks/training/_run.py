"""One ``corrgrpo train`` run: warm start (cached), then per estimator and seed a TRL GRPO run through
``corrgrpo_adapters.trl.CorrGRPOTrainer`` with the task's real reward, evaluated on held-out prompts.

Nothing here trains by itself: supervised warm start is TRL's ``SFTTrainer``, RL is TRL's
``GRPOTrainer`` (our adapter only swaps the advantages). A ``TrainerCallback`` records TRL's logged
metrics, the largest |advantage| of every step, and greedy held-out scores every ``eval_every`` steps.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ._examples import Example, completion_text
from ._records import RunRecords, load_csv, write_csv
from ._tasks import TOOL_WARM_NORMALISE, Task, get_task

__all__ = [
    "ARMS",
    "RunRecords",
    "TrainConfig",
    "completion_budget",
    "evaluate_policy",
    "load_records",
    "merge_records",
    "run_training",
    "task_defaults",
    "with_shots",
    "with_system_turn",
    "write_csv",
    "write_run_file",
]

# Per-task defaults of the documented default runs (the TrainConfig defaults are the tool-calling ones).
_TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "tool_calling": {},
    "code": {  # part 3 of docs/experiments.md
        "steps": 20,
        "eval_every": 5,
        "n_eval": 64,
        "n_train": 1000,
        "hidden_size": 128,
        "layers": 4,
        "warm_steps": 200,
        "lr": 1e-4,
        "prompts_per_step": 4,
        "temperature": 0.7,
    },
    "scales": {
        "n_train": 2000,
        "hidden_size": 64,
        "layers": 2,
        "warm_steps": 350,
        "warm_lr": 2e-3,
        "steps": 250,
        "eval_every": 25,
        "n_eval": 512,
        "prompts_per_step": 8,
        "lr": 2e-4,
        "temperature": 1.0,
    },
}


_TASK_DEFAULTS["scales_mirror"] = _TASK_DEFAULTS["scales"]

# Study arms that are an estimator with options (docs/experiments.md, the pre-registered study): the arm's
# name is what evals.csv and the report call it; any other name is an estimator with its defaults.
ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    # CorrGRPO with the correlation sum floored at 1, one independent component's worth (docs/method.md)
    "corrgrpo_floor1": ("corrgrpo", {"advantage_min_correlation_sum": 1.0}),
    # GRPO's group mean over one standard deviation of the whole batch (TRL's scale_rewards="batch")
    "grpo_batch_std": ("grpo", {"scale_rewards": "batch"}),
}


def arm_estimator(arm: str) -> str:
    """The core estimator an arm (or plain estimator name) runs."""
    return ARMS.get(arm, (arm, {}))[0]


def task_defaults(task: str) -> dict[str, Any]:
    """TrainConfig fields that differ from the defaults for ``task`` (a new dict)."""
    if task not in _TASK_DEFAULTS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(_TASK_DEFAULTS)}")
    return dict(_TASK_DEFAULTS[task])


@dataclass(frozen=True)
class TrainConfig:
    """Everything one ``corrgrpo train`` invocation does; the defaults are the documented default run."""

    task: str = "tool_calling"
    estimators: tuple[str, ...] = ("grpo", "corrgrpo")
    seeds: int = 1
    first_seed: int = 0
    steps: int = 150
    eval_every: int = 25
    n_eval: int = 256
    n_train: int = 20000
    model: str | None = None
    hidden_size: int = 128
    layers: int = 2
    warm_steps: int = 800
    warm_lr: float = 1e-3
    warm_batch: int = 32
    lr: float = 2e-4
    prompts_per_step: int = 8
    num_generations: int = 8
    max_completion_length: int | None = None  # None: see completion_budget
    temperature: float = 1.0
    loss_type: str = "dapo"
    min_correlation_sum: float | None = None
    system_prompt: str | None = None  # None: the task's (its output format); "": no system turn
    micro_batch: int | None = None  # completions per forward/backward pass (None: the whole step)
    gradient_checkpointing: bool = False  # RL backward passes recompute activations: less memory
    shots: int = 0  # worked exchanges (request, right answer) before every prompt's request
    data_seed: int = 0
    threads: int = 1
    cache_dir: str | None = None
    profile: str = "paper"  # the reward's definition: "paper" or "hardened"
    # tool calling: share of the rephrased values the warm start's demonstrations normalise (None: 0.15)
    warm_normalise: float | None = None
    # the warm start's own seed (initialisation and SFT order; None: data_seed): an independent warm start
    # on the same data
    warm_seed: int | None = None
    # per-arm learning rates, (arm, lr) pairs; arms not named use ``lr``
    arm_lr: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        for name in (
            "seeds",
            "steps",
            "eval_every",
            "n_eval",
            "n_train",
            "hidden_size",
            "layers",
            "warm_batch",
            "prompts_per_step",
            "threads",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warm_steps < 0:
            raise ValueError(f"warm_steps must be >= 0, got {self.warm_steps}")
        if not 0 <= self.shots < self.n_train:
            raise ValueError(f"shots must be >= 0 and fewer than the training prompts, got {self.shots}")
        if self.num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 (a group needs two samples), got {self.num_generations}"
            )
        if not self.estimators:
            raise ValueError("give at least one estimator")
        if not (self.lr > 0 and self.warm_lr > 0 and self.temperature > 0):
            raise ValueError("learning rates and temperature must be positive")
        for arm, lr in self.arm_lr:
            if arm not in self.estimators or not lr > 0:
                raise ValueError(f"arm_lr: {arm}={lr} names no arm of this run or is not a positive lr")
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ValueError(f"max_completion_length must be >= 1, got {self.max_completion_length}")
        self.make_task()  # an unknown task or profile, or normalise where it does not apply
        total = self.prompts_per_step * self.num_generations
        if self.micro_batch is not None and (self.micro_batch < 1 or total % self.micro_batch):
            raise ValueError(
                f"micro_batch must divide the step's {total} completions "
                f"(prompts_per_step x num_generations), got {self.micro_batch}"
            )

    def lr_for(self, arm: str) -> float:
        """The learning rate of ``arm``: its ``arm_lr`` entry, else ``lr``."""
        return dict(self.arm_lr).get(arm, self.lr)

    def system(self, task: Task) -> str:
        """The system turn every prompt starts with ("" for none)."""
        return task.system_prompt if self.system_prompt is None else self.system_prompt

    def warm_spec(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "model": self.model,
            "hidden_size": self.hidden_size,
            "layers": self.layers,
            "warm_steps": self.warm_steps,
            "warm_lr": self.warm_lr,
            "warm_batch": self.warm_batch,
            "n_train": self.n_train,
            "n_eval": self.n_eval,
            "seed": self.data_seed if self.warm_seed is None else self.warm_seed,
            "system_prompt": self.system_prompt,
            "max_completion_length": self.max_completion_length,
            **({"warm_normalise": self.normalise} if self.task == "tool_calling" else {}),
            **({"profile": self.profile} if self.profile != "paper" else {}),  # the record's scores
        }

    @property
    def normalise(self) -> float | None:
        """The tool-calling demonstrations' normalised share (None for the other tasks)."""
        if self.task != "tool_calling":
            return self.warm_normalise
        return TOOL_WARM_NORMALISE if self.warm_normalise is None else self.warm_normalise

    def make_task(self) -> Task:
        return get_task(self.task, profile=self.profile, normalise=self.warm_normalise)


def with_system_turn(examples: Sequence[Example], system: str) -> list[Example]:
    """``examples`` with ``system`` as a first system turn of each prompt (unchanged for "")."""
    if not system:
        return list(examples)
    turn = {"role": "system", "content": system}
    return [replace(e, prompt=[turn, *e.prompt]) for e in examples]


def with_shots(examples: Sequence[Example], shots: Sequence[Example]) -> list[Example]:
    """``examples`` whose prompts start with ``shots`` as worked exchanges: each shot's request and
    its right answer (``ground_truth``) as a user and an assistant turn."""
    turns = [
        turn for shot in shots for turn in (*shot.prompt, {"role": "assistant", "content": shot.ground_truth})
    ]
    return [replace(e, prompt=[*turns, *e.prompt]) for e in examples]


def completion_budget(
    tokenizer: Any, completions: Sequence[str], *, factor: int = 1, margin: int = 16
) -> int:
    """Tokens a completion may take: ``factor`` times the longest of ``completions`` in ``tokenizer``,
    plus ``margin`` (the end of turn and some slack). The tiny model writes the target's layout and
    nothing else (factor 1); a pretrained checkpoint gets room for a preamble or reasoning (factor 2).

    >>> from corrgrpo_tasks.training._tokenizer import byte_chat_tokenizer
    >>> completion_budget(byte_chat_tokenizer("", pieces=["abc"]), ["abc", "xy"])
    18
    """
    lengths = tokenizer(list(completions), add_special_tokens=False)["input_ids"]
    return factor * max(len(ids) for ids in lengths) + margin


def _chat_texts(tokenizer: Any, prompts: Sequence[Sequence[dict[str, str]]]) -> list[str]:
    return [
        tokenizer.apply_chat_template(list(p), tokenize=False, add_generation_prompt=True) for p in prompts
    ]


def evaluate_policy(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Any],
    task: Task,
    *,
    max_new_tokens: int,
    batch_size: int = 64,
) -> tuple[dict[str, float], list[str]]:
    """Greedy completions for the held-out ``examples``, scored by the task's reward; mean of each
    component, of the success metric and of the extras, plus the completions themselves."""
    import torch

    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    completions: list[str] = []
    try:
        with torch.no_grad():
            for start in range(0, len(examples), batch_size):
                chunk = examples[start : start + batch_size]
                enc = tokenizer(
                    _chat_texts(tokenizer, [e.prompt for e in chunk]),
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,
                )
                out = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
                completions += tokenizer.batch_decode(
                    out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True
                )
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    rows = task.score(completions, [e.ground_truth for e in examples])
    keys = (*task.components, task.success, *task.extra_metrics)
    return {k: sum(r[k] for r in rows) / len(rows) for k in keys}, completions


class RewardMeter:
    """Wraps a task's TRL reward functions: wall time spent scoring and samples scored (the first
    function does the scoring; the others share its cache), every rollout's components (``rollouts``:
    one row per completion with ``step`` and ``group``, what ``corrgrpo explain`` reads), and the scored
    rows when ``keep``."""

    def __init__(
        self, functions: Sequence[Callable[..., list[Any]]], *, group_size: int, keep: bool = False
    ) -> None:
        self.seconds = 0.0
        self.samples = 0
        self.step = 1
        self.group_size = group_size
        self.rollouts: list[dict[str, Any]] = []
        self.kept: list[tuple[str, str, dict[str, float]]] = []
        self.functions = [self._wrap(fn, first=i == 0, keep=keep) for i, fn in enumerate(functions)]

    def _wrap(self, fn: Callable[..., list[Any]], *, first: bool, keep: bool) -> Callable[..., list[Any]]:
        def timed(*args: Any, **kwargs: Any) -> list[Any]:
            start = time.perf_counter()
            values = fn(*args, **kwargs)
            self.seconds += time.perf_counter() - start
            if first:  # TRL calls synchronous reward functions one after another, in order
                self.samples += len(values)
                # TRL lays a generation batch out as consecutive groups of num_generations completions.
                batch = len(self.rollouts)
                self.rollouts += [
                    {"step": self.step, "group": f"{self.step}-{(batch + i) // self.group_size}"}
                    for i in range(len(values))
                ]
            for row, value in zip(self.rollouts[len(self.rollouts) - len(values) :], values, strict=True):
                row[fn.__name__] = value
            if keep:
                if first:
                    truths = kwargs["ground_truth"]
                    self.kept += [
                        (completion_text(c), str(t), {})
                        for c, t in zip(kwargs["completions"], truths, strict=True)
                    ]
                for kept, value in zip(self.kept[len(self.kept) - len(values) :], values, strict=True):
                    kept[2][fn.__name__] = value
            return values

        timed.__name__ = timed.__qualname__ = fn.__name__
        return timed


def _callback_class() -> type:
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):  # type: ignore[misc,unused-ignore]  # Any where transformers is absent
        """Forwards the trainer's step ends and logs to a ``_RunState``."""

        def __init__(self, state: _RunState) -> None:
            self.state = state

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs:
                self.state.on_log(int(state.global_step), dict(logs))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.state.at_step(int(state.global_step))

    return Recorder


def _grpo_args(cfg: TrainConfig, task: Task, arm: str, seed: int, out: Path, max_len: int) -> Any:
    from corrgrpo_adapters.trl import CorrGRPOConfig

    from ._model import checkpointing_option

    estimator, kwargs = arm_estimator(arm), dict(ARMS.get(arm, (arm, {}))[1])
    total = cfg.prompts_per_step * cfg.num_generations
    micro = cfg.micro_batch or total
    if cfg.min_correlation_sum is not None and estimator in ("corrgrpo", "gdpo_corr", "dara"):
        kwargs.setdefault("advantage_min_correlation_sum", cfg.min_correlation_sum)
    kwargs.update(checkpointing_option(cfg.gradient_checkpointing))
    return CorrGRPOConfig(
        output_dir=str(out),
        advantage_estimator=estimator,
        max_steps=cfg.steps,
        learning_rate=cfg.lr_for(arm),
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        beta=0.0,
        loss_type=cfg.loss_type,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=total // micro,  # one optimiser step per generation batch
        num_generations=cfg.num_generations,
        max_completion_length=max_len,
        temperature=cfg.temperature,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=seed,
        data_seed=seed,
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
        reward_weights=list(task.weights),
        **kwargs,
    )


@dataclass(frozen=True)
class _Context:
    cfg: TrainConfig
    task: Task
    checkpoint: Path
    held: Sequence[Any]
    warm_scores: dict[str, float]
    records: RunRecords
    out: Path
    rl_rows: Any
    max_len: int
    on_step: Callable[[], None]
    evaluate: Callable[[Any, Any], dict[str, float]]
    log: Callable[[str], None]


class _RunState:
    """One estimator x seed run: turns the trainer's step and log events into records."""

    def __init__(self, ctx: _Context, estimator: str, seed: int, tokenizer: Any) -> None:
        self.ctx, self.tokenizer = ctx, tokenizer
        self.base: dict[str, Any] = {"task": ctx.cfg.task, "estimator": estimator, "seed": seed}
        if ctx.cfg.arm_lr or ctx.cfg.warm_seed is not None:  # the study's runs say their lr and warm start
            self.base.update(lr=ctx.cfg.lr_for(estimator), warm_seed=ctx.cfg.warm_spec()["seed"])
        self.meter = RewardMeter(
            ctx.task.reward_funcs(), group_size=ctx.cfg.num_generations, keep=ctx.task.audit is not None
        )
        self.trainer: Any = None
        self.start = time.monotonic()
        self.scored = (0.0, 0)
        ctx.records.evals.append(
            {**self.base, "step": 0, "n_eval": len(ctx.held), **ctx.warm_scores, "wall_s": 0.0}
        )

    def at_step(self, step: int) -> None:
        ctx = self.ctx
        finite = [abs(a) for a in self.trainer._logs["advantages"] if math.isfinite(a)]
        seconds, samples = self.meter.seconds - self.scored[0], self.meter.samples - self.scored[1]
        self.scored = (self.meter.seconds, self.meter.samples)
        self.meter.step = step + 1
        ctx.records.steps.append(
            {
                **self.base,
                "step": step,
                "max_abs_advantage": max(finite, default=0.0),
                "mean_abs_advantage": sum(finite) / max(len(finite), 1),
                "reward_seconds": seconds,
                "reward_samples": samples,
            }
        )
        if step % ctx.cfg.eval_every == 0 or step == ctx.cfg.steps:
            scores = ctx.evaluate(self.trainer.model, self.tokenizer)
            ctx.records.evals.append(
                {
                    **self.base,
                    "step": step,
                    "n_eval": len(ctx.held),
                    **scores,
                    "wall_s": round(time.monotonic() - self.start, 2),
                }
            )
            ctx.log(
                f"{self.base['estimator']} seed {self.base['seed']} step {step}: "
                + ", ".join(f"{k} {scores[k]:.3f}" for k in (ctx.task.success, *ctx.task.components))
            )
        ctx.on_step()

    def on_log(self, step: int, logs: dict[str, Any]) -> None:
        if step == 0 or "train_runtime" in logs:
            return
        keep = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}
        steps = self.ctx.records.steps
        if steps and steps[-1]["step"] == step and all(steps[-1][k] == v for k, v in self.base.items()):
            steps[-1].update(keep)
        else:
            steps.append({**self.base, "step": step, **keep})


def _train_one(ctx: _Context, estimator: str, seed: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corrgrpo_adapters.trl import CorrGRPOTrainer

    from ._model import quiet_trainer

    tokenizer = AutoTokenizer.from_pretrained(ctx.checkpoint)
    model = AutoModelForCausalLM.from_pretrained(ctx.checkpoint, dtype=torch.float32)
    state = _RunState(ctx, estimator, seed, tokenizer)
    with tempfile.TemporaryDirectory(prefix="corrgrpo-trl-") as scratch:  # TRL's output_dir; nothing is saved
        state.trainer = CorrGRPOTrainer(
            model=model,
            reward_funcs=state.meter.functions,
            processing_class=tokenizer,
            args=_grpo_args(ctx.cfg, ctx.task, estimator, seed, Path(scratch), ctx.max_len),
            train_dataset=ctx.rl_rows,
            callbacks=[_callback_class()(state)],
        )
        quiet_trainer(state.trainer)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # transformers 5's checkpointing renames
            state.trainer.train()
    write_rollouts(ctx.out, estimator, seed, state.meter.rollouts, ctx.task.weights)
    if ctx.task.audit is not None:
        ctx.records.audits.append({**state.base, **ctx.task.audit(state.meter.kept)})


def write_rollouts(
    out: Path, estimator: str, seed: int, rows: Sequence[dict[str, Any]], weights: Sequence[float]
) -> Path:
    """``rollouts/ESTIMATOR-seedS.csv``: one row per RL completion (step, group, each reward component,
    ``score`` their weighted sum), the layout ``corrgrpo explain`` reads as a run."""
    folder = out / "rollouts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{estimator}-seed{seed}.csv"
    scored = []
    for row in rows:
        values = [v for k, v in row.items() if k not in ("step", "group")]
        total = (
            sum(w * float(v) for w, v in zip(weights, values, strict=False)) if None not in values else None
        )
        scored.append({**row, "score": total})
    write_csv(path, scored)
    return path


def run_training(
    cfg: TrainConfig,
    out: str | Path,
    *,
    on_step: Callable[[], None] = lambda: None,
    log: Callable[[str], None] = print,
) -> RunRecords:
    """Warm start (cached) and every estimator x seed RL run of ``cfg``; see the module docstring.

    The held-out evaluation at step 0 is the warm-started policy itself, the same for every run.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with _quiet_libraries(cfg.threads):
        return _run_all(cfg, Path(out), on_step, log)


@contextlib.contextmanager
def _quiet_libraries(threads: int) -> Iterator[None]:
    """No library progress bars or info logs, ``threads`` torch threads; all restored afterwards."""
    import datasets
    import torch
    from transformers.utils import logging as hf_logging

    saved = (
        hf_logging.get_verbosity(),
        hf_logging.is_progress_bar_enabled(),  # type: ignore[no-untyped-call,unused-ignore]
        datasets.is_progress_bar_enabled(),
        torch.get_num_threads(),
    )
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call,unused-ignore]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call,unused-ignore]
    datasets.disable_progress_bars()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        hf_logging.set_verbosity(saved[0])
        if saved[1]:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call,unused-ignore]
        if saved[2]:
            datasets.enable_progress_bars()
        torch.set_num_threads(saved[3])


def _run_all(
    cfg: TrainConfig, out: Path, on_step: Callable[[], None], log: Callable[[str], None]
) -> RunRecords:
    import datasets

    from ._model import base_tokenizer, default_cache_dir, warm_start

    start = time.monotonic()
    task = cfg.make_task()
    train, held = task.make_examples(cfg.n_train, cfg.n_eval, cfg.data_seed)
    system = cfg.system(task)
    # Worked exchanges come from the training set and leave it: no prompt is its own example.
    shots, train = train[: cfg.shots], train[cfg.shots :]
    train, held = with_shots(train, shots), with_shots(held, shots)
    train, held = with_system_turn(train, system), with_system_turn(held, system)
    # The tiny tokenizer holds the system prompt as one whole token: it costs one position, not hundreds.
    pieces = [*task.pieces(), *([system] if system and cfg.model is None else [])]
    max_len = cfg.max_completion_length or completion_budget(
        base_tokenizer(cfg.model, pieces), [e.completion for e in train], factor=1 if cfg.model is None else 2
    )
    records = RunRecords(
        config={
            **asdict(cfg),
            "max_completion_length": max_len,
            "system_prompt": system,
            "warm_normalise": cfg.normalise,
        }
    )
    out.mkdir(parents=True, exist_ok=True)

    def evaluate(model: Any, tokenizer: Any) -> dict[str, float]:
        return evaluate_policy(model, tokenizer, held, task, max_new_tokens=max_len)[0]

    sft_rows = [
        {"prompt": e.prompt, "completion": [{"role": "assistant", "content": e.completion}]} for e in train
    ]
    # The data's own fingerprint in the cache key: a changed generator never reuses a stale warm start.
    data = [sft_rows, pieces, [(e.prompt, e.ground_truth) for e in held]]
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    checkpoint, records.warm = warm_start(
        {**cfg.warm_spec(), "data": digest},
        sft_rows,
        pieces=pieces,
        cache_dir=Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir(),
        evaluate=evaluate,
        log=log,
    )
    warm_scores = records.warm["held_out"]
    log("warm start held-out: " + ", ".join(f"{k} {v:.3f}" for k, v in warm_scores.items()))
    write_run_file(out, records)
    rl_rows = datasets.Dataset.from_list(
        [{"prompt": e.prompt, "ground_truth": e.ground_truth} for e in train]
    )
    context = _Context(
        cfg, task, checkpoint, held, warm_scores, records, out, rl_rows, max_len, on_step, evaluate, log
    )
    # Seeds outermost: an interrupted study still has every estimator on the seeds it finished (paired).
    for seed in range(cfg.first_seed, cfg.first_seed + cfg.seeds):
        for estimator in cfg.estimators:
            run_start = time.monotonic()
            _train_one(context, estimator, seed)
            final = records.evals[-1]
            log(
                f"{estimator} seed {seed}: {task.success} {warm_scores[task.success]:.3f} -> "
                f"{final[task.success]:.3f} in {time.monotonic() - run_start:.0f} s"
            )
            write_csv(out / "evals.csv", records.evals)  # after every run, so a long study can be read early
            write_csv(out / "steps.csv", records.steps)
            write_run_file(out, records)
    records.wall_seconds = time.monotonic() - start
    write_run_file(out, records)
    return records


def write_run_file(out: Path, records: RunRecords) -> None:
    """run.json: the configuration, the warm-start record, and (once done) the wall time."""

    data = {
        "config": records.config,
        "warm": records.warm,
        "wall_seconds": records.wall_seconds,
        "audits": records.audits,
    }
    (out / "run.json").write_text(json.dumps(data, indent=1, default=str))


def merge_records(parts: Sequence[RunRecords]) -> RunRecords:
    """One record set from runs of the same configuration over different seeds (e.g. a study split
    over processes with ``--first-seed``): rows of seeds on which every estimator finished, sorted by
    seed, estimator and step; the first part's configuration and warm start."""
    if not parts:
        raise ValueError("nothing to merge")
    estimators = list(parts[0].config["estimators"])
    finished: dict[int, set[str]] = {}
    for part in parts:
        for row in part.evals:
            finished.setdefault(int(row["seed"]), set()).add(str(row["estimator"]))
    seeds = sorted(s for s, done in finished.items() if done >= set(estimators))

    def rows(kind: str) -> list[dict[str, Any]]:
        unique = {
            (int(r["seed"]), str(r["estimator"]), int(r["step"])): r
            for p in parts
            for r in getattr(p, kind)
            if int(r["seed"]) in seeds and str(r["estimator"]) in estimators
        }
        return [dict(unique[k]) for k in sorted(unique, key=lambda k: (k[0], estimators.index(k[1]), k[2]))]

    config = {**parts[0].config, "seeds": len(seeds), "first_seed": seeds[0] if seeds else 0}
    return RunRecords(
        evals=rows("evals"),
        steps=rows("steps"),
        warm=parts[0].warm,
        config=config,
        wall_seconds=sum(p.wall_seconds for p in parts),
        audits=[a for p in parts for a in p.audits if int(a["seed"]) in seeds],
    )


def load_records(folder: str | Path) -> RunRecords:
    """The records of a (possibly still running or interrupted) ``corrgrpo train --out`` folder."""
    folder = Path(folder)
    if not (folder / "run.json").is_file():
        raise FileNotFoundError(f"{folder} holds no run.json: not a corrgrpo train output folder")
    data = json.loads((folder / "run.json").read_text())
    evals = load_csv(folder / "evals.csv") if (folder / "evals.csv").is_file() else []
    if not evals:
        raise ValueError(f"{folder} has no finished run yet (no rows in evals.csv)")
    steps = folder / "steps.csv"
    if not steps.is_file() and (folder / "steps.csv.gz").is_file():  # a published copy (study parts)
        steps = folder / "steps.csv.gz"
    return RunRecords(
        evals=evals,
        steps=load_csv(steps),
        warm=data["warm"],
        config=data["config"],
        wall_seconds=float(data.get("wall_seconds") or 0.0),
        audits=data.get("audits") or [],
    )
