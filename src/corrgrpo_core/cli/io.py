"""Read reward batches (CSV, JSONL, Parquet) into a group-id vector and a score matrix.

One row per rollout: a group column and one numeric column per reward component. Files are read
columnar with pyarrow (only the columns needed) and grouped with vectorised code; a file that the
fast reader refuses (a malformed line, a value of another type) is re-read line by line to say
where the problem is. Every problem is a :class:`CliError` naming the file, the row (and line, for
text files) and the column, so a user can fix the file without reading a traceback.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import importlib
import importlib.util
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .plugin import CliError

__all__ = [
    "CliError",
    "Columns",
    "GroupCodes",
    "NoStream",
    "RewardBatch",
    "Unstreamable",
    "batch_from_columns",
    "check_file",
    "file_format",
    "jemalloc_default",
    "markdown_table",
    "parse_weights",
    "probe_columns",
    "read_columns",
    "read_rewards",
    "release_arrow_memory",
    "returning_pool",
    "stream_columns",
    "stream_group_codes",
    "stream_scores",
]

_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}
# pyarrow's JSON parser recurses per nesting level and crashes the process somewhere past 10^4
# levels; no reward file nests this deep, so deeper lines are refused before pyarrow sees them.
MAX_JSON_DEPTH = 1000
_BLOCK = 1 << 22  # bytes per pyarrow block (grown for longer lines)
_TEXT_BLOCK = 1 << 20  # bytes per block of lines parsed at once when streaming (its parse takes ~5x)
_STREAM_ROWS = 1 << 15  # rows per Parquet batch when streaming
_PARQUET_BUFFER = 1 << 18  # bytes read at once per column when streaming (1 MB: +5 MB of peak)
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


@dataclass(frozen=True)
class RewardBatch:
    """A reward batch as the estimators take it.

    ``scores`` is ``(N, K)`` float64, ``group_ids`` ``(N,)`` int64 indexing ``group_labels`` (numbered
    in order of first appearance).
    """

    scores: npt.NDArray[np.float64]
    group_ids: npt.NDArray[np.int64]
    group_labels: tuple[str, ...]
    components: tuple[str, ...]
    source: str

    @property
    def n_groups(self) -> int:
        return len(self.group_labels)


def _pa() -> Any:
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        raise CliError(
            "reading reward files needs pyarrow, which is not installed; "
            "run `pip install 'corrgrpo-core[cli]'` (or `pip install pyarrow`)"
        ) from None


def file_format(path: Path, given: str | None) -> str:
    """``given`` or the format the suffix names; a :class:`CliError` when neither says."""
    fmt = given or _FORMATS.get(path.suffix.lower())
    if fmt not in {"csv", "jsonl", "parquet"}:
        raise CliError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r}; "
            "use .csv, .jsonl or .parquet, or pass --format"
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
        raise CliError(f"{path}: is {kind}; give a regular CSV, JSONL or Parquet file")
    try:
        with path.open("rb"):
            pass
    except OSError as err:
        raise CliError(f"{path}: cannot open it ({err.strerror})") from None


def _check_text(path: Path, fmt: str) -> None:
    """Refuse UTF-16/32 and binary files up front, with a message that says what they are."""
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


def _check_json_depth(path: Path) -> None:
    """:func:`_scan_json_depth` once per file version (a streamed read passes over it several times)."""
    info = path.stat()
    _json_depth_checked(path, info.st_size, info.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _json_depth_checked(path: Path, size: int, mtime_ns: int) -> None:
    _scan_json_depth(path)


def _scan_json_depth(path: Path) -> None:
    """Refuse a line nested deeper than :data:`MAX_JSON_DEPTH`, in linear time.

    A line cannot nest deeper than it has opening brackets, so only lines with more than the limit
    (counted blockwise with numpy, strings included) are tokenised to measure the true depth.
    """
    suspicious: list[int] = []  # byte offsets of line starts
    carry = line_start = offset = 0  # brackets so far on the unfinished line, where it starts
    with path.open("rb") as handle:
        while block := handle.read(_TEXT_BLOCK):
            a = np.frombuffer(block, dtype=np.uint8)
            opens = np.cumsum((a == 0x5B) | (a == 0x7B), dtype=np.int32)
            newlines = np.flatnonzero(a == 0x0A)
            if newlines.size:
                per_line = np.diff(opens[newlines], prepend=0).astype(np.int64)
                per_line[0] += carry
                starts = np.concatenate([[line_start], offset + newlines[:-1] + 1])
                suspicious.extend(int(s) for s in starts[per_line > MAX_JSON_DEPTH])
                line_start = offset + int(newlines[-1]) + 1
                carry = int(opens[-1] - opens[newlines[-1]])
            else:
                carry += int(opens[-1])
            offset += a.size
    if carry > MAX_JSON_DEPTH:
        suspicious.append(line_start)
    for start in suspicious:
        with path.open("rb") as handle:
            handle.seek(start)
            line = handle.readline()
        depth = deepest = 0
        for token in _JSON_TOKEN.finditer(line):
            t = token.group()
            if t in (b"[", b"{"):
                depth += 1
                deepest = max(deepest, depth)
            elif t in (b"]", b"}"):
                depth -= 1
        if deepest > MAX_JSON_DEPTH:
            number = 1
            with path.open("rb") as handle:
                while handle.tell() < start:
                    number += handle.read(min(_BLOCK, start - handle.tell())).count(b"\n")
            raise CliError(
                f"{path} line {number}: JSON nested {deepest} levels deep (at most {MAX_JSON_DEPTH} read)"
            )


# --------------------------------------------------------------------------------------------------
# Columns: the needed columns of a file as pyarrow arrays, with where each row came from.


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
    offset: int = 0  # file row of this object's row 0 (a slice of a streamed file)

    def where(self, row: int) -> str:
        """``"row 3 (line 4)"`` for the 0-based data row ``row``."""
        row += self.offset
        if self.fmt == "parquet":
            return f"row {row + 1}"
        line = int(self.lines[row]) if self.lines is not None else _line_of(self.source, self.fmt, row)
        return f"row {row + 1} (line {line})" if line else f"row {row + 1}"


def _line_of(path: Path, fmt: str, row: int) -> int:
    """The file line of data row ``row`` (0-based), skipping blank lines as the readers do."""
    csv.field_size_limit(1 << 30)  # the default 128 KiB refuses fields pyarrow reads fine
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            if fmt == "csv":
                reader = csv.reader(handle)
                next(reader, None)
                seen = -1
                for cells in reader:
                    if any(cell.strip() for cell in cells):
                        seen += 1
                        if seen == row:
                            return reader.line_num
                return 0
            seen = -1
            for number, line in enumerate(handle, start=1):
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
    skip_bad_lines: bool = False,
) -> Columns:
    """Read the columns ``want`` (default: all) of a CSV, JSONL or Parquet file.

    Columns in ``want`` that the file does not have are left out of ``data``; the caller decides
    whether that is an error. With ``skip_bad_lines`` a JSONL line that is not a JSON object is left
    out and listed in ``skipped`` instead of being an error (a run killed mid-write).
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
    if fmt == "csv":
        return _read_csv(pa, path, want)
    _check_json_depth(path)
    return _read_jsonl(pa, path, want, skip_bad_lines=skip_bad_lines)


