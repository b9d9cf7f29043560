"""RLLA-4K and API-Bank data in the paper's splits, as rows verl, TRL and OpenRLHF read.

The raw data (ToolRL's ``rlla_rl.json``) is a JSON list of records with ``instruction`` (the system
prompt listing the tools), ``input`` (the dialogue so far) and ``output`` (the target: ``<think>`` then
``<tool_call>`` and/or ``<response>``). API-Bank's own test files (``test-data/level-1-api.json``, ...)
hold ``instruction`` (the task text, then ``API descriptions:`` with one JSON tool per line), ``input``
(the dialogue, ending in ``Generate API Request:``) and ``expected_output``
(``API-Request: [ApiName(key='value', ...)]``); :func:`from_api_bank` converts them to the RLLA layout.
Nothing here downloads: point the loaders at local files.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo_tasks.tool_calling._reward import _parse_ground_truth

RLLA_SPLIT_SEED = 31415
"""Seed of ToolRL's preprocessing shuffle; with ``RLLA_TEST_FRACTION`` it gives the 3,920 / 80 split."""
RLLA_TEST_FRACTION = 0.02
_FIELDS = ("instruction", "input", "output")
TOOL_SYSTEM_PROMPT = (
    "You are a helpful assistant that can call tools. Think first inside <think></think>, then either call\n"
    'tools inside <tool_call></tool_call> (one JSON object {"name": ..., "parameters": {...}} per line)\n'
    "or answer the user inside <response></response>."
)
"""Header of the system prompt :func:`from_api_bank` writes (pass RLLA's own to match its training data)."""
_API_REQUEST = re.compile(r"API-Request:\s*\[(?P<call>.*)\]\s*\Z", re.DOTALL)
_API_DESCRIPTIONS = "API descriptions:"
_GENERATE = "Generate API Request:"


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSON list, a JSON-lines file or a parquet file into a list of dicts."""
    path = Path(path)
    if path.suffix == ".parquet":
        import datasets  # heavy; only parquet input needs it

        return [dict(row) for row in datasets.Dataset.from_parquet(str(path))]
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if not isinstance(data, list):
        raise TypeError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def validate_records(records: Sequence[Mapping[str, Any]], *, source: str = "records") -> None:
    """Raise naming the first bad record: ``TypeError`` for a missing or non-text field, ``ValueError``
    for a target with neither a ``<tool_call>`` nor a ``<response>`` block, or whose tool-call block does
    not parse."""
    for i, record in enumerate(records):
        for key in _FIELDS:
            if not isinstance(record.get(key), str):
                raise TypeError(f"{source}[{i}]: field {key!r} must be a string, got {record.get(key)!r:.80}")
        target = record["output"].strip()
        if "<tool_call>" not in target and "<response>" not in target:
            raise ValueError(
                f"{source}[{i}]: target has neither a <tool_call> nor a <response> block, so "
                f"nothing could ever match it: {target[:120]!r}"
            )
        _parse_ground_truth(target)


def split_rlla(
    records: Sequence[Mapping[str, Any]],
    *,
    seed: int = RLLA_SPLIT_SEED,
    test_fraction: float = RLLA_TEST_FRACTION,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """ToolRL's split: shuffle with numpy's legacy generator, the last ``int(n * test_fraction)`` are test.

    Shuffling an index list draws the same permutation as shuffling the records themselves, so the
    split equals the reference's for the same input order.
    """
    import numpy as np

    order = list(range(len(records)))
    np.random.RandomState(seed).shuffle(order)
    n_test = int(len(records) * test_fraction)
    cut = len(order) - n_test
    return [records[i] for i in order[:cut]], [records[i] for i in order[cut:]]


def to_rows(
    records: Iterable[Mapping[str, Any]],
    *,
    split: str,
    data_source: str = "rlla",
    extra: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Records as verl RL rows, plus a top-level ``ground_truth`` column for TRL and OpenRLHF."""
    rows = []
    for index, record in enumerate(records):
        target = record["output"].strip()
        rows.append(
            {
                "data_source": data_source,
                "prompt": [
                    {"role": "system", "content": record["instruction"]},
                    {"role": "user", "content": record["input"]},
                ],
                "ability": "tool_calling",
                "reward_model": {"style": "rule", "ground_truth": target},
                "ground_truth": target,
                "extra_info": {"split": split, "index": index, "dialogue": record["input"], **(extra or {})},
            }
        )
    return rows


def _dataset_dict(splits: Mapping[str, list[dict[str, Any]]]) -> Any:
    import datasets

    empty = [name for name, rows in splits.items() if not rows]
    if empty:
        raise ValueError(f"split(s) {empty} would be empty; give more records or a larger test fraction")

    return datasets.DatasetDict({name: datasets.Dataset.from_list(rows) for name, rows in splits.items()})


def load_rlla(source: str | Path, *, test_fraction: float = RLLA_TEST_FRACTION) -> Any:
    """RLLA-4K as a ``datasets.DatasetDict`` with ``train`` and ``test``.

    ``source`` is either a directory holding ``train.parquet`` and ``test.parquet`` (already prepared:
    loaded as is) or the raw JSON list (validated, split with :func:`split_rlla`, converted with
    :func:`to_rows`); ``test_fraction`` only matters for raw input.
    """
    import datasets

    source = Path(source)
    if source.is_dir():
        files = {name: str(source / f"{name}.parquet") for name in ("train", "test")}
        missing = [f for f in files.values() if not Path(f).is_file()]
        if missing:
            raise FileNotFoundError(f"prepared RLLA directory lacks {missing}")
        return datasets.DatasetDict({k: datasets.Dataset.from_parquet(v) for k, v in files.items()})
    records = read_records(source)
    validate_records(records, source=str(source))
    train, test = split_rlla(records, test_fraction=test_fraction)
    return _dataset_dict({"train": to_rows(train, split="train"), "test": to_rows(test, split="test")})


