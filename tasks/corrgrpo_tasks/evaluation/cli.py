"""``corrgrpo evaluate DOMAIN --model PATH --benchmark NAME --data PATH``: arguments and the run.

Registered on the ``corrgrpo`` command through the ``corrgrpo.commands`` entry point (``COMMAND``);
everything heavy (transformers, agentdojo, the sandbox) is imported only when a run starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from corrgrpo_core.cli.plugin import CliError, Command
from corrgrpo_core.cli.plugin import names as _names

from ..domains import domain_argument, domain_metavar
from ._benchmarks import BENCHMARKS
from ._report import render_markdown, write_report
from ._run import RunContext

__all__ = ["COMMAND", "add_arguments", "evaluate", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``evaluate`` subcommand's options."""
    names = ", ".join(f"{b.name} ({b.domain})" for b in BENCHMARKS.values())
    parser.add_argument(
        "domain", type=domain_argument, metavar=domain_metavar(), help="task domain of the benchmark"
    )
    parser.add_argument(
        "--model", required=True, metavar="PATH", help="local checkpoint folder (nothing is downloaded)"
    )
    parser.add_argument("--benchmark", required=True, choices=list(BENCHMARKS), metavar="NAME", help=names)
    parser.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="the benchmark's local data (file or folder; docs/evaluation.md lists each layout)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, metavar="N", help="evaluate N cases from --offset [all]"
    )
    parser.add_argument("--offset", type=int, default=0, metavar="K", help="skip the first K cases [0]")
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="run folder: records.jsonl (appended as each case is scored; a rerun resumes), "
        "metrics.json, results.md, run.json [eval-BENCHMARK]",
    )
    parser.add_argument(
        "--fresh", action="store_true", help="start the run folder over instead of resuming it"
    )
    parser.add_argument(
        "--compare",
        default=None,
        metavar="RUN_DIR",
        help="afterwards, print this run beside an earlier run folder of the same benchmark, with the "
        "paired difference on the cases both scored and its 95%% interval",
    )
    _add_generation_arguments(parser)
    _add_benchmark_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """How the checkpoint generates."""
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for generation [1; two were several times slower on a busy 2-core machine]",
    )
    parser.add_argument(
        "--sandbox-packages",
        type=_names,
        default=[],
        metavar="NAMES",
        help="code: comma-separated installed packages the candidate may import, read-only in its "
        "sandbox (e.g. numpy) [none: the standard library only]",
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


def _add_benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of one benchmark family (each help says which)."""
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


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """``threads`` torch threads for the run, restored afterwards (nothing when torch is missing)."""
    try:
        import torch
    except ImportError:
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


# Settings that change only speed or batch numerics: a run folder resumes across them.
_SPEED_ONLY = ("batch_size", "device", "concurrency")


def run_settings(
    benchmark: str, model: str, data: str, model_options: dict[str, Any], options: dict[str, Any]
) -> dict[str, Any]:
    """What decides a case's result, as ``run.json`` keeps it: a resumed run must match it."""
    from ._store import fingerprint_path

    return {
        "benchmark": benchmark,
        "model": str(Path(model).resolve()),
        "model_files": fingerprint_path(model, weights=True),
        "data": str(Path(data).resolve()),
        "data_files": fingerprint_path(data),
        "generation": {k: v for k, v in sorted(model_options.items()) if k not in _SPEED_ONLY},
        "options": {k: v for k, v in sorted(options.items()) if k not in _SPEED_ONLY},
    }


def evaluate(
    benchmark: str,
    *,
    model: str,
    data: str,
    limit: int | None = None,
    offset: int = 0,
    out: str | None = None,
    progress: bool = False,
    model_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    fresh: bool = False,
    threads: int = 1,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate with ``model`` on ``benchmark`` and score it, case by case.

    With ``out`` every record is appended to ``out/records.jsonl`` as it is scored and the report is
    written at the end; calling again with the same settings resumes (``log`` is told how many cases
    were already scored), ``fresh=True`` starts over. ``offset``/``limit`` select a slice of the cases.
    Returns ``{"metrics", "records", "config", "files"}``. Raises ``ValueError`` /
    ``FileNotFoundError`` with a one-line message for bad input (a missing file names the expected
    layout).
    """
    from ._generate import ChatModel, parameter_count, resolve_backend
    from ._store import RunStore

    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}")
    if limit is not None and limit < 1:
        raise ValueError("--limit must be at least 1")
    if offset < 0:
        raise ValueError("--offset must be at least 0")
    if threads < 1:
        raise ValueError("--threads must be at least 1")
    data_path = Path(data)
    if not data_path.exists():
        raise FileNotFoundError(f"{data_path} does not exist; expected {BENCHMARKS[benchmark].layout}")
    if not (Path(model) / "config.json").is_file():
        raise FileNotFoundError(
            f"{model} is not a local checkpoint folder (no config.json); nothing is downloaded"
        )
    model_options, options = dict(model_options or {}), dict(options or {})
    start = time.monotonic()
    settings = run_settings(benchmark, model, data, model_options, options)
    ctx = RunContext(
        lambda: ChatModel(model, **model_options),
        data_path,
        model_path=str(model),
        limit=limit,
        offset=offset,
        options={**options, "batch_size": model_options.get("batch_size", 8)},
        open_store=(lambda: RunStore.open(out, settings, fresh=fresh)) if out else RunStore.memory,
        show_progress=progress,
        label=benchmark,
        log=log or (lambda line: None),
    )
    try:
        with _torch_threads(threads):
            result = BENCHMARKS[benchmark].run(ctx)
    finally:
        ctx.close()
    selected = {r["id"] for r in result["records"]}
    config = {
        "benchmark": benchmark,
        "model": str(model),
        "parameters": parameter_count(model),
        "data": str(data),
        "limit": limit,
        "offset": offset,
        "n_total": ctx.total,
        "n_selected": ctx.selected,
        "n_resumed": len(selected & ctx.store.loaded) if ctx.store else 0,
        "backend": ctx._model.backend
        if ctx._model
        else resolve_backend(model_options.get("backend", "auto")),
        "max_new_tokens": model_options.get("max_new_tokens", 512),
        "threads": threads,
        "options": options,
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
    if args.sandbox_packages and not bench.sandboxed:
        raise CliError("--sandbox-packages applies to the code benchmarks only")
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
    if bench.sandboxed:
        options["sandbox_packages"] = list(args.sandbox_packages)
    if args.compare and not (Path(args.compare) / "metrics.json").is_file():
        raise CliError(f"--compare {args.compare}: no metrics.json there (not a finished run folder)")
    folder = args.out or f"eval-{args.benchmark}"
    _quiet_library_bars()
    try:
        result = evaluate(
            args.benchmark,
            model=args.model,
            data=args.data,
            limit=args.limit,
            offset=args.offset,
            out=folder,
            progress=not args.no_progress,
            model_options=model_options,
            options=options,
            fresh=args.fresh,
            threads=args.threads,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    out.write(render_markdown(args.benchmark, result["metrics"], result["config"]))
    out.write(f"\nwritten: {', '.join(str(p) for p in result['files'].values())}\n")
    if args.compare:
        from ._compare import compare_runs

        try:
            out.write("\n" + compare_runs(folder, args.compare))
        except (FileNotFoundError, ValueError) as exc:
            raise CliError(str(exc)) from None
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