class NoStream(Exception):
    """The file cannot be read batch by batch (types that change, malformed lines): read it whole."""


def stream_columns(
    path: str | Path, *, fmt: str | None = None, want: Sequence[str], numeric: Sequence[str] = ()
) -> Iterator[Columns]:
    """The columns ``want`` of a file batch by batch, each batch a :class:`Columns` whose ``offset``
    is its first row in the file; raises :class:`NoStream` where only the whole-file reader can
    read (or explain) the file.

    Text files are cut into blocks of whole lines here and each block parsed alone: pyarrow's
    streaming readers hold several times more memory. In a CSV file the first block fixes each
    column's type, as pyarrow's streaming reader does, except for ``numeric`` columns (read as
    numbers whatever their type: a float column may start with whole numbers).
    """
    path = Path(path)
    fmt = file_format(path, fmt)
    check_file(path)
    pa = _pa()
    want = list(dict.fromkeys(want))
    if fmt == "parquet":
        _check_parquet(path)
        pq = importlib.import_module("pyarrow.parquet")
        try:  # read in 256 KB pieces, not a whole column chunk buffered ahead
            handle = pq.ParquetFile(path, buffer_size=_PARQUET_BUFFER, pre_buffer=False)
            header = list(handle.schema_arrow.names)
            batches = handle.iter_batches(
                columns=[c for c in want if c in header], batch_size=_STREAM_ROWS, use_threads=False
            )
        except (pa.ArrowException, OSError, ValueError) as err:
            raise CliError(f"{path}: unreadable Parquet file ({_arrow_problem(err)})") from None
    elif fmt == "csv":
        _check_text(path, fmt)
        header = _csv_header(path)
        batches = _csv_batches(pa, path, header, [c for c in want if c in header], set(numeric))
    else:
        _check_text(path, fmt)
        _check_json_depth(path)
        sample = _json_sample(path)
        header = list(dict.fromkeys(k for row in sample[:1] for k in row))
        keys = list(dict.fromkeys(k for row in sample for k in row))
        types = {c: _arrow_type(pa, [row.get(c) for row in sample]) for c in want if c in keys}
        if not sample or any(t is None for t in types.values()):
            raise NoStream
        batches = _json_batches(pa, path, pa.schema(list(types.items())))
    offset = 0
    iterator = iter(batches)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except (pa.ArrowException, OSError):
            raise NoStream from None
        if batch.num_rows == 0:
            continue
        data = {c: batch.column(c) for c in batch.schema.names}
        yield Columns(path, fmt, header, data, batch.num_rows, offset=offset)
        offset += batch.num_rows


