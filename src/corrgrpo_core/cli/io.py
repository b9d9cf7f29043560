"""Read reward batches (CSV, TSV, JSON lines, Parquet) into a group-id vector and a score matrix.

One row per rollout: a group column and one numeric column per reward component. pyarrow reads the
file (``read_csv``, ``read_json``, ``read_table``: only the columns needed, byte-order marks and
CRLF line ends included); this module only checks what pyarrow would misread or crash on, and turns
a refusal into a :class:`CliError` naming the file, the row (and line, for text files) and the
column. Where pyarrow does not say which row it refused, the row is found with Python's ``csv`` or
``json`` modules, on that error path only.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import mmap
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, overload

import numpy as np
import numpy.typing as npt

from .plugin import CliError

__all__ = [
    "FORMATS",
    "CliError",
    "Columns",
    "GroupLabels",
    "RewardBatch",
    "batch_from_columns",
    "check_file",
    "column_names",
    "file_format",
    "numeric_column",
    "parse_weights",
    "probe_columns",
    "read_columns",
    "read_rewards",
]

#: File suffix -> format (``--format`` takes the values).
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_DELIMITER = {"csv": ",", "tsv": "\t"}
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}
_CHUNK = 1 << 16  # rows per slice of a temporary over every row
_BLOCK = 1 << 20  # bytes per pyarrow block, its default (grown for a longer field or line)
_MISSING = "(pass --nan-policy ignore to leave it out of the statistics)"


class GroupLabels(Sequence[str]):
    """A file's group labels as one pyarrow string array: a Python string is made only for a label
    that is read (10^6 groups are not 10^6 ``str`` objects). Equal to the tuple of its labels;
    a slice is a tuple."""

    __slots__ = ("_labels",)

    def __init__(self, labels: Any) -> None:
        self._labels = labels

    def __len__(self) -> int:
        return len(self._labels)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...
    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        if isinstance(i, slice):
            return tuple(self._labels[i].to_pylist())
        if not -len(self) <= i < len(self):
            raise IndexError(f"group {i} of {len(self)}")
        return str(self._labels[i % len(self)].as_py())

    def __iter__(self) -> Iterator[str]:
        return iter(self._labels.to_pylist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GroupLabels | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, so not hashable like one

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        pc = importlib.import_module("pyarrow.compute")
        found = (
            int(pc.index(self._labels, value, start=start, end=stop).as_py())
            if isinstance(value, str)
            else -1
        )
        if found < 0:
            raise ValueError(f"{value!r} is not a group label")
        return found

    def __contains__(self, value: object) -> bool:
        try:
            self.index(value)
        except ValueError:
            return False
        return True

    def __repr__(self) -> str:
        return f"GroupLabels({len(self)} labels)"


@dataclass(frozen=True)
class RewardBatch:
    """A reward batch as the estimators take it.

    ``scores`` is ``(N, K)`` float64, ``group_ids`` ``(N,)`` integers (int32 from a file) indexing
    ``group_labels`` (numbered in order of first appearance; a tuple, or the labels of a file as
    :class:`GroupLabels`). ``rows``: the file row of each row, for a batch whose rows are not in
    file order (``read_rewards(..., group_order=True)``: sorted by group); None when they are.
    """

    scores: npt.NDArray[np.float64]
    group_ids: npt.NDArray[np.integer[Any]]
    group_labels: Sequence[str]
    components: tuple[str, ...]
    source: str
    rows: npt.NDArray[np.integer[Any]] | None = None

    @property
    def n_groups(self) -> int:
        return len(self.group_labels)


def _pa() -> Any:
    """pyarrow, its allocations made with the system's allocator (set once): freed parse buffers
    go back to the system, where pyarrow's default allocator keeps some 20-40 MB of a large file's
    for the rest of the process (``python -m benchmarks.explain_file``: peak and resident memory)."""
    try:
        pa = importlib.import_module("pyarrow")
    except ImportError:
        raise CliError(
            "reading reward files needs pyarrow, which is not installed; "
            "run `pip install 'corrgrpo-core[cli]'` (or `pip install pyarrow`)"
        ) from None
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
    return pa


def file_format(path: Path, given: str | None) -> str:
    """``given`` or the format the suffix names; a :class:`CliError` when neither says."""
    fmt = given or FORMATS.get(path.suffix.lower())
    if fmt not in set(FORMATS.values()):
        raise CliError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r}; "
            "use .csv, .tsv, .jsonl or .parquet, or pass --format"
        )
    return fmt


def check_file(path: Path) -> None:
    """A regular, readable file; anything else (missing, a folder, a FIFO, a device) is named."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except OSError as err:
        raise CliError(f"{path}: cannot open it ({err.strerror})") from None
    if stat.S_ISDIR(mode):
        raise CliError(f"{path}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "not a regular file"
        raise CliError(f"{path}: is {kind}; give a regular CSV, TSV, JSONL or Parquet file")
    try:
        with path.open("rb"):
            pass
    except OSError as err:
        raise CliError(f"{path}: cannot open it ({err.strerror})") from None


def _check_text(path: Path, fmt: str) -> None:
    """Refuse UTF-16/32 and binary files up front, with a message that says what they are
    (pyarrow would read them as text of one odd column)."""
    with path.open("rb") as handle:
        head = handle.read(1 << 16)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CliError(f"{path}: is UTF-16 (or UTF-32) text; save it as UTF-8 {fmt.upper()}")
    if head.startswith(b"PAR1"):
        raise CliError(f"{path}: is a Parquet file, not {fmt.upper()} text; pass --format parquet")
    if b"\x00" in head:
        raise CliError(f"{path}: holds binary data (NUL bytes), not {fmt.upper()} text")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 4:  # not just a character cut at the end of the sample
            raise CliError(f"{path}: is not UTF-8 text (byte {err.start + 1}); save it as UTF-8") from None


def _check_parquet(path: Path) -> None:
    with path.open("rb") as handle:
        head = handle.read(4)
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(size - 4, 0))
        tail = handle.read(4)
    if head != b"PAR1" or tail != b"PAR1" or size < 12:
        what = "CSV or JSONL text" if head[:1] in (b"{", b"[") or head.isascii() else "another format"
        raise CliError(f"{path}: is not a Parquet file (no Parquet magic bytes; it looks like {what})")


