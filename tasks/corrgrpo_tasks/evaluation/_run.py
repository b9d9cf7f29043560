"""How a benchmark runner generates and scores: the cases it selects, the ones already done, the bar.

A runner lists its cases, each with a stable id; :meth:`RunContext.select` applies ``--offset/--limit``;
:func:`generate_and_score` generates the cases not yet in the run folder in batches and scores each
completion as soon as its batch is back (in a background thread when scoring is slow, e.g. the
sandbox, so the next batch generates meanwhile), appending each record to the folder as it is scored
and advancing the bar per case. Multi-turn runners (ASB, AgentDojo) call :meth:`RunContext.done_case`
per finished episode instead.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from corrgrpo_core.cli.plugin import progress
from corrgrpo_tasks._batching import Resume

from ._generate import ChatModel
from ._store import RunStore

T = TypeVar("T")
Score = Callable[["Case", str], Mapping[str, Any]]


@dataclasses.dataclass(frozen=True)
class Case:
    """One single-turn case: its id, the conversation, the tools offered, what the scorer needs."""

    id: str
    messages: Sequence[Mapping[str, Any]]
    payload: Any = None
    tools: Sequence[Mapping[str, Any]] | None = None


@dataclasses.dataclass
class RunContext:
    """What a runner gets; ``model`` is built on first use, so bad data fails before a model loads and
    a finished run reloads nothing."""

    model_factory: Callable[[], ChatModel]
    data: Path
    model_path: str = ""
    limit: int | None = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    open_store: Callable[[], RunStore] = RunStore.memory
    """Opens the run folder, on the first :meth:`begin` (after the data has loaded)."""
    store: RunStore | None = None
    offset: int = 0
    show_progress: bool = False
    label: str = ""
    log: Callable[[str], None] = lambda line: None
    _model: ChatModel | None = None
    _tick: Callable[..., None] = lambda n=1, description=None: None
    _stack: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)
    total: int | None = None
    """Cases in the benchmark's data (set by the runner), before ``--offset/--limit``."""
    selected: int = 0
    """Cases selected for this run (set by :meth:`begin`)."""

    @property
    def model(self) -> ChatModel:
        if self._model is None:
            self._model = self.model_factory()
        return self._model

    @property
    def done(self) -> dict[str, dict[str, Any]]:
        """Records already in the run folder, by id."""
        return self._store().done

    def lazy_generate(self, conversations: Any, tools: Any = None) -> list[str]:
        """``model.generate`` with the model built on the first call."""
        return self.model.generate(conversations, tools)

    @property
    def batch_size(self) -> int:
        return int(self.options.get("batch_size", 8))

    def select(self, items: Sequence[T]) -> list[T]:
        """``items[offset : offset + limit]``."""
        return Resume(self.offset, self.limit).select(items)

    def resume(self) -> Resume:
        """The resume protocol of a multi-turn runner over this run folder: its selection, the records
        already in it, :meth:`begin` when the ids are known and :meth:`done_case` per scored case."""
        return Resume(self.offset, self.limit, self.done, self.begin, self.done_case)

    def begin(self, ids: Sequence[str]) -> list[str]:
        """Start the run over the case ids ``ids``: say how many are already scored (a resumed run), open
        the progress bar over the rest, and return the ids still to do."""
        store = self._store()
        if len(set(ids)) != len(ids):
            raise ValueError("the selected cases have repeated ids; the data holds duplicate problems")
        self.selected = len(ids)
        todo = [i for i in ids if i not in store.done]
        if len(todo) < len(ids):
            self.log(
                f"resuming {store.folder}: {len(ids) - len(todo)} of {len(ids)} cases already scored, "
                f"{len(todo)} to go"
            )
        label = f"{self.label} ({len(ids) - len(todo)} resumed)" if len(todo) < len(ids) else self.label
        if todo:
            self._tick = self._stack.enter_context(
                progress(len(todo), enabled=self.show_progress, label=label)
            )
        return todo

    def phase(self, description: str) -> None:
        """Show what the run is doing now (generating a batch, scoring) on the bar."""
        self._tick(0, f"{self.label}: {description}")

    def done_case(self, record: Mapping[str, Any]) -> None:
        """Append a scored case (with its ``"id"``) to the run folder and advance the bar."""
        self._store().add(record)
        self._tick(1)

    def records(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The scored records of ``ids``, in order."""
        return self._store().records(ids)

    def _store(self) -> RunStore:
        if self.store is None:
            self.store = self.open_store()
        return self.store

    def close(self) -> None:
        self._stack.close()
        if self.store is not None:
            self.store.close()


def generate_and_score(
    ctx: RunContext, cases: Sequence[Case], score: Score, *, background: bool = False
) -> list[dict[str, Any]]:
    """Generate the cases not yet scored (``ctx.batch_size`` per call), score each completion with
    ``score(case, completion)`` and record ``{"id", "completion", **score}``; returns every case's record
    in ``cases`` order. With ``background`` scoring runs in one worker thread while the next batch
    generates (for scorers that wait on a subprocess, like the code sandbox); a failure or Ctrl-C drops
    the scoring still queued (the case being scored is finished and recorded)."""
    todo_ids = set(ctx.begin([c.id for c in cases]))
    loop = _Loop(ctx, score)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="score") as pool:
        try:
            loop.run([c for c in cases if c.id in todo_ids], pool if background else None)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return ctx.records([c.id for c in cases])


class _Loop:
    """The batches of :func:`generate_and_score` and what the bar shows about them."""

    def __init__(self, ctx: RunContext, score: Score) -> None:
        self.ctx, self.score = ctx, score
        self.lock = threading.Lock()
        self.doing, self.queued = "", 0
        self.background = False

    def show(self) -> None:  # under ``lock``
        waiting = f"; scoring {self.queued} queued" if self.queued and self.doing else ""
        self.ctx.phase(f"{self.doing or f'scoring the last {self.queued}'}{waiting}")

    def finish(self, case: Case, completion: str) -> None:
        self.ctx.done_case({"id": case.id, "completion": completion, **self.score(case, completion)})
        with self.lock:
            self.queued -= 1
            if self.background:
                self.show()

    def run(self, todo: Sequence[Case], pool: concurrent.futures.ThreadPoolExecutor | None) -> None:
        self.background = pool is not None
        futures: list[concurrent.futures.Future[None]] = []
        size = self.ctx.batch_size
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            _raise_failed(futures)
            span = f"{start + 1}-{start + len(batch)} of {len(todo)}"
            with self.lock:
                self.doing = f"generating {span}"
                self.show()
            tools = [c.tools for c in batch] if any(c.tools for c in batch) else None
            outputs = self.ctx.model.generate([c.messages for c in batch], tools)
            with self.lock:
                self.queued += len(batch)
                if pool is None:
                    self.doing = f"scoring {span}"
                    self.ctx.phase(self.doing)
            for case, output in zip(batch, outputs, strict=True):
                if pool is None:
                    self.finish(case, output)
                else:
                    futures.append(pool.submit(self.finish, case, output))
        with self.lock:
            self.doing = ""
            if futures and self.queued:
                self.show()
        for future in futures:
            future.result()


def _raise_failed(futures: Sequence[concurrent.futures.Future[None]]) -> None:
    for future in futures:
        if future.done() and future.exception() is not None:
            raise future.exception()  # type: ignore[misc]


@contextlib.contextmanager
def closing(ctx: RunContext) -> Iterator[RunContext]:
    try:
        yield ctx
    finally:
        ctx.close()