def _line_blocks(path: Path) -> Iterator[memoryview]:
    """The file in blocks of about :data:`_TEXT_BLOCK` bytes that end at a line end."""
    rest = b""
    with path.open("rb") as handle:
        while True:
            data = handle.read(_TEXT_BLOCK)
            block = rest + data if rest else data
            if not data:
                if block:
                    yield memoryview(block)
                return
            cut = block.rfind(b"\n") + 1
            if cut == 0:  # no line end yet: a line longer than a block
                rest = block
                continue
            rest = block[cut:]
            yield memoryview(block)[:cut]


def _has_quotes(path: Path) -> bool:
    with path.open("rb") as handle:
        return any(b'"' in block for block in iter(lambda: handle.read(_BLOCK), b""))


def _csv_batches(
    pa: Any, path: Path, header: list[str], columns: list[str], numeric: set[str]
) -> Iterator[Any]:
    pcsv = importlib.import_module("pyarrow.csv")
    parse = pcsv.ParseOptions(newlines_in_values=True)

    def convert(types: dict[str, Any]) -> Any:
        return pcsv.ConvertOptions(
            include_columns=columns,
            column_types=types,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        )

    if _has_quotes(path):  # a line end may sit inside a quoted value: let pyarrow find the rows
        with pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(
                block_size=_BLOCK, column_names=header, skip_rows=1, use_threads=False
            ),
            parse_options=parse,
            convert_options=convert({}),
        ) as reader:
            yield from reader
        return
    types: dict[str, Any] = {}
    fixed = None
    for i, block in enumerate(_line_blocks(path)):
        options = pcsv.ReadOptions(
            block_size=len(block) + 1, column_names=header, skip_rows=int(i == 0), use_threads=False
        )
        table = pcsv.read_csv(
            pa.py_buffer(block), read_options=options, parse_options=parse, convert_options=convert(types)
        )
        if fixed is None and table.num_rows:  # the first rows fix the types, as in pyarrow's reader
            fixed = types = {f.name: f.type for f in table.schema if f.name not in numeric}
        yield from table.to_batches()


