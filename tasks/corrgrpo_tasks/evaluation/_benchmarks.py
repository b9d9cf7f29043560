"""The benchmarks ``corrgrpo evaluate`` runs: where each reads its data, how it is generated and scored.

Every runner takes a :class:`RunContext` and returns ``{"metrics": {...}, "records": [...]}``; metrics
are percentages (0-100) named as in the paper, ``None`` where a rate has no case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo_tasks.asb import LAYOUT as ASB_LAYOUT
from corrgrpo_tasks.injecagent import LAYOUT as INJECAGENT_LAYOUT

from ._agentdojo import LAYOUT as AGENTDOJO_LAYOUT
from ._generate import ChatModel


@dataclasses.dataclass
class RunContext:
    """What a runner gets; ``model`` is built on first use, so bad data fails before a model loads."""

    model_factory: Callable[[], ChatModel]
    data: Path
    limit: int | None = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    progress: Callable[[int], None] = lambda n: None
    set_total: Callable[[int | None], None] = lambda n: None
    _model: ChatModel | None = None

    @property
    def model(self) -> ChatModel:
        if self._model is None:
            self._model = self.model_factory()
        return self._model


@dataclasses.dataclass(frozen=True)
class Benchmark:
    name: str
    domain: str
    summary: str
    layout: str
    run: Callable[[RunContext], dict[str, Any]]
    metrics: tuple[tuple[str, str], ...]
    """(metric key, what it means) in report order."""


def _need(path: Path, layout: str) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; expected {layout}")
    return path


@contextlib.contextmanager
def _reading(path: Path, layout: str) -> Iterator[None]:
    """Loader failures on malformed data (a missing field, a wrong type, unparsable JSON) as one
    ``ValueError`` naming the file and the expected layout."""
    try:
        yield
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 -- KeyError/TypeError/ValueError/pyarrow's errors from the loaders
        detail = str(exc).splitlines()[0] if str(exc) else ""
        if str(path) in detail:  # the loader already names the file (and the record)
            raise ValueError(detail) from None
        raise ValueError(
            f"{path}: cannot read it ({type(exc).__name__}: {detail}); expected {layout}"
        ) from None


def _first(items: Sequence[Any], limit: int | None) -> list[Any]:
    return list(items[:limit] if limit is not None else items)


# -- code ---------------------------------------------------------------------------------------------------


def _code(loader_name: str) -> Callable[[RunContext], dict[str, Any]]:
    def run(ctx: RunContext) -> dict[str, Any]:
        from corrgrpo_tasks.code import data as code_data
        from corrgrpo_tasks.code.evaluate import evaluate

        path = _need(ctx.data, BENCHMARKS_LAYOUT[loader_name])
        files = sorted(str(p) for p in path.glob("*.json*")) if path.is_dir() else str(path)
        if not files:
            raise FileNotFoundError(
                f"{path} holds no .json/.jsonl file; expected {BENCHMARKS_LAYOUT[loader_name]}"
            )
        with _reading(path, BENCHMARKS_LAYOUT[loader_name]):
            tasks = _first(getattr(code_data, loader_name)(data_files=files), ctx.limit)
        if not tasks:
            raise ValueError(f"{path}: no problems to evaluate")
        ctx.set_total(len(tasks))
        completions = ctx.model.generate([[{"role": "user", "content": t.prompt}] for t in tasks])
        report = evaluate(
            completions,
            [t.ground_truth for t in tasks],
            rounds=int(ctx.options.get("timing_rounds", 8)),
            timeout_seconds=float(ctx.options.get("timeout", 10.0)),
        )
        records = [
            {"task_id": t.task_id, "completion": c, **{k: v for k, v in s.items() if not k.startswith("_")}}
            for t, c, s in zip(tasks, completions, report.per_task, strict=True)
        ]
        metrics = {
            "n": report.n,
            "executable": report.executable,
            "pass@1": report.pass_at_1,
            "efficiency": report.efficiency,
            "n_qualified": report.n_qualified,
        }
        return {"metrics": metrics, "records": records}

    return run


CODE_METRICS = (
    ("pass@1", "% of problems whose one greedy completion passes every test"),
    ("executable", "% of completions that run without a runtime error (a wrong answer still runs)"),
    (
        "efficiency",
        (
            "% of qualified pairs (completion and reference both pass) where the completion is strictly "
            "faster, mean over timing rounds; None when no pair qualifies"
        ),
    ),
    ("n_qualified", "pairs that entered Efficiency"),
    ("n", "problems evaluated"),
)


# -- tool calling -------------------------------------------------------------------------------------------


def _score_rows(ctx: RunContext, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    from corrgrpo_tasks.tool_calling import compute_score

    ctx.set_total(len(rows))
    outputs = ctx.model.generate([list(r["prompt"]) for r in rows])
    records = []
    # The reward reads the model name, as the reference does, to accept a thinking model's completion that
    # starts inside <think> (its chat template opens the thought).
    model_name = ctx.model.path.name
    for row, out in zip(rows, outputs, strict=True):
        info = {**(row.get("extra_info") or {}), "model_name": model_name}
        score = compute_score(row.get("data_source") or "rlla", out, row["ground_truth"], info)
        records.append(
            {
                "index": (row.get("extra_info") or {}).get("index"),
                "completion": out,
                "has_tool_call": "<tool_call>" in row["ground_truth"],
                **score,
            }
        )
    return records


def _pct(values: Sequence[float]) -> float | None:
    return 100.0 * sum(values) / len(values) if values else None


def rlla_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The paper's RLLA numbers: on rows whose reference calls a tool, the mean match fractions S of the
    function names, parameter names and parameter values (recovered from the reward components) and
    all-exact (format right and the call list equal); all-exact and format also over every row."""
    tools = [r for r in records if r["has_tool_call"]]
    return {
        "n": len(records),
        "n_tool_calls": len(tools),
        "function_name": _pct([r["function_name_reward"] + 0.5 for r in tools]),
        "parameter_name": _pct([(r["parameter_reward"] + 1.0) / 2.0 for r in tools]),
        "parameter_value": _pct([(r["values_reward"] / 1.5 + 1.0) / 2.0 for r in tools]),
        "all_exact": _pct([r["exact_match"] for r in tools]),
        "all_exact_all_rows": _pct([r["exact_match"] for r in records]),
        "format": _pct([r["format_reward"] for r in records]),
    }


