"""The paper's evaluations end to end: generate with a local checkpoint, score with the project's own
rewards and checkers (and AgentDojo's), report the paper's metrics.

``corrgrpo evaluate DOMAIN --model PATH --benchmark NAME --data PATH`` runs one benchmark
(:data:`BENCHMARKS`: humaneval, mbpp, livecodebench; rlla-test, api-bank; agentdojo, asb, injecagent,
whose runners live in :mod:`.agent_security`);
:func:`evaluate` is the same from Python. Generation is :class:`ChatModel` (transformers, or vLLM when
installed). Data is never downloaded: each benchmark reads a local file or folder (``Benchmark.layout``).
A run folder keeps one record per case, appended as it is scored, so rerunning resumes (``_store``);
``--compare`` pairs two runs (:func:`compare_runs`). ``corrgrpo pipeline`` (:mod:`corrgrpo_tasks.pipeline`)
trains, converts and evaluates every benchmark of a domain. docs/evaluation.md has the details.
"""

from corrgrpo_tasks.evaluation._benchmarks import BENCHMARKS, DOMAINS, Benchmark, rlla_metrics
from corrgrpo_tasks.evaluation._compare import compare_runs
from corrgrpo_tasks.evaluation._generate import ChatModel
from corrgrpo_tasks.evaluation._report import PAPER, render_markdown, write_report
from corrgrpo_tasks.evaluation._run import RunContext
from corrgrpo_tasks.evaluation.agent_security import (
    agentdojo_metrics,
    asb_metrics,
    injecagent_metrics,
    load_asb,
    load_injecagent,
    read_agentdojo_cases,
    run_agentdojo,
    run_asb,
    run_injecagent,
)
from corrgrpo_tasks.evaluation.cli import add_arguments, evaluate, run

__all__ = [
    "BENCHMARKS",
    "DOMAINS",
    "PAPER",
    "Benchmark",
    "ChatModel",
    "RunContext",
    "add_arguments",
    "agentdojo_metrics",
    "asb_metrics",
    "compare_runs",
    "evaluate",
    "injecagent_metrics",
    "load_asb",
    "load_injecagent",
    "read_agentdojo_cases",
    "render_markdown",
    "rlla_metrics",
    "run",
    "run_agentdojo",
    "run_asb",
    "run_injecagent",
    "write_report",
]