def _json_batches(pa: Any, path: Path, schema: Any) -> Iterator[Any]:
    pj = importlib.import_module("pyarrow.json")
    for block in _line_blocks(path):  # JSON strings hold no raw line ends
        table = pj.read_json(
            pa.py_buffer(block),
            read_options=pj.ReadOptions(block_size=len(block) + 1, use_threads=False),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
        yield from table.to_batches()


# --------------------------------------------------------------------------------------------------
# Streaming a reward batch: the group column once, then the reward columns pass by pass.


class Unstreamable(Exception):
    """The file is not one the streamed reader can take as it is (a bad value, a type that changes,
    a missing column): the whole-file reader must read it, and name any problem."""


@dataclass(frozen=True)
class GroupCodes:
    """The group column of a file: ``codes[i]`` (int32) numbers row i's group in order of first
    appearance; ``labels`` (a pyarrow string array) holds the trimmed labels; ``components`` the
    reward columns to read."""

    header: list[str]
    components: list[str]
    codes: npt.NDArray[np.int32]
    labels: Any

    @property
    def n_groups(self) -> int:
        return len(self.labels)

    def label(self, g: int) -> str:
        return str(self.labels[g].as_py())

    def index(self, label: str) -> int | None:
        """The code of ``label``, or ``None``."""
        pc = importlib.import_module("pyarrow.compute")
        found = int(pc.index(self.labels, label).as_py())
        return None if found < 0 else found

    def rows(self, groups: Sequence[int]) -> dict[int, npt.NDArray[np.int64]]:
        """The file rows (0-based, ascending) of each group in ``groups``, in one scan."""
        wanted = np.zeros(self.n_groups, dtype=bool)
        wanted[list(groups)] = True
        rows = np.flatnonzero(wanted[self.codes])
        codes = self.codes[rows]
        order = np.argsort(codes, kind="stable")
        rows, codes = rows[order], codes[order]
        low = np.searchsorted(codes, list(groups), side="left")
        high = np.searchsorted(codes, list(groups), side="right")
        return {g: rows[a:b] for g, a, b in zip(groups, low, high, strict=True)}


class _LabelTable:
    """Group labels seen so far, numbered in order of first appearance: keys (the label's UTF-8
    bytes, zero-padded, then its length) kept sorted in numpy, so a block's labels are found by
    binary search rather than by rebuilding a hash table of every label per block."""

    #: longer labels (bytes) are left to the whole-file reader (their padded keys would be large)
    MAX_BYTES = 64

    def __init__(self) -> None:
        self.width = 0
        self.keys: npt.NDArray[Any] = np.empty(0, dtype=np.uint64)
        self.key_codes = np.empty(0, dtype=np.int32)
        self.labels: list[Any] = []  # pyarrow arrays, concatenated in code order
        self.count = 0

    @staticmethod
    def _pack(matrix: npt.NDArray[np.uint8]) -> npt.NDArray[Any]:
        """Rows of bytes as sortable keys: one big-endian uint64 (fast to sort) when they fit."""
        if matrix.shape[1] <= 8:
            padded = np.zeros((matrix.shape[0], 8), dtype=np.uint8)
            padded[:, : matrix.shape[1]] = matrix
            return padded.view(">u8").ravel().astype(np.uint64)
        return np.ascontiguousarray(matrix).view(f"S{matrix.shape[1]}").ravel()

    def _unpack(self) -> npt.NDArray[np.uint8]:
        if self.width + 1 <= 8:
            return self.keys.astype(">u8").view(np.uint8).reshape(-1, 8)[:, : self.width + 1]
        return self.keys.view(np.uint8).reshape(-1, self.width + 1)

    def _keys(self, arr: Any) -> npt.NDArray[Any]:
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset)
        data = arr.buffers()[2]
        data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
        lengths = np.diff(offsets)
        if lengths.size and (lengths.min() == 0 or lengths.max() > self.MAX_BYTES):
            raise Unstreamable  # empty labels are an error, long ones rare: the whole-file reader
        width = max(self.width, int(lengths.max(initial=1)))
        self._widen(width)
        columns = np.arange(width)
        present = columns < lengths[:, None]
        matrix = np.zeros((len(arr), width + 1), dtype=np.uint8)
        matrix[:, :width][present] = data[(offsets[:-1, None] + columns)[present]]
        matrix[:, width] = lengths
        if (matrix[:, 0] == 0).any():
            raise Unstreamable  # a label starting with NUL: the whole-file reader names it
        return self._pack(matrix)

    def _widen(self, width: int) -> None:
        """Longer labels arrived: zeros before the length byte (the keys' order is kept)."""
        if width > self.width:
            old = self._unpack()
            new = np.zeros((self.keys.size, width + 1), dtype=np.uint8)
            new[:, : self.width] = old[:, : self.width]
            new[:, width] = old[:, self.width] if self.keys.size else 0
            self.keys, self.width = self._pack(new), width

    def codes(self, pa: Any, arr: Any) -> npt.NDArray[np.int32]:
        """The codes of the labels ``arr`` (a pyarrow string array without nulls)."""
        keys = self._keys(arr)
        distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        at = np.searchsorted(self.keys, distinct)
        known = np.zeros(distinct.size, dtype=bool)
        if self.keys.size:
            inside = at < self.keys.size
            known[inside] = self.keys[at[inside]] == distinct[inside]
        code = np.empty(distinct.size, dtype=np.int32)
        code[known] = self.key_codes[at[known]]
        new = np.flatnonzero(~known)
        if new.size:
            by_appearance = new[np.argsort(first[new])]
            code[by_appearance] = self.count + np.arange(by_appearance.size, dtype=np.int32)
            self.labels.append(arr.take(pa.array(first[by_appearance])))
            self.count += by_appearance.size
            self.keys = np.insert(self.keys, at[new], distinct[new])
            self.key_codes = np.insert(self.key_codes, at[new], code[new])
        return code[inverse.ravel()]