def _arrow_problem(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text[:300]


def _growing_blocks(pa: Any, path: Path, read: Callable[[int], Any]) -> Any:
    """``read(block_size)``, with larger blocks while pyarrow finds a field or line longer than one."""
    block, size = _BLOCK, path.stat().st_size
    while True:
        try:
            return read(block)
        except pa.ArrowInvalid as err:
            if "straddling" not in str(err) or block > size:
                raise
            block = min(block * 8, size + 1)


# --------------------------------------------------------------------------------------------------
# Columns: the needed columns of a file as pyarrow arrays.


@dataclass
class Columns:
    """The columns read from one file: ``data[name]`` a pyarrow array; a JSONL key absent from every
    row read is left out of ``data``.

    ``lines`` maps data rows to file lines when the line-by-line reader produced them (else computed
    on demand for error messages); ``skipped`` lists malformed lines left out (``skip_bad_lines``).
    """

    source: Path
    fmt: str
    header: list[str]
    data: dict[str, Any]
    num_rows: int
    lines: npt.NDArray[np.int64] | None = None
    skipped: list[str] = field(default_factory=list)

    def where(self, row: int) -> str:
        """``"row 3 (line 4)"`` for the 0-based data row ``row``."""
        if self.fmt == "parquet":
            return f"row {row + 1}"
        line = int(self.lines[row]) if self.lines is not None else _line_of(self.source, self.fmt, row)
        return f"row {row + 1} (line {line})" if line else f"row {row + 1}"


def _csv_rows(path: Path, fmt: str) -> tuple[TextIO, Any]:
    """Python's ``csv`` reader over a CSV/TSV file (byte-order mark dropped), for messages only."""
    csv.field_size_limit(1 << 30)  # the default 128 KiB refuses fields pyarrow reads fine
    handle = path.open(newline="", encoding="utf-8-sig", errors="replace")
    return handle, csv.reader(handle, delimiter=_DELIMITER[fmt])


def _line_of(path: Path, fmt: str, row: int) -> int:
    """The file line of data row ``row`` (0-based), skipping blank lines as the readers do."""
    try:
        if fmt in _DELIMITER:
            handle, reader = _csv_rows(path, fmt)
            with handle:
                next(reader, None)
                seen = -1
                for cells in reader:
                    if any(cell.strip() for cell in cells):
                        seen += 1
                        if seen == row:
                            return int(reader.line_num)
                return 0
        with path.open(encoding="utf-8", errors="replace") as text:
            seen = -1
            for number, line in enumerate(text, start=1):
                if line.strip():
                    seen += 1
                    if seen == row:
                        return number
    except (OSError, csv.Error):
        return 0
    return 0


def read_columns(
    path: str | Path,
    *,
    fmt: str | None = None,
    want: Sequence[str] | None = None,
    text: Sequence[str] = (),
    skip_bad_lines: bool = False,
) -> Columns:
    """Read the columns ``want`` (default: all) of a CSV, TSV, JSONL or Parquet file.

    Columns in ``want`` that the file does not have are left out of ``data``; the caller decides
    whether that is an error. ``text`` columns are labels: read as text in a CSV/TSV file (``007``
    and ``7`` are two groups), whole numbers kept whole in JSONL. With ``skip_bad_lines`` a JSONL line that is not a JSON
    object is left out and listed in ``skipped`` instead of being an error (a run killed mid-write).
    """
    path = Path(path)
    fmt = file_format(path, fmt)
    check_file(path)
    pa = _pa()
    want = None if want is None else list(dict.fromkeys(want))
    if fmt == "parquet":
        _check_parquet(path)
        return _read_parquet(pa, path, want)
    _check_text(path, fmt)
    if fmt == "jsonl":
        return _read_jsonl(pa, path, want, text, skip_bad_lines=skip_bad_lines)
    return _read_csv(pa, path, fmt, want, text)


def _read_parquet(pa: Any, path: Path, want: Sequence[str] | None) -> Columns:
    pq = importlib.import_module("pyarrow.parquet")
    try:
        handle = pq.ParquetFile(path)
        header = list(handle.schema_arrow.names)
        cols = [c for c in (want if want is not None else header) if c in header]
        table = handle.read(columns=cols)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise CliError(f"{path}: unreadable Parquet file ({_arrow_problem(err)})") from None
    return Columns(path, "parquet", header, {c: table.column(c) for c in cols}, table.num_rows)


def _csv_header(path: Path, fmt: str) -> list[str]:
    handle, reader = _csv_rows(path, fmt)
    with handle:
        try:
            header = next(reader, None)
        except csv.Error as err:
            raise CliError(f"{path} line 1: unreadable {fmt.upper()} header ({err})") from None
    if not header:
        raise CliError(f"{path}: the file is empty (expected a header row)")
    names = [name.strip() for name in header]
    if len(set(names)) != len(names):
        raise CliError(f"{path}: the header repeats a column name: {names}")
    return names


def _csv_options(
    pcsv: Any, fmt: str, header: list[str], block: int, *, newlines: bool = True, **convert: Any
) -> dict[str, Any]:
    """pyarrow's options for a CSV/TSV file whose (trimmed) header is ``header``: an empty cell is
    missing, a quoted empty string is text; ``newlines``: a value may hold a line break."""
    return {
        "read_options": pcsv.ReadOptions(block_size=block, column_names=header, skip_rows=1),
        "parse_options": pcsv.ParseOptions(delimiter=_DELIMITER[fmt], newlines_in_values=newlines),
        "convert_options": pcsv.ConvertOptions(
            null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=False, **convert
        ),
    }


def _read_csv(pa: Any, path: Path, fmt: str, want: Sequence[str] | None, text: Sequence[str]) -> Columns:
    pcsv = importlib.import_module("pyarrow.csv")
    header = _csv_header(path, fmt)
    cols = [c for c in (want if want is not None else header) if c in header]
    types = {c: pa.string() for c in text if c in cols}

    newlines = _has_quote(path)  # (without a quote no value holds a line break: faster blocks)

    def read(block: int) -> Any:
        options = _csv_options(
            pcsv, fmt, header, block, newlines=newlines, include_columns=cols, column_types=types
        )
        return pcsv.read_csv(path, **options)

    try:
        table = _growing_blocks(pa, path, read)
    except pa.ArrowInvalid as err:
        _diagnose_csv(path, fmt, header)
        raise CliError(f"{path}: unreadable {fmt.upper()} ({_arrow_problem(err)})") from None
    except (pa.ArrowException, OSError) as err:
        raise CliError(f"{path}: unreadable {fmt.upper()} ({_arrow_problem(err)})") from None
    return Columns(path, fmt, header, {c: table.column(c) for c in cols}, table.num_rows)


def _has_quote(path: Path) -> bool:
    """Whether the file holds a double quote, the only way a CSV/TSV value can hold a line break.

    pyarrow splits a file into blocks at line ends; told that no value holds one
    (``newlines_in_values=False``), it finds them without tracking quotes, faster, but a quoted
    line break at a block boundary is then misread without an error, so only a file without a
    quote is read so."""
    with path.open("rb") as handle:
        if path.stat().st_size == 0:
            return False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b'"') >= 0


