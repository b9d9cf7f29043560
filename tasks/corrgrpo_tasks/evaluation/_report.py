"""Writing an evaluation: ``metrics.json`` and ``results.md`` (the metrics beside the paper's numbers,
labelled with the paper's models); ``records.jsonl`` (one line per case, appended as it is scored) is
the run folder's own (:mod:`._store`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._benchmarks import BENCHMARKS
from ._store import plain

# (model, metric as the paper names it, GRPO, CorrGRPO), percentages, from the paper's tables as the
# project's reference notes record them (docs/evaluation.md lists the same).
PAPER: dict[str, tuple[tuple[str, str, float, float], ...]] = {
    "humaneval": (("Qwen2.5-Coder-7B-Instruct", "Pass@1 (base model: 78.66)", 73.78, 78.66),),
    "livecodebench": (("Qwen2.5-Coder-1.5B-Instruct", "Pass@1 (v6)", 13.14, 10.29),),
    "mbpp": (),
    "rlla-test": (
        ("Qwen2.5-7B-Instruct", "all-exact", 63.38, 67.61),
        ("Qwen3-4B-Thinking-2507", "all-exact", 57.75, 59.15),
        ("Qwen3-8B", "all-exact", 61.97, 63.38),
        ("Qwen2.5-7B-Instruct", "function name", 97.65, 95.07),
        ("Qwen3-4B-Thinking-2507", "function name", 94.84, 93.78),
    ),
    "api-bank": (
        ("Qwen3-4B-Thinking-2507", "level 1", 79.20, 78.45),
        ("Qwen3-4B-Thinking-2507", "level 3", 52.24, 64.08),
    ),
    "agentdojo": (
        ("Qwen2.5-3B-Instruct", "joint accuracy", 60.13, 89.62),
        ("Qwen2.5-7B-Instruct", "joint accuracy", 84.49, 86.03),
        ("Qwen3-8B", "joint accuracy", 80.26, 79.62),
        ("Qwen2.5-7B-Instruct", "clean utility", 90.48, 85.71),
        ("Qwen2.5-7B-Instruct", "ASR", 0.26, 1.28),
        ("Qwen2.5-3B-Instruct", "ASR", 0.00, 1.54),
    ),
    "asb": (
        ("Qwen2.5-3B-Instruct", "joint accuracy", 14.88, 18.13),
        ("Qwen2.5-7B-Instruct", "joint accuracy", 31.38, 47.88),
        ("Qwen3-8B", "joint accuracy", 57.38, 58.63),
        ("Qwen3-8B", "ASR", 19.50, 22.50),
    ),
    "injecagent": (
        ("Qwen2.5-3B-Instruct", "total ASR", 8.80, 5.52),
        ("Qwen2.5-7B-Instruct", "total ASR", 13.53, 6.17),
        ("Qwen3-8B", "total ASR", 13.94, 7.98),
    ),
}


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def model_size(name: str) -> str:
    """A paper model's size from its name ("Qwen2.5-Coder-7B-Instruct" -> "7B").

    >>> model_size("Qwen2.5-Coder-1.5B-Instruct"), model_size("Qwen3-4B-Thinking-2507")
    ('1.5B', '4B')
    """
    match = re.search(r"-(\d+(?:\.\d+)?)B(?:-|$)", name)
    return f"{match.group(1)}B" if match else "?"


def _parameters(count: Any) -> str:
    if not isinstance(count, int):
        return "size unknown"
    if count >= 1e9:
        return f"{count / 1e9:.1f}B parameters"
    return f"{count / 1e6:.1f}M parameters" if count >= 1e6 else f"{count:,} parameters"


def title(benchmark: str, config: Mapping[str, Any]) -> str:
    """The report's first line: the benchmark and how many of its cases were scored."""
    bench = BENCHMARKS[benchmark]
    scored, total = config.get("n_selected"), config.get("n_total")
    if scored is None:
        return f"# {benchmark}: {bench.summary}"
    part = "all" if scored == total else f"{scored} of {total}"
    return f"# {benchmark}: {bench.summary} ({part} {bench.unit} scored)"


def render_markdown(benchmark: str, metrics: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """The results table (metric, value, meaning) and the paper's numbers for the benchmark, each
    paper row labelled with its model and size."""
    bench = BENCHMARKS[benchmark]
    meaning = dict(bench.metrics)
    keys = [k for k, _ in bench.metrics if k in metrics] + [k for k in metrics if k not in meaning]
    name = Path(str(config["model"])).name
    packages = config.get("options", {}).get("sandbox_packages") or []
    details = [
        f"model `{config['model']}` ({_parameters(config.get('parameters'))})",
        f"data `{config['data']}`",
        f"{config['backend']}, greedy, at most {config['max_new_tokens']} new tokens",
        f"offset {config.get('offset', 0)}, limit {config['limit'] if config['limit'] is not None else 'none'}",
    ]
    if bench.sandboxed:
        details.append(f"sandbox packages: {', '.join(packages) if packages else 'none'}")
    if config.get("n_resumed"):
        details.append(f"{config['n_resumed']} resumed from an earlier run in this folder")
    details.append(f"{config['seconds']:.1f} s")
    parts = [
        title(benchmark, config),
        "",
        ", ".join(details),
        "",
        _table(["metric", "value", "meaning"], [[k, metrics[k], meaning.get(k, "")] for k in keys]),
    ]
    if PAPER[benchmark]:
        parts += [
            "",
            (
                f"The paper's numbers (percent; one greedy sample) are for the paper's own models, trained "
                f"with GRPO and with CorrGRPO; they are not results of `{name}` "
                f"({_parameters(config.get('parameters'))}):"
            ),
            "",
            _table(
                ["paper's model (size)", "metric", "GRPO", "CorrGRPO"],
                [[f"{m} ({model_size(m)})", metric, g, c] for m, metric, g, c in PAPER[benchmark]],
            ),
        ]
    return "\n".join(parts) + "\n"


def write_report(
    out_dir: str | Path, benchmark: str, result: Mapping[str, Any], config: Mapping[str, Any]
) -> dict[str, Path]:
    """Write ``metrics.json`` (with the selected case ids) and ``results.md`` under ``out_dir``; returns
    their paths and that of ``records.jsonl``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "metrics": out / "metrics.json",
        "markdown": out / "results.md",
        "records": out / "records.jsonl",
    }
    payload = {
        "benchmark": benchmark,
        "domain": BENCHMARKS[benchmark].domain,
        "config": plain(config),
        "metrics": plain(result["metrics"]),
        "ids": [r["id"] for r in result["records"] if "id" in r],
        "paper": [
            dict(zip(("model", "metric", "grpo", "corrgrpo"), row, strict=True))
            | {"size": model_size(row[0])}
            for row in PAPER[benchmark]
        ],
    }
    paths["metrics"].write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_markdown(benchmark, result["metrics"], config), encoding="utf-8")
    return paths