def stream_group_codes(
    path: str | Path, *, fmt: str | None, group_col: str, components: Sequence[str] | None
) -> GroupCodes:
    """Read the group column batch by batch into :class:`GroupCodes` (labels trimmed, " a" and "a"
    one group, as :func:`group_codes`); raises :class:`Unstreamable` where the whole-file reader
    has to say what is wrong."""
    pa = _pa()
    pc = importlib.import_module("pyarrow.compute")
    table = _LabelTable()
    parts: list[npt.NDArray[np.int32]] = []
    header: list[str] | None = None
    try:
        for cols in stream_columns(path, fmt=fmt, want=[group_col]):
            header = cols.header
            arr = cols.data.get(group_col)
            if arr is None:
                raise Unstreamable
            if pa.types.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            if not pa.types.is_string(arr.type):
                arr = pc.cast(arr, pa.string())
            if arr.null_count:
                raise Unstreamable
            parts.append(table.codes(pa, pc.utf8_trim_whitespace(arr)))
    except (NoStream, CliError, pa.ArrowException, OSError):
        raise Unstreamable from None
    labels = pa.concat_arrays(table.labels) if table.labels else pa.array([], pa.string())
    if header is None or not parts:
        raise Unstreamable
    names = [c for c in header if c != group_col] if components is None else list(components)
    if (
        not names
        or group_col in names
        or len(set(names)) != len(names)
        or len(set(header)) != len(header)
        or any(c not in header for c in names)
    ):
        raise Unstreamable
    codes = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return GroupCodes(header, names, codes, labels)


def stream_scores(
    path: str | Path,
    *,
    fmt: str | None,
    components: Sequence[str],
    allow_nan: bool,
    keep: Any = None,
) -> Iterator[tuple[int, npt.NDArray[np.bool_] | None, npt.NDArray[np.float64]]]:
    """``(offset, mask, block)`` per batch of the file: the reward columns of the batch's rows
    (those of ``mask``, when ``keep(offset, n)`` gives one) as float64, read as
    :func:`numeric_column` reads them. Raises :class:`Unstreamable` on any problem."""
    pa = _pa()
    try:
        for cols in stream_columns(path, fmt=fmt, want=components, numeric=components):
            mask = None if keep is None else keep(cols.offset, cols.num_rows)
            n = cols.num_rows if mask is None else int(np.count_nonzero(mask))
            block = np.empty((n, len(components)), dtype=np.float64)
            rows = None if mask is None else pa.array(mask)
            for k, name in enumerate(components):
                arr = cols.data.get(name)
                if arr is None:
                    raise Unstreamable
                if rows is not None:
                    arr = arr.filter(rows)
                block[:, k] = _floats(pa, cols, name, arr, str, None, 0, allow_nan=allow_nan)
            yield cols.offset, mask, block
    except (NoStream, CliError, pa.ArrowException, OSError):
        raise Unstreamable from None


