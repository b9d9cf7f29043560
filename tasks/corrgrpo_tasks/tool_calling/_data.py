"""RLLA-4K and API-Bank data in the paper's splits, as rows verl, TRL and OpenRLHF read.

The raw data (ToolRL's ``rlla_rl.json``, API-Bank test levels converted to the same layout) is a JSON list
of records with ``instruction`` (the system prompt listing the tools), ``input`` (the dialogue so far)
and ``output`` (the target: ``<think>`` then ``<tool_call>`` and/or ``<response>``). Nothing here
downloads: point the loaders at local files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo_tasks.tool_calling._reward import _parse_ground_truth

RLLA_SPLIT_SEED = 31415
"""Seed of ToolRL's preprocessing shuffle; with ``RLLA_TEST_FRACTION`` it gives the 3,920 / 80 split."""
RLLA_TEST_FRACTION = 0.02
_FIELDS = ("instruction", "input", "output")


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
    for a target whose tool-call block does not parse."""
    for i, record in enumerate(records):
        for key in _FIELDS:
            if not isinstance(record.get(key), str):
                raise TypeError(f"{source}[{i}]: field {key!r} must be a string, got {record.get(key)!r:.80}")
        _parse_ground_truth(record["output"].strip())


def split_rlla(records: Sequence[Mapping[str, Any]], *, seed: int = RLLA_SPLIT_SEED,
               test_fraction: float = RLLA_TEST_FRACTION) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
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


def to_rows(records: Iterable[Mapping[str, Any]], *, split: str, data_source: str = "rlla",
            extra: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Records as verl RL rows, plus a top-level ``ground_truth`` column for TRL and OpenRLHF."""
    rows = []
    for index, record in enumerate(records):
        target = record["output"].strip()
        rows.append({
            "data_source": data_source,
            "prompt": [{"role": "system", "content": record["instruction"]},
                       {"role": "user", "content": record["input"]}],
            "ability": "tool_calling",
            "reward_model": {"style": "rule", "ground_truth": target},
            "ground_truth": target,
            "extra_info": {"split": split, "index": index, **(extra or {})},
        })
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


def load_api_bank(levels: Mapping[int, str | Path]) -> Any:
    """API-Bank evaluation levels (the paper reports levels 1-3) as ``level_1``, ``level_2``, ... splits.

    Each file holds records in the RLLA layout (``instruction``/``input``/``output``), one file per level.
    """
    splits = {}
    for level, path in sorted(levels.items()):
        records = read_records(path)
        validate_records(records, source=str(path))
        splits[f"level_{level}"] = to_rows(records, split=f"level_{level}", data_source="api_bank",
                                           extra={"level": int(level)})
    return _dataset_dict(splits)


def prepare(source: str | Path, out_dir: str | Path, *,
            test_fraction: float = RLLA_TEST_FRACTION) -> dict[str, Path]:
    """Write RLLA ``train.parquet`` and ``test.parquet`` under ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, dataset in load_rlla(source, test_fraction=test_fraction).items():
        written[name] = out / f"{name}.parquet"
        dataset.to_parquet(str(written[name]))
    return written