def _diagnose_csv(path: Path, fmt: str, header: list[str]) -> None:
    """Find the row pyarrow refused (it does not say which): a wrong field count or bad text."""
    try:
        handle, reader = _csv_rows(path, fmt)
        with handle:
            next(reader, None)
            row = 0
            for cells in reader:
                if not any(cell.strip() for cell in cells):
                    continue
                row += 1
                if len(cells) != len(header):
                    raise CliError(
                        f"{path} row {row} (line {reader.line_num}): {len(cells)} fields, "
                        f"but the header has {len(header)}"
                    )
    except csv.Error as err:
        raise CliError(f"{path}: unreadable {fmt.upper()} ({err})") from None


def _json_sample(path: Path, limit: int = 200) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle):
            if len(rows) >= limit:
                break
            try:
                obj = json.loads(line[3:] if number == 0 and line.startswith(b"\xef\xbb\xbf") else line)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                rows.append(obj)
    return rows


def _arrow_type(pa: Any, values: list[Any], *, label: bool = False) -> Any:
    """The type of JSON ``values``: numbers are float64 (a column of whole numbers may hold a
    fraction further down), except the whole numbers of a label column."""
    seen = [v for v in values if v is not None]
    if not seen:
        return None
    if all(isinstance(v, bool) for v in seen):
        return pa.bool_()
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
        if label and all(isinstance(v, int) and abs(v) < 2**63 for v in seen):
            return pa.int64()
        return pa.float64()
    if all(isinstance(v, str) for v in seen):
        return pa.string()
    return None


def _read_jsonl(
    pa: Any, path: Path, want: Sequence[str] | None, text: Sequence[str], *, skip_bad_lines: bool
) -> Columns:
    """pyarrow's ``read_json`` with the types of the first rows, always explicit: its type inference
    recurses into nested values (a line nested 20,000 deep crashes the process), while with a schema
    it skips keys it is not asked for and refuses a value of another type. Anything it refuses
    (a malformed line, a type that changes) is read line by line to say where and what."""
    pj = importlib.import_module("pyarrow.json")
    sample = _json_sample(path)
    header = list(dict.fromkeys(k for row in sample[:1] for k in row))
    keys = list(dict.fromkeys(k for row in sample for k in row))
    cols = [c for c in (want if want is not None else header) if c in keys]
    types = {c: _arrow_type(pa, [row.get(c) for row in sample], label=c in text) for c in cols}
    if sample and all(t is not None for t in types.values()):
        schema = pa.schema([(c, types[c]) for c in cols])

        def read(block: int) -> Any:
            return pj.read_json(
                path,
                read_options=pj.ReadOptions(block_size=block),
                parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
            )

        try:
            table = _growing_blocks(pa, path, read)
        except (pa.ArrowException, OSError):
            pass  # the line-by-line reader says where and what
        else:
            present = {c: table.column(c) for c in cols if table.column(c).null_count < table.num_rows}
            return Columns(path, "jsonl", header, present, table.num_rows)
    return _read_jsonl_lines(pa, path, want, skip_bad_lines=skip_bad_lines)