def _arrow_problem(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text[:300]


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


def _csv_header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        try:
            header = next(csv.reader(handle), None)
        except csv.Error as err:
            raise CliError(f"{path} line 1: unreadable CSV header ({err})") from None
    if not header:
        raise CliError(f"{path}: the file is empty (expected a header row)")
    return [name.strip() for name in header]


def _read_csv(pa: Any, path: Path, want: Sequence[str] | None) -> Columns:
    pcsv = importlib.import_module("pyarrow.csv")
    header = _csv_header(path)
    if len(set(header)) != len(header):
        raise CliError(f"{path}: the header repeats a column name: {header}")
    cols = [c for c in (want if want is not None else header) if c in header]
    block = _BLOCK
    size = path.stat().st_size
    streaming = True  # batch by batch: a third less peak memory than one read_csv call
    while True:
        options = {
            "read_options": pcsv.ReadOptions(
                block_size=block, column_names=header, skip_rows=1, use_threads=not streaming
            ),
            "parse_options": pcsv.ParseOptions(newlines_in_values=True),
            "convert_options": pcsv.ConvertOptions(
                include_columns=cols,
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        }
        try:
            if streaming:
                with pcsv.open_csv(path, **options) as reader:
                    table = pa.Table.from_batches(list(reader), schema=reader.schema)
            else:
                table = pcsv.read_csv(path, **options)
            break
        except pa.ArrowInvalid as err:
            if "straddling" in str(err) and block < size + 1:
                block = min(block * 8, size + 1)  # a field longer than a block: read in bigger ones
                continue
            if streaming:  # types guessed from the first block changed later: infer from all
                streaming = False
                continue
            _diagnose_csv(path, header)
            raise CliError(f"{path}: unreadable CSV ({_arrow_problem(err)})") from None
        except (pa.ArrowException, OSError) as err:
            raise CliError(f"{path}: unreadable CSV ({_arrow_problem(err)})") from None
    return Columns(path, "csv", header, {c: table.column(c) for c in cols}, table.num_rows)


def _diagnose_csv(path: Path, header: list[str]) -> None:
    """Find the row pyarrow refused (it does not say which): wrong field count or bad text."""
    csv.field_size_limit(1 << 30)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
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
    except UnicodeDecodeError as err:
        raise CliError(f"{path}: is not UTF-8 text (byte {err.start + 1}); save it as UTF-8") from None
    except csv.Error as err:
        raise CliError(f"{path}: unreadable CSV ({err})") from None


def _json_sample(path: Path, limit: int = 200) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for line in handle:
            if len(rows) >= limit:
                break
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                rows.append(obj)
    return rows


def _arrow_type(pa: Any, values: list[Any]) -> Any:
    seen = [v for v in values if v is not None]
    if not seen:
        return None
    if all(isinstance(v, bool) for v in seen):
        return pa.bool_()
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
        if all(isinstance(v, int) for v in seen):
            return pa.int64() if all(abs(v) < 2**63 for v in seen) else pa.float64()
        return pa.float64()
    if all(isinstance(v, str) for v in seen):
        return pa.string()
    return None


def _read_jsonl(pa: Any, path: Path, want: Sequence[str] | None, *, skip_bad_lines: bool) -> Columns:
    pj = importlib.import_module("pyarrow.json")
    sample = _json_sample(path)
    header = list(dict.fromkeys(k for row in sample[:1] for k in row))
    keys = list(dict.fromkeys(k for row in sample for k in row))
    cols = [c for c in (want if want is not None else header) if c in keys]
    types = {c: _arrow_type(pa, [row.get(c) for row in sample]) for c in cols}
    if sample and all(t is not None for t in types.values()):
        schema = pa.schema([(c, types[c]) for c in cols])
        block = _BLOCK
        size = path.stat().st_size
        while True:
            try:
                table = pj.read_json(
                    path,
                    read_options=pj.ReadOptions(block_size=block),
                    parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
                )
            except pa.ArrowInvalid as err:
                if "straddling" in str(err) and block < size + 1:
                    block = min(block * 8, size + 1)
                    continue
                break  # the line-by-line reader says where and what
            except (pa.ArrowException, OSError):
                break
            else:
                present = {c: table.column(c) for c in cols if table.column(c).null_count < table.num_rows}
                return Columns(path, "jsonl", header, present, table.num_rows)
    return _read_jsonl_lines(pa, path, want, skip_bad_lines=skip_bad_lines)


def _read_jsonl_lines(pa: Any, path: Path, want: Sequence[str] | None, *, skip_bad_lines: bool) -> Columns:
    """The slow, exact reader: one ``json.loads`` per line; names the line of any problem."""
    header: list[str] = []
    values: dict[str, list[Any]] = {}
    lines: list[int] = []
    skipped: list[str] = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"row {len(lines) + 1} (line {number})"
                try:
                    obj = json.loads(line)
                    problem = (
                        None if isinstance(obj, dict) else f"expected a JSON object, got {type(obj).__name__}"
                    )
                except json.JSONDecodeError as err:
                    problem = f"invalid JSON ({err.msg})"
                except ValueError as err:  # Python refuses integers of more than 4300 digits
                    digits = re.search(r"value has (\d+) digits", str(err))
                    size = f"of {digits.group(1)} digits" if digits else "too long"
                    problem = f"an integer {size}, too large for a 64-bit float"
                except RecursionError:
                    problem = "JSON nested too deeply"
                if problem is not None:
                    if skip_bad_lines:
                        skipped.append(f"line {number}: {problem}")
                        continue
                    raise CliError(f"{path} {where}: {problem}")
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


def probe_columns(path: str | Path, fmt: str | None = None) -> dict[str, str]:
    """Column name -> ``"number"`` (numbers or bools), ``"text"`` or ``"other"``, from the schema
    (Parquet), the first block (CSV) or the first rows (JSONL); cheap, for choosing what to read."""
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
        try:
            # the first block of lines, parsed alone: pyarrow's streaming reader would read ahead
            block = next(_line_blocks(path), memoryview(b""))
            try:
                schema = pcsv.read_csv(pa.py_buffer(block)).schema
            except pa.ArrowInvalid:  # a quoted value with a line end, cut: let pyarrow find the rows
                with pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=1 << 20)) as reader:
                    schema = reader.schema
        except (pa.ArrowException, OSError) as err:
            raise CliError(f"{path}: unreadable CSV ({_arrow_problem(err)})") from None
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
) -> RewardBatch:
    """Read a reward batch from ``path``.

    ``components`` picks the reward columns (default: every column except ``group_col``, in file
    order). ``file_format`` is ``"csv"``, ``"jsonl"`` or ``"parquet"`` (default: from the suffix).
    Missing values are an error unless ``allow_nan``, which turns them into NaN.
    """
    want = None if components is None else [group_col, *components]
    cols = read_columns(path, fmt=file_format, want=want)
    names = [c for c in cols.header if c != group_col] if components is None else list(components)
    batch = batch_from_columns(cols, group_col=group_col, components=names, allow_nan=allow_nan, consume=True)
    del cols
    release_arrow_memory()
    return batch