def _rlla(ctx: RunContext) -> dict[str, Any]:
    import datasets

    from corrgrpo_tasks.tool_calling import load_rlla

    path = _need(ctx.data, RLLA_LAYOUT)
    if path.is_dir():
        path = _need(path / "test.parquet", RLLA_LAYOUT)
    with _reading(path, RLLA_LAYOUT):
        rows = (
            list(datasets.Dataset.from_parquet(str(path)))
            if path.suffix == ".parquet"
            else list(load_rlla(path)["test"])
        )
        for row in rows:
            if not isinstance(row.get("prompt"), list) or not isinstance(row.get("ground_truth"), str):
                raise TypeError("a row lacks a chat 'prompt' or a string 'ground_truth'")
    records = _score_rows(ctx, _first(rows, ctx.limit))
    return {"metrics": rlla_metrics(records), "records": records}


RLLA_METRICS = (
    (
        "all_exact",
        (
            "% of tool-calling references matched exactly (format right, same call list); the paper's "
            "RLLA all-exact"
        ),
    ),
    ("function_name", "mean function-name match (multiset Jaccard), %, tool-calling references"),
    ("parameter_name", "mean parameter-name match of matched calls, %, tool-calling references"),
    ("parameter_value", "mean share of reference parameter values reproduced exactly, %"),
    ("all_exact_all_rows", "all-exact over every row (references that answer in text included)"),
    ("format", "% of completions in the reference's <think>/<tool_call>/<response> layout"),
    ("n_tool_calls", "rows whose reference calls a tool (71 of RLLA's 80)"),
    ("n", "rows evaluated"),
)
_LEVEL = re.compile(r"level-(\d)")


def _api_bank(ctx: RunContext) -> dict[str, Any]:
    from corrgrpo_tasks.tool_calling import load_api_bank

    path = _need(ctx.data, API_BANK_LAYOUT)
    if path.is_dir():
        found = {
            int(m.group(1)): p for p in sorted(path.glob("level-*.json")) if (m := _LEVEL.search(p.name))
        }
        if not found:
            raise FileNotFoundError(f"{path} holds no level-N-*.json file; expected {API_BANK_LAYOUT}")
    else:
        match = _LEVEL.search(path.name)
        found = {int(match.group(1)) if match else 1: path}
    with _reading(path, API_BANK_LAYOUT):
        splits = load_api_bank(found)
    rows = [(name, row) for name in sorted(splits) for row in _first(list(splits[name]), ctx.limit)]
    records = _score_rows(ctx, [r for _, r in rows])
    metrics: dict[str, Any] = {"n": len(records)}
    levels = []
    for name in sorted(splits):
        mine = [rec for (split, _), rec in zip(rows, records, strict=True) if split == name]
        level = name.split("_")[1]
        metrics[f"level_{level}"] = _pct([float(r["accuracy_reward"] >= 3.0 - 1e-9) for r in mine])
        metrics[f"n_level_{level}"] = len(mine)
        levels.append(metrics[f"level_{level}"])
        for rec in mine:
            rec["level"] = int(level)
    metrics["average"] = sum(levels) / len(levels) if levels else None
    return {"metrics": metrics, "records": records}