def _json_problem(line: str) -> tuple[Any, str | None]:
    """The object on one line, or why it is not one."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        return None, f"invalid JSON ({err.msg})"
    except ValueError as err:  # Python refuses integers of more than 4300 digits
        digits = re.search(r"value has (\d+) digits", str(err))
        size = f"of {digits.group(1)} digits" if digits else "too long"
        return None, f"an integer {size}, too large for a 64-bit float"
    except RecursionError:
        return None, "JSON nested too deeply"
    return obj, None if isinstance(obj, dict) else f"expected a JSON object, got {type(obj).__name__}"


def _read_jsonl_lines(pa: Any, path: Path, want: Sequence[str] | None, *, skip_bad_lines: bool) -> Columns:
    """The slow, exact reader: one ``json.loads`` per line; names the line of any problem."""
    header: list[str] = []
    values: dict[str, list[Any]] = {}
    lines: list[int] = []
    skipped: list[str] = []
    try:
        with path.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                obj, problem = _json_problem(line)
                if problem is not None:
                    if skip_bad_lines:
                        skipped.append(f"line {number}: {problem}")
                        continue
                    raise CliError(f"{path} row {len(lines) + 1} (line {number}): {problem}")
                if not header:
                    header = list(obj)
                row = len(lines)
                for key in want if want is not None else header:
                    if key in obj:
                        column = values.setdefault(key, [None] * row)
                        column.append(obj[key])
                for column in values.values():
                    if len(column) == row:
                        column.append(None)
                lines.append(number)
    except UnicodeDecodeError as err:
        raise CliError(f"{path}: is not UTF-8 text (byte {err.start + 1}); save it as UTF-8") from None
    data = {k: _python_column(pa, path, v, lines, k) for k, v in values.items()}
    return Columns(path, "jsonl", header, data, len(lines), np.asarray(lines, dtype=np.int64), skipped)


def _python_column(pa: Any, path: Path, values: list[Any], lines: list[int], name: str) -> Any:
    """A pyarrow array from JSON values of mixed types: numbers (and bools) as float64, else text."""
    if all(v is None or isinstance(v, (bool, int, float)) for v in values):
        out = np.empty(len(values), dtype=np.float64)
        mask = np.zeros(len(values), dtype=bool)
        for i, v in enumerate(values):
            if v is None:
                mask[i] = True
                out[i] = 0.0
                continue
            try:
                out[i] = float(v)
            except OverflowError:
                raise CliError(
                    f"{path} row {i + 1} (line {lines[i]}): column {name!r}: an integer of "
                    f"{len(str(abs(v)))} digits, too large for a 64-bit float"
                ) from None
        return pa.array(out, mask=mask)
    return pa.array([_text(v) for v in values], type=pa.string())


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return "\x00" + json.dumps(value)[:40]  # marked: not a scalar (reported as such)
    return str(value)


def column_names(path: str | Path, fmt: str | None = None) -> list[str]:
    """The file's column names: a CSV/TSV header alone (no block parsed, nothing left in pyarrow's
    pool), else those of :func:`probe_columns`."""
    path = Path(path)
    fmt = file_format(path, fmt)
    if fmt not in _DELIMITER:
        return list(probe_columns(path, fmt))
    check_file(path)
    _check_text(path, fmt)
    return _csv_header(path, fmt)


def probe_columns(path: str | Path, fmt: str | None = None) -> dict[str, str]:
    """Column name -> ``"number"`` (numbers or bools), ``"text"`` or ``"other"``, from the schema
    (Parquet), the first block (CSV/TSV) or the first rows (JSONL); cheap, for choosing what to read."""
    path = Path(path)
    fmt = file_format(path, fmt)
    check_file(path)
    pa = _pa()
    if fmt == "jsonl":
        _check_text(path, fmt)
        sample = _json_sample(path)
        keys = list(dict.fromkeys(k for row in sample for k in row))
        kinds = {}
        for key in keys:
            t = _arrow_type(pa, [row.get(key) for row in sample])
            kinds[key] = "other" if t is None else "text" if pa.types.is_string(t) else "number"
        return kinds
    if fmt == "parquet":
        _check_parquet(path)
        try:
            schema = importlib.import_module("pyarrow.parquet").read_schema(path)
        except (pa.ArrowException, OSError) as err:
            raise CliError(f"{path}: unreadable Parquet file ({_arrow_problem(err)})") from None
    else:
        _check_text(path, fmt)
        pcsv = importlib.import_module("pyarrow.csv")
        header = _csv_header(path, fmt)
        try:  # the streaming reader infers the types from its first block only
            with pcsv.open_csv(path, **_csv_options(pcsv, fmt, header, _BLOCK)) as reader:
                schema = reader.schema
        except (pa.ArrowException, OSError) as err:
            raise CliError(f"{path}: unreadable {fmt.upper()} ({_arrow_problem(err)})") from None
    out = {}
    for f in schema:
        numeric = pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)
        out[f.name] = "number" if numeric else "text" if pa.types.is_string(f.type) else "other"
    return out


# --------------------------------------------------------------------------------------------------
# From columns to a batch.


def read_rewards(
    path: str | Path,
    *,
    group_col: str = "group",
    components: Sequence[str] | None = None,
    file_format: str | None = None,
    allow_nan: bool = False,
    group_order: bool = False,
) -> RewardBatch:
    """Read a reward batch from ``path``.

    ``components`` picks the reward columns (default: every column except ``group_col``, in file
    order). ``file_format`` is ``"csv"``, ``"tsv"``, ``"jsonl"`` or ``"parquet"`` (default: from the
    suffix). Missing values are an error unless ``allow_nan``, which turns them into NaN.
    ``group_order``: the rows sorted by group (file order within each; ``RewardBatch.rows`` their
    file rows), as :func:`corrgrpo_core.group_stats` takes them without a sort or a gather.
    """
    want = None if components is None else [group_col, *components]
    cols = read_columns(path, fmt=file_format, want=want, text=[group_col])
    _pa().default_memory_pool().release_unused()  # the reader's parse buffers, before any conversion
    names = [c for c in cols.header if c != group_col] if components is None else list(components)
    batch = batch_from_columns(
        cols,
        group_col=group_col,
        components=names,
        allow_nan=allow_nan,
        consume=True,
        group_order=group_order,
    )
    del cols
    _pa().default_memory_pool().release_unused()  # the file's buffers are numpy arrays now
    return batch


def batch_from_columns(
    cols: Columns,
    *,
    group_col: str,
    components: Sequence[str],
    allow_nan: bool,
    rows: npt.NDArray[np.int64] | None = None,
    source: str | None = None,
    consume: bool = False,
    group_order: bool = False,
) -> RewardBatch:
    """The batch of ``rows`` (default: all) of ``cols``; every bad value is named by row and column.

    ``consume`` drops each column from ``cols`` once converted (less peak memory for one big file);
    ``group_order`` sorts the rows by group (see :func:`read_rewards`; ``rows`` must be None).
    """
    src = source or str(cols.source)
    if cols.num_rows == 0:
        raise CliError(f"{src}: no data rows")
    if group_col not in cols.header and group_col not in cols.data:
        raise CliError(
            f"{src}: group column {group_col!r} not found; columns are {cols.header} "
            "(choose one with --group-col)"
        )
    names = list(components)
    if not names:
        raise CliError(f"{src}: no reward columns besides the group column {group_col!r}")
    if group_col in names:
        raise CliError(f"{src}: {group_col!r} is the group column and cannot also be a reward component")
    missing = [c for c in names if c not in cols.header and c not in cols.data]
    if missing:
        raise CliError(f"{src}: reward column(s) {missing} not found; columns are {cols.header}")
    if len(set(names)) != len(names):
        raise CliError(f"{src}: reward columns repeat: {names}")
    n = cols.num_rows if rows is None else rows.size
    pa = _pa()
    scores = np.empty((n, len(names)), dtype=np.float64)
    for k, name in enumerate(names):
        numeric_column(cols, name, allow_nan=allow_nan, rows=rows, out=scores[:, k])
        if consume:
            cols.data.pop(name, None)
            pa.default_memory_pool().release_unused()
    codes = label_groups(cols, group_col, rows=rows, consume=consume)
    if not group_order:
        return RewardBatch(scores, codes.ids(), codes.labels, tuple(names), src)
    assert rows is None
    order = codes.order()
    codes.found_ids = None  # (the file order's ids: not needed)
    scores = np.take(scores, order, axis=0)  # (the file order's matrix is freed)
    ids = np.repeat(np.arange(codes.sizes.size, dtype=np.int32), codes.sizes)
    return RewardBatch(scores, ids, codes.labels, tuple(names), src, rows=order)


def _take(pa: Any, column: Any, rows: npt.NDArray[np.int64] | None) -> Any:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column if rows is None else column.take(pa.array(rows))


def numeric_column(
    cols: Columns,
    name: str,
    *,
    allow_nan: bool,
    rows: npt.NDArray[np.int64] | None = None,
    out: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Column ``name`` as float64 (bools as 0/1, "true"/"yes"/"false"/"no" in text too), written
    into ``out`` when given (a strided column of the score matrix: no full-size temporaries).

    A missing value is NaN with ``allow_nan`` and an error without; infinities, values that are not
    numbers and numbers too large for float64 are errors naming the first such row.
    """
    pa = _pa()
    n = cols.num_rows if rows is None else rows.size
    result = np.empty(n, dtype=np.float64) if out is None else out

    def where(i: int) -> str:
        row = i if rows is None else int(rows[i])
        return f"{cols.source} {cols.where(row)}: column {name!r}"

    if name not in cols.data:  # absent in every row read
        if not allow_nan:
            raise CliError(f"{where(0)}: missing value {_MISSING}")
        result[:] = np.nan
        return result
    column = cols.data[name] if rows is None else _take(pa, cols.data[name], rows)
    if not _plain_numbers(pa, column, result):
        result[:] = _floats(pa, cols, name, column, where, rows, allow_nan=allow_nan)
    return result