def jemalloc_default() -> None:
    """Make jemalloc pyarrow's default pool for this process when pyarrow is not imported yet and
    its build has jemalloc (``ARROW_JEMALLOC`` in its ``config.h``; a build without it would print
    a warning). Only the variable set before the import chooses the pool C++ code allocates from
    (the Parquet reader's internal buffers; :func:`returning_pool` only reaches pyarrow's Python
    layer): mimalloc, the default, kept 10-20 MB more of them at the peak of ``corrgrpo explain``
    on a 22 MB Parquet file. The variable is removed again after the import (no child inherits
    it); one the user set is kept."""
    if "pyarrow" in sys.modules or "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    spec = importlib.util.find_spec("pyarrow")
    places = [] if spec is None else list(spec.submodule_search_locations or [])
    config = [Path(p, "include", "arrow", "util", "config.h") for p in places]
    try:
        if not any(c.is_file() and "#define ARROW_JEMALLOC\n" in c.read_text() for c in config):
            return
    except (OSError, UnicodeDecodeError):
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    try:
        importlib.import_module("pyarrow")
    except ImportError:
        pass  # named by the first read
    finally:
        del os.environ["ARROW_DEFAULT_MEMORY_POOL"]


@contextlib.contextmanager
def returning_pool() -> Iterator[None]:
    """pyarrow's allocations go to jemalloc with no decay while the block is run: freed memory
    returns to the system at once, where the default pool keeps what each block of a streamed
    file used (a third of the peak of ``corrgrpo explain`` on a 50 MB file). Without jemalloc
    in the wheel, nothing changes."""
    pa = _pa()
    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(0)
    except (NotImplementedError, pa.ArrowException):
        yield
        return
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def release_arrow_memory() -> None:
    """Hand pyarrow's cached allocations back to the system once the columns are numpy arrays."""
    _pa().default_memory_pool().release_unused()