def _api_bank_call(text: str) -> tuple[str, dict[str, Any]]:
    """``API-Request: [Name(key=literal, ...)]`` as (name, parameters); ValueError for anything else."""
    match = _API_REQUEST.search(text.strip())
    try:
        call = ast.parse(match.group("call").strip(), mode="eval").body if match else None
    except SyntaxError:
        call = None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
        raise ValueError(f"not an API-Bank request 'API-Request: [Name(key=value, ...)]': {text[:200]!r}")
    try:
        params = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None}
    except ValueError as exc:  # a value that is not a Python literal
        raise ValueError(f"API-Bank request with a non-literal value: {text[:200]!r}") from exc
    return call.func.id, params


def _tool_line(line: str) -> dict[str, Any] | None:
    """A tool description line (``name`` or level 3's ``apiCode``), else None."""
    try:
        tool = json.loads(line)
    except ValueError:
        return None
    if not isinstance(tool, dict):
        return None
    name = tool.get("name", tool.get("apiCode"))
    if not isinstance(name, str):
        return None
    return {
        "name": name,
        "description": tool.get("description", ""),
        "parameters": tool.get("input_parameters", tool.get("parameters", {})),
    }


def is_api_bank_record(record: Mapping[str, Any]) -> bool:
    """Whether a record is in API-Bank's own layout: its target (``expected_output``, or ``output`` in
    ``level-3-batch-inf.json``) is an ``API-Request:`` line rather than an RLLA ``<tool_call>`` block."""
    target = record.get("expected_output", record.get("output"))
    return isinstance(target, str) and target.lstrip().startswith("API-Request:")


def from_api_bank(record: Mapping[str, Any], *, system_prompt: str = TOOL_SYSTEM_PROMPT) -> dict[str, Any]:
    """One API-Bank test record in the RLLA layout: tools listed under ``system_prompt``, the dialogue
    without its ``Generate API Request:`` cue, the expected request as a ``<tool_call>`` target.

    Tools are the JSON lines after ``API descriptions:`` in ``instruction`` (levels 1 and 2) and the JSON
    lines of ``input`` (level 3, keyed ``apiCode``/``parameters``); the target is ``expected_output``
    (levels 1 and 2) or ``output`` (level 3).

    >>> r = from_api_bank({"instruction": 'Generate a request.\\nAPI descriptions:\\n{"name": "Calc", '
    ...                    '"description": "Math.", "input_parameters": {"formula": {"type": "str"}}}',
    ...                    "input": "User: 2+2?\\nGenerate API Request:",
    ...                    "expected_output": "API-Request: [Calc(formula='2+2')]"})
    >>> print(r["output"])
    <tool_call>
    {"name": "Calc", "parameters": {"formula": "2+2"}}
    </tool_call>
    """
    target_key = "expected_output" if "expected_output" in record else "output"
    for key in ("instruction", "input", target_key):
        if not isinstance(record.get(key), str):
            raise TypeError(f"API-Bank record field {key!r} must be a string, got {record.get(key)!r:.80}")
    name, params = _api_bank_call(record[target_key])
    _, sep, described = record["instruction"].partition(_API_DESCRIPTIONS)
    tools = [t for line in (described.splitlines() if sep else ()) if (t := _tool_line(line))]
    dialogue_lines = []
    for line in record["input"].splitlines():
        tool = _tool_line(line)
        if tool is None:
            dialogue_lines.append(line)
        else:
            tools.append(tool)
    dialogue = "\n".join(dialogue_lines).strip()
    if dialogue.endswith(_GENERATE):
        dialogue = dialogue[: -len(_GENERATE)].rstrip()
    listing = "\n\n".join(
        f"Name: {t['name']}\nDescription: {t['description']}\n"
        f"Parameters: {json.dumps(t['parameters'], ensure_ascii=False)}"
        for t in tools
    )
    target = json.dumps({"name": name, "parameters": params}, ensure_ascii=False)
    return {
        "instruction": f"{system_prompt}\n\nAvailable tools:\n{listing}",
        "input": dialogue,
        "output": f"<tool_call>\n{target}\n</tool_call>",
    }


def load_api_bank(levels: Mapping[int, str | Path], *, system_prompt: str = TOOL_SYSTEM_PROMPT) -> Any:
    """API-Bank evaluation levels (the paper reports levels 1-3) as ``level_1``, ``level_2``, ... splits.

    Each file is one level: API-Bank's own test file (``test-data/level-1-api.json``,
    ``level-2-api.json``, ``level-3-batch-inf.json``; each record whose target is an ``API-Request:``
    line is converted with :func:`from_api_bank`, which uses ``system_prompt``) or records already in
    the RLLA layout (``instruction``/``input``/``output``).
    """
    splits = {}
    for level, path in sorted(levels.items()):
        records = read_records(path)
        try:
            records = [
                from_api_bank(r, system_prompt=system_prompt) if is_api_bank_record(r) else r for r in records
            ]
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{path}: {exc}") from exc
        validate_records(records, source=str(path))
        splits[f"level_{level}"] = to_rows(
            records, split=f"level_{level}", data_source="api_bank", extra={"level": int(level)}
        )
    return _dataset_dict(splits)


def prepare(
    source: str | Path, out_dir: str | Path, *, test_fraction: float = RLLA_TEST_FRACTION
) -> dict[str, Path]:
    """Write RLLA ``train.parquet`` and ``test.parquet`` under ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, dataset in load_rlla(source, test_fraction=test_fraction).items():
        written[name] = out / f"{name}.parquet"
        dataset.to_parquet(str(written[name]))
    return written
