"""The run folder of an evaluation: records appended as each case is scored, so a rerun resumes.

``run.json`` holds the settings that decide a case's result (benchmark, model and data fingerprints,
generation and scoring options); ``records.jsonl`` one line per scored case, keyed by ``"id"``. Opening
a folder whose ``run.json`` matches loads the records already there and the run scores only the rest;
a folder holding a run with other settings is refused (one line naming the first differing setting)
unless ``fresh=True`` starts it over. A line cut short by a kill is dropped. Settings that change only
speed or numerics (batch size, threads, device) are not part of the fingerprint.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> store = RunStore.open(folder, {"benchmark": "humaneval", "model": "m"})
>>> store.add({"id": "HumanEval/0", "pass": True})
>>> again = RunStore.open(folder, {"benchmark": "humaneval", "model": "m"})
>>> sorted(again.done)
['HumanEval/0']
>>> RunStore.open(folder, {"benchmark": "humaneval", "model": "other"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: ... holds a run with model 'm', not 'other'; pass another --out or --fresh to start over
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RunStore", "fingerprint_path", "plain"]

RUN_FILE = "run.json"
RECORDS_FILE = "records.jsonl"
_HASH_LIMIT = 256 << 20  # files up to this size are hashed whole; larger ones by size and name
_LISTING_LIMIT = 10_000


def plain(value: Any) -> Any:
    """``value`` as JSON-ready plain data (NaN as null, tuples as lists, anything else as ``str``)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _file_digest(path: Path) -> str:
    size = path.stat().st_size
    if size > _HASH_LIMIT:
        return f"size:{size}"
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def fingerprint_path(path: str | Path, *, weights: bool = False) -> str:
    """A short digest of a file (its bytes) or folder (its files' names and digests, or sizes for
    ``weights`` files), so a resumed run notices changed data or a retrained checkpoint."""
    path = Path(path)
    if path.is_file():
        return _file_digest(path)
    digest = hashlib.sha256()
    # Hidden entries (a checkout's .git) are not data.
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not any(x.startswith(".") for x in p.relative_to(path).parts)
    )[:_LISTING_LIMIT]
    for file in files:
        rel = file.relative_to(path).as_posix()
        heavy = weights and file.suffix in (".safetensors", ".bin", ".pt", ".gguf")
        mark = f"size:{file.stat().st_size}" if heavy else _file_digest(file)
        digest.update(f"{rel}\0{mark}\n".encode())
    return digest.hexdigest()[:16]


class RunStore:
    """Records of one run folder; :meth:`add` appends a record and flushes it to disk at once."""

    def __init__(
        self, folder: Path | None, settings: Mapping[str, Any], done: dict[str, dict[str, Any]]
    ) -> None:
        self.folder = folder
        self.settings = dict(settings)
        self.done = done
        self.loaded = frozenset(done)
        """Ids of the records that were already in the folder when it was opened."""
        self._lock = threading.Lock()
        self._handle = (folder / RECORDS_FILE).open("a", encoding="utf-8") if folder else None

    @classmethod
    def memory(cls) -> RunStore:
        """A store that keeps its records in memory only (a run without an output folder)."""
        return cls(None, {}, {})

    @classmethod
    def open(cls, folder: str | Path, settings: Mapping[str, Any], *, fresh: bool = False) -> RunStore:
        """Open (or start) the run folder ``folder`` for a run with ``settings`` (plain JSON data)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        settings = plain(settings)
        run_file, records = out / RUN_FILE, out / RECORDS_FILE
        done: dict[str, dict[str, Any]] = {}
        if run_file.is_file() and not fresh:
            try:
                before = json.loads(run_file.read_text(encoding="utf-8"))["settings"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{run_file} is not a run file; pass another --out or --fresh") from None
            _same(run_file.parent, before, settings)
            done = _read_records(records)
        elif records.is_file() and not fresh:
            raise ValueError(f"{records} exists without {RUN_FILE}; pass another --out or --fresh")
        else:
            records.unlink(missing_ok=True)
        if done:  # rewrite without a line cut short by a kill, so appends start on a fresh line
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values())
            records.write_text(text, encoding="utf-8")
        run_file.write_text(json.dumps({"settings": settings}, indent=2, sort_keys=True) + "\n", "utf-8")
        return cls(out, settings, done)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one scored case (it needs a string ``"id"``); thread-safe."""
        line = plain(record)
        key = line.get("id")
        if not isinstance(key, str):
            raise TypeError(f"a record needs a string 'id', got {key!r}")
        with self._lock:
            if self._handle is not None:
                self._handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                self._handle.flush()
                os.fsync(self._handle.fileno())
            self.done[key] = line

    def records(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The records of ``ids`` that are done, in that order."""
        return [self.done[i] for i in ids if i in self.done]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _same(where: Path, before: Mapping[str, Any], now: Mapping[str, Any]) -> None:
    for key in sorted(set(before) | set(now)):
        if before.get(key) != now.get(key):
            raise ValueError(
                f"{where} holds a run with {key} {before.get(key)!r}, not {now.get(key)!r}; "
                "pass another --out or --fresh to start over"
            )


def _read_records(path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # the last line of a killed run
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            done[record["id"]] = record
    return done