def batch_from_columns(
    cols: Columns,
    *,
    group_col: str,
    components: Sequence[str],
    allow_nan: bool,
    rows: npt.NDArray[np.int64] | None = None,
    source: str | None = None,
    consume: bool = False,
) -> RewardBatch:
    """The batch of ``rows`` (default: all) of ``cols``; every bad value is named by row and column.

    ``consume`` drops each column from ``cols`` once converted (less peak memory for one big file).
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
    scores = np.empty((n, len(names)), dtype=np.float64)
    for k, name in enumerate(names):
        numeric_column(cols, name, allow_nan=allow_nan, rows=rows, out=scores[:, k])
        if consume:
            cols.data.pop(name, None)
    ids, labels = group_codes(cols, group_col, rows=rows)
    return RewardBatch(scores=scores, group_ids=ids, group_labels=labels, components=tuple(names), source=src)


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
            raise CliError(
                f"{where(0)}: missing value (pass --nan-policy ignore to leave it out of the statistics)"
            )
        result[:] = np.nan
        return result
    column = cols.data[name]
    if rows is not None:
        chunks = [_take(pa, column, rows)]
    else:
        chunks = list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]
    offset = 0
    for chunk in chunks:
        size = len(chunk)
        result[offset : offset + size] = _floats(
            pa, cols, name, chunk, lambda i, at=offset: where(at + i), rows, offset, allow_nan=allow_nan
        )
        offset += size
    return result


def _floats(
    pa: Any,
    cols: Columns,
    name: str,
    arr: Any,
    where: Any,
    rows: npt.NDArray[np.int64] | None,
    offset: int,
    *,
    allow_nan: bool,
) -> npt.NDArray[np.float64]:
    """One pyarrow array as float64 (see :func:`numeric_column`); ``where(i)`` names local row i."""
    pc = importlib.import_module("pyarrow.compute")
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
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
            i = int(np.argmax(null))
            raise CliError(
                f"{where(i)}: missing value (pass --nan-policy ignore to leave it out of the statistics)"
            )
    finite = np.isfinite(values)
    if not finite.all():
        bad = ~finite if null is None else ~finite & ~null
        inf_rows = np.isinf(values)
        if inf_rows.any():
            i = int(np.argmax(inf_rows))
            row = offset + i if rows is None else int(rows[offset + i])
            raw = text[i].as_py() if text is not None else _csv_cell(cols, row, name)
            if raw is not None:
                raise CliError(f"{where(i)}: {raw.strip()!r} is infinite")
            raise CliError(f"{where(i)}: a number too large for a 64-bit float (beyond 1.8e308)")
        nan_rows = np.isnan(values) & bad
        if nan_rows.any() and not allow_nan:
            i = int(np.argmax(nan_rows))
            raise CliError(f"{where(i)}: NaN (pass --nan-policy ignore to leave it out of the statistics)")
    return values


def group_codes(
    cols: Columns, group_col: str, *, rows: npt.NDArray[np.int64] | None = None
) -> tuple[npt.NDArray[np.int64], tuple[str, ...]]:
    """Codes 0..G-1 in order of first appearance and the labels, vectorised: the column is
    dictionary-encoded chunk by chunk (one shared dictionary), and labels are trimmed and checked
    on the dictionary, not on every row."""
    pa = _pa()
    pc = importlib.import_module("pyarrow.compute")
    src = str(cols.source)

    def where(i: int) -> str:
        return cols.where(i if rows is None else int(rows[i]))

    if group_col not in cols.data:
        raise CliError(f"{src} {where(0)}: empty group label in column {group_col!r}")
    column = cols.data[group_col]
    arr = _take(pa, column, rows) if rows is not None else column
    if isinstance(arr, pa.ChunkedArray) and arr.num_chunks == 0:
        return np.zeros(0, dtype=np.int64), ()
    kind = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
    if pa.types.is_dictionary(arr.type):
        arr = (
            arr.cast(kind)
            if not isinstance(arr, pa.ChunkedArray)
            else pa.chunked_array([c.dictionary_decode() for c in arr.chunks], type=kind)
        )
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        try:
            arr = pc.cast(arr, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise CliError(f"{src}: group column {group_col!r} holds {kind} values, not labels") from None
    encoded = pc.dictionary_encode(arr)
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    ids = np.empty(len(arr), dtype=np.int64)
    offset = 0
    for chunk in chunks:
        part = chunk.indices
        if part.null_count:
            i = offset + int(np.argmax(np.asarray(part.is_null().to_numpy(zero_copy_only=False))))
            raise CliError(f"{src} {where(i)}: empty group label in column {group_col!r}")
        ids[offset : offset + len(part)] = part.to_numpy(zero_copy_only=False)
        offset += len(part)
    dictionary = chunks[0].dictionary if chunks else pa.array([], pa.string())
    labels = pc.utf8_trim_whitespace(dictionary)
    bad = np.asarray(
        pc.or_(pc.equal(labels, ""), pc.starts_with(labels, "\x00")).to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    if bad.any():
        i = int(np.argmax(np.isin(ids, np.flatnonzero(bad))))
        raise CliError(f"{src} {where(i)}: empty group label in column {group_col!r}")
    if not pc.all(pc.equal(labels, dictionary)).as_py():  # " a" and "a" are one group
        merged = pc.dictionary_encode(labels)
        ids = np.asarray(merged.indices.to_numpy(zero_copy_only=False), dtype=np.int64)[ids]
        labels = merged.dictionary
    return ids, tuple(labels.to_pylist())


def _short(text: str, limit: int = 60) -> str:
    """``repr`` of a value for a one-line message, cut in the middle when long."""
    shown = repr(text)
    return (
        shown
        if len(shown) <= limit
        else f"{shown[: limit // 2]}...{shown[-limit // 2 :]} ({len(text)} chars)"
    )


def _csv_cell(cols: Columns, row: int, name: str) -> str | None:
    """The text of one CSV cell (for messages: pyarrow has already turned it into a number)."""
    if cols.fmt != "csv":
        return None
    csv.field_size_limit(1 << 30)
    line = _line_of(cols.source, "csv", row)
    with cols.source.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.reader(handle)
        for cells in reader:
            if reader.line_num == line:
                cell = dict(zip(cols.header, cells, strict=False)).get(name)
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
