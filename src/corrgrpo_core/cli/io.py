"""Read reward batches (CSV, JSONL, Parquet) into a group-id vector and a score matrix.

One row per rollout: a group column and one numeric column per reward component. Every problem is
reported as a :class:`CliError` that names the file, the row (and line, for text files) and the column,
so a user can fix the file without reading a traceback.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["CliError", "RewardBatch", "markdown_table", "parse_weights", "read_rewards"]

_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


class CliError(Exception):
    """A problem the user can fix (bad file, bad option); printed without a traceback."""


@dataclass(frozen=True)
class RewardBatch:
    """A reward batch as the estimators take it.

    ``scores`` is ``(N, K)`` float64, ``group_ids`` ``(N,)`` int64 indexing ``group_labels`` (numbered
    in order of first appearance), ``rows`` the 1-based data row of each entry in the file.
    """

    scores: npt.NDArray[np.float64]
    group_ids: npt.NDArray[np.int64]
    group_labels: tuple[str, ...]
    components: tuple[str, ...]
    source: str

    @property
    def n_groups(self) -> int:
        return len(self.group_labels)


def read_rewards(
    path: str | Path,
    *,
    group_col: str = "group",
    components: Sequence[str] | None = None,
    file_format: str | None = None,
    allow_nan: bool = False,
) -> RewardBatch:
    """Read a reward batch from ``path``.

    ``components`` picks the reward columns (default: every column except ``group_col``, in file
    order). ``file_format`` is ``"csv"``, ``"jsonl"`` or ``"parquet"`` (default: from the suffix).
    Missing values are an error unless ``allow_nan``, which turns them into NaN.
    """
    path = Path(path)
    fmt = file_format or _FORMATS.get(path.suffix.lower())
    if fmt not in {"csv", "jsonl", "parquet"}:
        raise CliError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r}; "
            "use .csv, .jsonl or .parquet, or pass --format"
        )
    if not path.is_file():
        raise CliError(f"{path}: no such file")
    if fmt == "csv":
        header, records = _csv_records(path)
    elif fmt == "jsonl":
        header, records = _jsonl_records(path)
    else:
        header, records = _parquet_records(path)
    return _build(str(path), header, records, group_col=group_col, components=components, allow_nan=allow_nan)


# A record is (where, mapping): ``where`` is the human-readable position ("row 3 (line 4)").
_Record = tuple[str, Mapping[str, object]]


def _csv_records(path: Path) -> tuple[list[str], list[_Record]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise CliError(f"{path}: the file is empty (expected a header row)") from None
        header = [name.strip() for name in header]
        records: list[_Record] = []
        for row_number, row in enumerate(reader, start=1):
            if not any(cell.strip() for cell in row):
                continue  # blank lines are common at the end of hand-written files
            where = f"row {row_number} (line {reader.line_num})"
            if len(row) != len(header):
                raise CliError(f"{path} {where}: {len(row)} fields, but the header has {len(header)}")
            records.append((where, dict(zip(header, row, strict=False))))
    return header, records


def _jsonl_records(path: Path) -> tuple[list[str], list[_Record]]:
    header: list[str] = []
    records: list[_Record] = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"row {len(records) + 1} (line {line_number})"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise CliError(f"{path} {where}: invalid JSON ({err.msg})") from None
            if not isinstance(obj, dict):
                raise CliError(f"{path} {where}: expected a JSON object, got {type(obj).__name__}")
            if not header:
                header = list(obj)
            records.append((where, obj))
    return header, records


def _parquet_records(path: Path) -> tuple[list[str], list[_Record]]:
    try:
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise CliError(
            f"{path}: reading Parquet files needs pyarrow, which is not installed; "
            "run `pip install pyarrow` (or convert the file to CSV or JSONL)"
        ) from None
    table = pq.read_table(path)
    rows = table.to_pylist()
    return list(table.column_names), [(f"row {i}", row) for i, row in enumerate(rows, start=1)]


def _build(
    source: str,
    header: list[str],
    records: list[_Record],
    *,
    group_col: str,
    components: Sequence[str] | None,
    allow_nan: bool,
) -> RewardBatch:
    if not records:
        raise CliError(f"{source}: no data rows")
    if group_col not in header:
        raise CliError(
            f"{source}: group column {group_col!r} not found; columns are {header} "
            "(choose one with --group-col)"
        )
    names = [c for c in header if c != group_col] if components is None else list(components)
    if not names:
        raise CliError(f"{source}: no reward columns besides the group column {group_col!r}")
    if group_col in names:
        raise CliError(f"{source}: {group_col!r} is the group column and cannot also be a reward component")
    missing = [c for c in names if c not in header]
    if missing:
        raise CliError(f"{source}: reward column(s) {missing} not found; columns are {header}")
    if len(set(names)) != len(names):
        raise CliError(f"{source}: reward columns repeat: {names}")

    scores = np.empty((len(records), len(names)), dtype=np.float64)
    labels: dict[str, int] = {}
    ids = np.empty(len(records), dtype=np.int64)
    for i, (where, record) in enumerate(records):
        label = _group_label(record.get(group_col))
        if label is None:
            raise CliError(f"{source} {where}: empty group label in column {group_col!r}")
        ids[i] = labels.setdefault(label, len(labels))
        for k, name in enumerate(names):
            if name not in record:
                raise CliError(f"{source} {where}: missing column {name!r}")
            scores[i, k] = _number(record[name], f"{source} {where}: column {name!r}", allow_nan=allow_nan)
    return RewardBatch(
        scores=scores, group_ids=ids, group_labels=tuple(labels), components=tuple(names), source=source
    )


def _group_label(value: object) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    text = str(value).strip()
    return text or None


def _number(value: object, what: str, *, allow_nan: bool) -> float:
    if isinstance(value, bool):  # JSON true/false: a pass/fail reward
        return float(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        if allow_nan:
            return math.nan
        raise CliError(f"{what}: missing value (pass --nan-policy ignore to leave it out of the statistics)")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _TRUE | _FALSE:
            return float(text.lower() in _TRUE)
        try:
            number = float(text)
        except ValueError:
            raise CliError(f"{what}: {value!r} is not a number") from None
    elif isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
    else:
        raise CliError(f"{what}: {value!r} is not a number")
    if math.isnan(number):
        if allow_nan:
            return number
        raise CliError(f"{what}: NaN (pass --nan-policy ignore to leave it out of the statistics)")
    if math.isinf(number):
        raise CliError(f"{what}: {value!r} is infinite")
    return number


def parse_weights(text: str | None, components: Sequence[str]) -> npt.NDArray[np.float64] | None:
    """Parse ``--weights``: ``"0.5,1,2"`` (one per component, in order) or ``"fmt=0.05,pass=0.6"``.

    Named weights leave unnamed components at 1.
    """
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise CliError("--weights is empty")
    if all("=" in p for p in parts):
        weights = dict.fromkeys(components, 1.0)
        for part in parts:
            name, _, value = part.partition("=")
            name = name.strip()
            if name not in weights:
                raise CliError(
                    f"--weights names {name!r}, which is not a reward component {list(components)}"
                )
            weights[name] = _number(value, f"--weights {name!r}", allow_nan=False)
        return np.array(list(weights.values()), dtype=np.float64)
    if any("=" in p for p in parts):
        raise CliError("--weights mixes named (name=value) and positional values; use one style")
    if len(parts) != len(components):
        raise CliError(
            f"--weights has {len(parts)} values but there are {len(components)} reward "
            f"components {list(components)}"
        )
    return np.array([_number(p, "--weights", allow_nan=False) for p in parts], dtype=np.float64)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table with aligned columns: readable in a terminal and valid Markdown."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
