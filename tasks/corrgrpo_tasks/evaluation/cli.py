"""``corrgrpo evaluate DOMAIN --model PATH --benchmark NAME --data PATH``: arguments and the run.

Registered on the ``corrgrpo`` command through the ``corrgrpo.commands`` entry point (``COMMAND``);
everything heavy (transformers, agentdojo, the sandbox) is imported only when a run starts.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from corrgrpo_core.cli.plugin import CliError, Command

from ._benchmarks import BENCHMARKS, DOMAINS, RunContext
from ._report import render_markdown, write_report

__all__ = ["COMMAND", "add_arguments", "evaluate", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``evaluate`` subcommand's options."""
    names = ", ".join(f"{b.name} ({b.domain})" for b in BENCHMARKS.values())
    parser.add_argument("domain", choices=DOMAINS, help="task domain of the benchmark")
    parser.add_argument(
        "--model", required=True, metavar="PATH", help="local checkpoint folder (nothing is downloaded)"
    )
    parser.add_argument("--benchmark", required=True, choices=list(BENCHMARKS), metavar="NAME", help=names)
    parser.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="the benchmark's local data (file or folder; docs/tasks.md lists each layout)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, metavar="N", help="evaluate the first N cases [all]"
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="folder for metrics.json, results.md and records.jsonl [eval-BENCHMARK]",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "transformers", "vllm"),
        default="auto",
        help="generation backend; auto = vLLM when installed and a GPU is visible [auto]",
    )
    parser.add_argument(
        "--device", default=None, help="torch device for transformers [cuda if available, else cpu]"
    )
    parser.add_argument("--max-new-tokens", type=int, default=512, help="tokens per generation [512]")
    parser.add_argument("--batch-size", type=int, default=8, help="conversations per generate call [8]")
    parser.add_argument(
        "--generation-kwargs",
        default=None,
        metavar="JSON",
        help="extra keyword arguments for generate / SamplingParams, as a JSON object",
    )
    parser.add_argument("--timing-rounds", type=int, default=8, help="code: Efficiency timing rounds [8]")
    parser.add_argument("--timeout", type=float, default=10.0, help="code: seconds per program [10]")
    parser.add_argument(
        "--setting", choices=("base", "enhanced"), default="base", help="injecagent setting [base]"
    )
    parser.add_argument(
        "--injecagent-prompt",
        default=None,
        metavar="JSON_FILE",
        help='injecagent: {"system": ..., "user": ...} with the placeholders {input}, '
        "{available_tool_names}, {available_tool_descriptions}, {agent_scratchpad} "
        "(e.g. the benchmark's own prompt) [the project's wording]",
    )
    parser.add_argument("--task-num", type=int, default=1, help="asb: tasks per agent (ASB's --task_num) [1]")
    parser.add_argument(
        "--attack-type",
        default="context_ignoring",
        help="asb: injected payload (naive, fake_completion, escape_characters, context_ignoring, "
        "combined_attack) [context_ignoring]",
    )
    parser.add_argument(
        "--attack-tools",
        default="all_attack_tools.jsonl",
        help="asb: attacker-tool file under data/ [all_attack_tools.jsonl]",
    )
    parser.add_argument("--plan-attempts", type=int, default=10, help="asb: planning tries per episode [10]")
    parser.add_argument("--max-turns", type=int, default=15, help="agentdojo: tool-loop iterations [15]")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="asb, agentdojo: episodes run at once, their turns batched into one generate "
        "call (up to --batch-size) [1]",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


@contextmanager
def _progress(
    enabled: bool, label: str
) -> Iterator[tuple[Callable[[int], None], Callable[[int | None], None]]]:
    """(advance, set_total) of a rich progress bar on stderr; no-ops when disabled or rich is missing."""
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        enabled = False
    if not enabled:
        yield (lambda n: None), (lambda n: None)
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)
        yield (lambda n: bar.advance(task, n)), (lambda n: bar.update(task, total=n))