def _plain_numbers(pa: Any, column: Any, out: npt.NDArray[np.float64]) -> bool:
    """The common case of :func:`numeric_column`, written block by block into ``out`` (no cast, no
    copy of the column, one pass over each block to check): floats, bools or integers that float64
    holds exactly, no missing or infinite value. False where the column is anything else (``out`` then unspecified)."""
    kind = column.type
    if column.null_count or not (
        pa.types.is_floating(kind) or pa.types.is_boolean(kind) or pa.types.is_integer(kind)
    ):
        return False
    at = 0
    for block in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        values = block.to_numpy(zero_copy_only=False)
        if values.dtype.kind in "iu" and values.size and max(-int(values.min()), int(values.max())) > 2**53:
            return False  # (not every such integer has a float64: the checked conversion says which)
        if values.dtype.kind == "f":  # a finite sum: every value finite (huge ones may sum to inf)
            with np.errstate(over="ignore", invalid="ignore"):
                if not math.isfinite(float(np.sum(values))):
                    return False
        out[at : at + len(block)] = values
        at += len(block)
    return True


def _floats(
    pa: Any,
    cols: Columns,
    name: str,
    arr: Any,
    where: Callable[[int], str],
    rows: npt.NDArray[np.int64] | None,
    *,
    allow_nan: bool,
) -> npt.NDArray[np.float64]:
    """One pyarrow (chunked) array as float64 (see :func:`numeric_column`); ``where(i)`` names row i."""
    pc = importlib.import_module("pyarrow.compute")
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    text = None
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        text = arr
        trimmed = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
        trimmed = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)
        is_true = pc.is_in(trimmed, value_set=pa.array(sorted(_TRUE)))
        is_false = pc.is_in(trimmed, value_set=pa.array(sorted(_FALSE)))
        numeric = pc.if_else(pc.or_(is_true, is_false), pa.scalar(None, pa.string()), trimmed)
        try:
            parsed = pc.cast(numeric, pa.float64())
        except pa.ArrowInvalid:
            for i, value in enumerate(numeric.to_pylist()):
                if value is None:
                    continue
                try:
                    float(value)
                except ValueError:
                    shown = text[i].as_py()
                    if shown.startswith("\x00"):
                        raise CliError(f"{where(i)}: {shown[1:]} is not a number") from None
                    raise CliError(f"{where(i)}: {_short(shown)} is not a number") from None
            raise
        arr = pc.if_else(is_true, 1.0, pc.if_else(is_false, 0.0, parsed))
    elif pa.types.is_null(arr.type):
        arr = pa.nulls(len(arr), pa.float64())
    elif not (
        pa.types.is_integer(arr.type)
        or pa.types.is_floating(arr.type)
        or pa.types.is_boolean(arr.type)
        or pa.types.is_decimal(arr.type)
    ):
        first = int(np.flatnonzero(~np.asarray(arr.is_null()))[0]) if arr.null_count < len(arr) else 0
        raise CliError(f"{where(first)}: {arr[first].as_py()!r} is not a number ({arr.type} values)")
    try:
        arr = pc.cast(arr, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise CliError(f"{where(0)}: cannot read as numbers ({_arrow_problem(err)})") from None
    values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
    null = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool) if arr.null_count else None
    if null is not None:
        values = np.where(null, np.nan, values)
        if not allow_nan:
            raise CliError(f"{where(int(np.argmax(null)))}: missing value {_MISSING}")
    finite = np.isfinite(values)
    if not finite.all():
        bad = ~finite if null is None else ~finite & ~null
        inf_rows = np.isinf(values)
        if inf_rows.any():
            i = int(np.argmax(inf_rows))
            row = i if rows is None else int(rows[i])
            raw = text[i].as_py() if text is not None else _csv_cell(cols, row, name)
            if raw is not None:
                raise CliError(f"{where(i)}: {raw.strip()!r} is infinite")
            raise CliError(f"{where(i)}: a number too large for a 64-bit float (beyond 1.8e308)")
        nan_rows = np.isnan(values) & bad
        if nan_rows.any() and not allow_nan:
            raise CliError(f"{where(int(np.argmax(nan_rows)))}: NaN {_MISSING}")
    return values