API_BANK_METRICS = (
    ("level_1", "% of level-1 requests whose call (API name and every parameter value) equals the reference"),
    ("level_2", "the same for level 2"),
    ("level_3", "the same for level 3"),
    ("average", "mean over the levels evaluated"),
    ("n", "requests evaluated"),
)


# -- agent security -----------------------------------------------------------------------------------------


def _agentdojo(ctx: RunContext) -> dict[str, Any]:
    from ._agentdojo import read_agentdojo_cases, run_agentdojo

    cases = read_agentdojo_cases(ctx.data)
    ctx.set_total(None)
    out = run_agentdojo(
        cases,
        ctx.model.generate,
        limit=ctx.limit,
        max_iters=int(ctx.options.get("max_turns", 15)),
        concurrency=int(ctx.options.get("concurrency", 1)),
        on_case=ctx.progress,
    )
    return {"metrics": out["metrics"], "records": out["cases"]}


SECURITY_METRICS = (
    (
        "joint_accuracy",
        (
            "100 mean over attacked cases of (1 - attack success)(clean utility + utility under "
            "attack)/2, clean utility of the same task; the paper's joint accuracy"
        ),
    ),
    ("clean_utility", "% of tasks done without attack"),
    ("utility_under_attack", "% of attacked cases whose user task was done"),
    ("attack_success_rate", "% of attacked cases where the attacker's goal was met (ASR, lower is better)"),
)


def _asb(ctx: RunContext) -> dict[str, Any]:
    from corrgrpo_tasks.asb import load_asb, run_asb

    agents = load_asb(
        _need(ctx.data, ASB_LAYOUT),
        attack_tools=str(ctx.options.get("asb_attack_tools", "all_attack_tools.jsonl")),
    )
    task_num = int(ctx.options.get("task_num", 1))
    total = sum(min(task_num, len(a.tasks)) * len(a.attack_tools) for a in agents)
    ctx.set_total(min(total, ctx.limit) if ctx.limit is not None else total)
    out = run_asb(
        agents,
        ctx.model.generate,
        task_num=task_num,
        limit=ctx.limit,
        concurrency=int(ctx.options.get("concurrency", 1)),
        attack_type=str(ctx.options.get("attack_type", "context_ignoring")),
        plan_attempts=int(ctx.options.get("plan_attempts", 10)),
        on_case=ctx.progress,
    )
    return {"metrics": out["metrics"], "records": out["pairs"]}


def _prompt(path: str) -> tuple[str, str]:
    import json

    file = _need(Path(path), 'a JSON file {"system": "...", "user": "..."}')
    try:
        spec = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(spec, dict) or not all(isinstance(spec.get(k), str) for k in ("system", "user")):
        raise ValueError(f"{file}: expected an object with string 'system' and 'user' prompts")
    needed = ("{input}", "{agent_scratchpad}", "{available_tool_descriptions}")
    missing = [p for p in needed if p not in spec["user"]]
    if missing:
        raise ValueError(f"{file}: the user prompt lacks the placeholders {missing}")
    return spec["system"], spec["user"]


def _injecagent(ctx: RunContext) -> dict[str, Any]:
    from corrgrpo_tasks.injecagent import PROMPT, load_injecagent, run_injecagent

    data = load_injecagent(
        _need(ctx.data, INJECAGENT_LAYOUT), setting=str(ctx.options.get("setting", "base"))
    )
    prompt = _prompt(ctx.options["injecagent_prompt"]) if ctx.options.get("injecagent_prompt") else PROMPT
    ctx.set_total(None)
    out = run_injecagent(data, ctx.model.generate, limit=ctx.limit, prompt=prompt)
    metrics = {k: v for k, v in out["metrics"].items() if k != "counts"}
    metrics.update(
        {
            f"relaxed {k}": v
            for k, v in out["metrics_relaxed"].items()
            if k.startswith("ASR") or k == "valid_rate"
        }
    )
    return {"metrics": metrics, "records": out["cases"]}