def evaluate(
    benchmark: str,
    *,
    model: str,
    data: str,
    limit: int | None = None,
    out: str | None = None,
    progress: bool = False,
    model_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Generate with ``model`` on ``benchmark`` and score it; writes the report when ``out`` is given.

    Returns ``{"metrics", "records", "config", "files"}``. Raises ``ValueError`` / ``FileNotFoundError``
    with a one-line message for bad input (a missing file names the expected layout).
    """
    from pathlib import Path

    from ._generate import ChatModel

    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}")
    if limit is not None and limit < 1:
        raise ValueError("--limit must be at least 1")
    data_path = Path(data)
    if not data_path.exists():
        raise FileNotFoundError(f"{data_path} does not exist; expected {BENCHMARKS[benchmark].layout}")
    start = time.monotonic()
    single_turn = benchmark not in ("asb", "agentdojo")
    with _progress(progress, f"{benchmark}") as (advance, set_total):

        def build() -> ChatModel:
            return ChatModel(
                model, **{**(model_options or {}), **({"on_batch": advance} if single_turn else {})}
            )

        ctx = RunContext(
            build,
            data_path,
            limit,
            dict(options or {}),
            progress=(lambda n: None) if single_turn else advance,
            set_total=set_total,
        )
        result = BENCHMARKS[benchmark].run(ctx)
    config = {
        "benchmark": benchmark,
        "model": str(model),
        "data": str(data),
        "limit": limit,
        "backend": ctx.model.backend,
        "max_new_tokens": ctx.model.max_new_tokens,
        "options": dict(options or {}),
        "seconds": time.monotonic() - start,
    }
    files = write_report(out, benchmark, result, config) if out else {}
    return {**result, "config": config, "files": files}


def _quiet_library_bars() -> None:
    """The command draws one progress bar and reports errors itself; the libraries' own bars (dataset
    building, weight loading) and datasets' error log lines go."""
    import importlib
    import logging

    logging.getLogger("datasets").setLevel(logging.CRITICAL)

    for module, call in (
        ("datasets", "disable_progress_bars"),
        ("transformers.utils.logging", "disable_progress_bar"),
    ):
        try:
            getattr(importlib.import_module(module), call)()
        except (ImportError, AttributeError):
            continue


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``corrgrpo evaluate`` from parsed arguments; bad input raises the core CLI's ``CliError``."""
    bench = BENCHMARKS[args.benchmark]
    if bench.domain != args.domain:
        raise CliError(
            f"benchmark {args.benchmark!r} belongs to domain {bench.domain!r}, not {args.domain!r}"
        )
    try:
        generation = json.loads(args.generation_kwargs) if args.generation_kwargs else {}
    except ValueError as exc:
        raise CliError(f"--generation-kwargs is not JSON: {exc}") from None
    if not isinstance(generation, dict):
        raise CliError("--generation-kwargs must be a JSON object")
    model_options = {
        "max_new_tokens": args.max_new_tokens,
        "backend": args.backend,
        "device": args.device,
        "batch_size": args.batch_size,
        "generation_kwargs": generation,
    }
    options = {
        "timing_rounds": args.timing_rounds,
        "timeout": args.timeout,
        "setting": args.setting,
        "task_num": args.task_num,
        "attack_type": args.attack_type,
        "asb_attack_tools": args.attack_tools,
        "plan_attempts": args.plan_attempts,
        "max_turns": args.max_turns,
        "injecagent_prompt": args.injecagent_prompt,
        "concurrency": args.concurrency,
    }
    folder = args.out or f"eval-{args.benchmark}"
    _quiet_library_bars()
    try:
        result = evaluate(
            args.benchmark,
            model=args.model,
            data=args.data,
            limit=args.limit,
            out=folder,
            progress=not args.no_progress,
            model_options=model_options,
            options=options,
        )
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    out.write(render_markdown(args.benchmark, result["metrics"], result["config"]))
    out.write(f"\nwritten: {', '.join(str(p) for p in result['files'].values())}\n")
    return 0


COMMAND = Command(
    "evaluate",
    "generate with a checkpoint on a paper benchmark and score it",
    add_arguments,
    run,
    description="Generate with a local checkpoint on one of the paper's benchmarks (HumanEval, MBPP, "
    "LiveCodeBench; RLLA test, API-Bank; AgentDojo, ASB, InjecAgent), score it with the project's "
    "rewards and the benchmark's checkers, and write metrics.json, results.md and records.jsonl.",
)