def group_codes(
    cols: Columns, group_col: str, *, rows: npt.NDArray[np.int64] | None = None
) -> tuple[npt.NDArray[np.int32], Sequence[str]]:
    """Codes 0..G-1 (int32) in order of first appearance and the labels (see :func:`label_groups`)."""
    codes = label_groups(cols, group_col, rows=rows)
    return codes.ids(), codes.labels


@dataclass
class GroupCodes:
    """A column of group labels as groups 0..G-1 in order of first appearance: the ``labels``,
    each group's row count, and the file's rows sorted by group (stable) and each row's group,
    each found on the way or computed when first asked for."""

    labels: Sequence[str]
    sizes: npt.NDArray[np.int64]
    found_order: npt.NDArray[np.integer[Any]] | None = None
    found_ids: npt.NDArray[np.int32] | None = None

    def ids(self) -> npt.NDArray[np.int32]:
        """Each row's group (file order)."""
        if self.found_ids is None:
            assert self.found_order is not None
            ids = np.empty(self.found_order.size, np.int32)
            ids[self.found_order] = np.repeat(np.arange(self.sizes.size, dtype=np.int32), self.sizes)
            self.found_ids = ids
        return self.found_ids

    def order(self) -> npt.NDArray[np.integer[Any]]:
        """The rows sorted by group, in file order within each group."""
        if self.found_order is None:
            ids = self.ids()
            in_order = ids.size < 2 or bool(np.all(ids[1:] >= ids[:-1]))  # (no sort, no copy then)
            self.found_order = np.arange(ids.size) if in_order else np.argsort(ids, kind="stable")
        return self.found_order

    def first_rows(self) -> npt.NDArray[np.int64]:
        """Each group's first row."""
        if self.found_order is not None:
            return np.asarray(self.found_order[np.cumsum(self.sizes) - self.sizes], dtype=np.int64)
        ids = self.ids()
        first = np.full(self.sizes.size, ids.size, np.int64)
        np.minimum.at(first, ids, np.arange(ids.size))
        return first