INJECAGENT_METRICS = (
    (
        "ASR-valid (Total)",
        (
            "% of valid outputs where the attack succeeded (DH success, or DS stage 2 success), "
            "the benchmark's headline; lower is better"
        ),
    ),
    ("ASR-valid (Direct Harm)", "% of valid direct-harm outputs that called the harmful tool"),
    ("ASR-valid (S1)", "% of valid data-stealing outputs that called the data-extracting tool"),
    ("ASR-valid (S2)", "% of valid stage-2 outputs that sent the data to the attacker"),
    ("ASR-valid (Data Stealing)", "S2 successes over valid data-stealing outcomes"),
    ("ASR-all (Total)", "attack successes over all cases (invalid outputs count as not attacked)"),
    ("ASR-all (Direct Harm)", "over all direct-harm cases"),
    ("ASR-all (Data Stealing)", "over all data-stealing cases"),
    ("valid_rate", "% of cases whose judged outputs were valid ReAct"),
    (
        "relaxed ASR-valid (Total)",
        "the same under the authors' relaxed re-scoring (hermes calls read as actions)",
    ),
    ("missing_simulated", "stage-2 attacker calls without a simulated response in the data ('{}' used)"),
)

RLLA_LAYOUT = (
    "RLLA: a folder with test.parquet (tool_calling.prepare), a test.parquet file, or ToolRL's raw "
    "rlla_rl.json (split 3,920/80 here)"
)
API_BANK_LAYOUT = (
    "API-Bank's test-data folder holding level-1-api.json, level-2-api.json and "
    "level-3-batch-inf.json (any subset), or one of those files"
)
BENCHMARKS_LAYOUT = {
    "load_humaneval": "HumanEval as JSON/JSONL rows (task_id, prompt, canonical_solution, test, entry_point), "
    "e.g. HumanEval.jsonl, or a folder of such files",
    "load_mbpp": "MBPP as JSON/JSONL rows (task_id, text or prompt, code, test_list, test_setup_code, "
    "test_imports), or a folder of such files",
    "load_livecodebench": "LiveCodeBench code_generation_lite rows (question_id, question_content, starter_code, "
    "public_test_cases, private_test_cases, metadata), e.g. test6.jsonl for v6",
}

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "humaneval",
            "code",
            "HumanEval (164): Pass@1, Executable, Efficiency",
            BENCHMARKS_LAYOUT["load_humaneval"],
            _code("load_humaneval"),
            CODE_METRICS,
        ),
        Benchmark(
            "mbpp",
            "code",
            "MBPP: Pass@1, Executable, Efficiency",
            BENCHMARKS_LAYOUT["load_mbpp"],
            _code("load_mbpp"),
            CODE_METRICS,
        ),
        Benchmark(
            "livecodebench",
            "code",
            "LiveCodeBench (v6: 175): Pass@1, Executable, Efficiency",
            BENCHMARKS_LAYOUT["load_livecodebench"],
            _code("load_livecodebench"),
            CODE_METRICS,
        ),
        Benchmark(
            "rlla-test",
            "tool-calling",
            "RLLA-4K test split (80): all-exact and component matches",
            RLLA_LAYOUT,
            _rlla,
            RLLA_METRICS,
        ),
        Benchmark(
            "api-bank",
            "tool-calling",
            "API-Bank levels 1-3: call accuracy",
            API_BANK_LAYOUT,
            _api_bank,
            API_BANK_METRICS,
        ),
        Benchmark(
            "agentdojo",
            "agent-security",
            "AgentDojo v1.2.2 held-out cases (411: 21 clean, 390 attacked)",
            AGENTDOJO_LAYOUT,
            _agentdojo,
            SECURITY_METRICS,
        ),
        Benchmark(
            "asb",
            "agent-security",
            "Agent Security Bench, observation prompt injection (400 pairs)",
            ASB_LAYOUT,
            _asb,
            (
                *SECURITY_METRICS,
                ("workflow_failure_rate", ("% of attacked episodes without a valid plan")),
                ("n_pairs", "pairs evaluated"),
            ),
        ),
        Benchmark(
            "injecagent",
            "agent-security",
            "InjecAgent base setting: attack success rates",
            INJECAGENT_LAYOUT,
            _injecagent,
            INJECAGENT_METRICS,
        ),
    )
}
DOMAINS = ("code", "tool-calling", "agent-security")