def label_groups(
    cols: Columns, group_col: str, *, rows: npt.NDArray[np.int64] | None = None, consume: bool = False
) -> GroupCodes:
    """The groups of column ``group_col`` (of ``rows``, default all): labels trimmed (`` a`` and
    ``a`` are one group), checked on the labels, not on every row. Common label shapes are
    grouped by a sort (:func:`_label_runs`), the others dictionary-encoded by pyarrow.
    ``consume`` drops the column from ``cols``."""
    pa = _pa()
    src = str(cols.source)

    def where(i: int) -> str:
        return cols.where(i if rows is None else int(rows[i]))

    if group_col not in cols.data:
        raise CliError(f"{src} {where(0)}: empty group label in column {group_col!r}")
    column = cols.data.pop(group_col) if consume else cols.data[group_col]
    arr = _label_text(pa, src, group_col, _take(pa, column, rows))
    del column  # (consumed: the joined copy is all that is left of it)
    if len(arr) == 0:
        return GroupCodes(
            GroupLabels(pa.array([], pa.string())), np.zeros(0, np.int64), np.zeros(0, np.int64)
        )
    runs = _label_runs(pa, arr)
    if runs is not None:
        sizes, order, dictionary = runs
        codes = GroupCodes(GroupLabels(dictionary), sizes, found_order=order)
        if _plain_labels(pa, dictionary):
            return codes  # (nothing to trim, none empty: the checks below would pass)
    pc = importlib.import_module("pyarrow.compute")
    if runs is None:
        encoded = pc.dictionary_encode(arr)
        if encoded.indices.null_count:
            i = int(np.argmax(np.asarray(encoded.indices.is_null().to_numpy(zero_copy_only=False))))
            raise CliError(f"{src} {where(i)}: empty group label in column {group_col!r}")
        ids = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
        dictionary = encoded.dictionary
        codes = GroupCodes(
            GroupLabels(dictionary), np.bincount(ids, minlength=len(dictionary)), found_ids=ids
        )
    labels = pc.utf8_trim_whitespace(dictionary)
    bad = np.asarray(
        pc.or_(pc.equal(labels, ""), pc.starts_with(labels, "\x00")).to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    if bad.any():
        raise CliError(
            f"{src} {where(int(codes.first_rows()[bad].min()))}: empty group label in column {group_col!r}"
        )
    if not pc.all(pc.equal(labels, dictionary)).as_py():  # " a" and "a" are one group
        merged = pc.dictionary_encode(labels)
        ids = np.asarray(merged.indices.to_numpy(zero_copy_only=False), dtype=np.int32)[codes.ids()]
        codes = GroupCodes(
            GroupLabels(merged.dictionary), np.bincount(ids, minlength=len(merged.dictionary)), found_ids=ids
        )
    return codes


def _label_text(pa: Any, src: str, group_col: str, arr: Any) -> Any:
    """A column of labels as one pyarrow string array (chunks joined, dictionaries decoded,
    numbers written as text); an empty label is a null there."""
    kind = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(kind)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        pc = importlib.import_module("pyarrow.compute")
        try:
            arr = pc.cast(arr, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise CliError(f"{src}: group column {group_col!r} holds {kind} values, not labels") from None
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _string_buffers(pa: Any, arr: Any) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.uint8]]:
    """A pyarrow string array's offsets (N + 1, into the data) and data bytes, as numpy views."""
    wide = pa.types.is_large_string(arr.type)
    _, offset_buffer, data_buffer = arr.buffers()
    offsets: npt.NDArray[np.integer[Any]] = np.frombuffer(
        offset_buffer, np.int64 if wide else np.int32, len(arr) + 1, arr.offset * (8 if wide else 4)
    )
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(1, np.uint8)
    return offsets, data


def _strings_at(pa: Any, arr: Any, rows: npt.NDArray[np.integer[Any]]) -> Any:
    """``arr.take(rows)`` for a string array, built from its buffers (without pyarrow.compute)."""
    offsets, data = _string_buffers(pa, arr)
    starts = offsets[rows].astype(np.int64)
    lengths = offsets[rows + 1] - starts
    ends = np.cumsum(lengths)
    at = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if ends.size else 0)
    out = np.zeros(rows.size + 1, np.int64 if pa.types.is_large_string(arr.type) else np.int32)
    out[1:] = ends
    return pa.Array.from_buffers(arr.type, rows.size, [None, pa.py_buffer(out), pa.py_buffer(data[at])])


def _plain_labels(pa: Any, labels: Any) -> bool:
    """Whether every label starts and ends with a printable ASCII character other than a space:
    none is empty, starts with NUL or has white space to trim (as pyarrow's checks would find)."""
    offsets, data = _string_buffers(pa, labels)
    if len(labels) == 0 or bool(np.any(offsets[1:] == offsets[:-1])):
        return False
    edges = np.concatenate([data[offsets[:-1]], data[offsets[1:] - 1]])
    return bool(np.all((edges > 0x20) & (edges < 0x7F)))


def _label_runs(pa: Any, arr: Any) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.integer[Any]], Any] | None:
    """The groups of a string array without a hash table, for the common label shapes (numbers,
    ``prompt_00042``, short names): (each group's row count, the rows sorted by group in file order
    within each, the labels), groups in order of first appearance; None for a missing label, or
    labels too long or too varied for this.

    Each label becomes one integer over its bytes (at byte j the byte's offset from the smallest
    there, one digit of a mixed radix over the bytes that vary; a label without byte j a digit of
    its own), exact while the radices' product times 2^bits(N) fits 63 bits. One sort of the
    distinct integers ``label << bits(N) | row`` (numpy's vectorised sort) puts each group's rows
    together in file order, and each group's first row gives its place in order of first
    appearance: a third of the time of pyarrow's hashing of the labels (238,000 groups in 1.9M
    rows, ``python -m benchmarks.explain_file --stages``), and it is the order
    :func:`corrgrpo_core.group_stats` would otherwise sort for.
    """
    n = len(arr)
    if arr.null_count or n == 0:
        return None
    offsets, data = _string_buffers(pa, arr)
    lengths = np.diff(offsets)
    width, bits = int(lengths.max()), n.bit_length()
    if width > 64:
        return None
    fixed = (
        np.asarray(data[int(offsets[0]) : int(offsets[-1])]).reshape(n, width)
        if width == int(lengths.min())
        else None
    )
    key, space = np.zeros(n, np.int64), 1
    for j in range(width):
        digit, radix = _byte_digit(data, offsets, lengths, fixed, j)
        if radix > 1:
            space *= radix
            if space >= 1 << (63 - bits):
                return None
            key *= radix
            key += digit
    key <<= bits
    index: type[np.integer[Any]] = np.int32 if bits < 32 else np.int64  # (rows: int32 up to 2^31)
    for a in range(0, n, _CHUNK):  # (a slice at a time: the only temporary of N int64 is the key)
        key[a : a + _CHUNK] |= np.arange(a, min(a + _CHUNK, n))
    key.sort()
    rows: npt.NDArray[np.integer[Any]] = key.astype(index)  # (the low bits: the row)
    rows &= (1 << bits) - 1
    key >>= bits
    new = np.empty(n, np.bool_)
    new[0] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    del key
    starts = np.flatnonzero(new)  # each label's run, labels in key order
    first = rows[starts]
    rank = np.argsort(first)  # the runs in order of first appearance
    sizes = np.diff(starts, append=n)[rank]
    at = np.repeat((starts[rank] - (np.cumsum(sizes) - sizes)).astype(index), sizes)
    for a in range(0, n, _CHUNK):
        at[a : a + _CHUNK] += np.arange(a, min(a + _CHUNK, n), dtype=index)
    return sizes, rows[at], _strings_at(pa, arr, first[rank])


def _byte_digit(
    data: npt.NDArray[np.uint8],
    offsets: npt.NDArray[np.integer[Any]],
    lengths: npt.NDArray[np.integer[Any]],
    fixed: npt.NDArray[np.uint8] | None,
    j: int,
) -> tuple[npt.NDArray[Any], int]:
    """Byte j of every label as a digit 0..radix-1 (for :func:`_label_runs`), and the radix."""
    if fixed is not None:  # labels of one length: byte j is a column of the block
        column = fixed[:, j]
        low, high = int(column.min()), int(column.max())
        return (column - np.uint8(low) if low else column), high - low + 1
    has = lengths > j
    column = data[np.minimum(offsets[:-1] + j, data.size - 1)]
    low, high = int(column[has].min(initial=255)), int(column[has].max(initial=0))
    if bool(has.all()):
        return column - np.uint8(low), high - low + 1
    return np.where(has, column.astype(np.int64) - (low - 1), 0), max(high - low + 2, 2)


def _short(text: str, limit: int = 60) -> str:
    """``repr`` of a value for a one-line message, cut in the middle when long."""
    shown = repr(text)
    return (
        shown
        if len(shown) <= limit
        else f"{shown[: limit // 2]}...{shown[-limit // 2 :]} ({len(text)} chars)"
    )


def _csv_cell(cols: Columns, row: int, name: str) -> str | None:
    """The text of one CSV/TSV cell that pyarrow read as an infinity (for messages)."""
    if cols.fmt not in _DELIMITER:
        return None
    line = _line_of(cols.source, cols.fmt, row)
    handle, reader = _csv_rows(cols.source, cols.fmt)
    with handle:
        for cells in reader:
            if reader.line_num == line:
                cell: str | None = dict(zip(cols.header, cells, strict=False)).get(name)
                if cell is not None and cell.strip().lower().lstrip("+-") in {"inf", "infinity"}:
                    return cell
                return None
    return None


def _number(value: object, what: str, *, allow_nan: bool) -> float:
    if isinstance(value, bool):
        return float(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        if allow_nan:
            return math.nan
        raise CliError(f"{what}: missing value {_MISSING}")
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
        raise CliError(f"{what}: NaN {_MISSING}")
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
