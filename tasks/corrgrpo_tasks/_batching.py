"""Run many multi-turn episodes at once, their model calls batched into one ``generate`` per round.

Each episode is ordinary sequential code that calls ``chat(messages, tools) -> str`` (ASB's plan-then-act
loop, AgentDojo's own pipeline). :func:`map_batched` runs up to ``concurrency`` of them in threads; their
``chat`` calls queue up, and the calling thread answers every queued call with one
``generate(conversations, tools)`` as soon as each running episode is waiting (or ``max_batch`` calls
are queued). Under greedy decoding the replies equal one-at-a-time generation up to batch numerics;
results come back in input order. With ``concurrency=1`` no thread is started. :class:`Resume` is how
every runner resumes a run folder and records each case as it is scored.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None
Chat = Callable[[Messages, Tools], str]
Generate = Callable[[Sequence[Messages], Sequence[Tools]], list[str]]


def map_batched(
    fn: Callable[[T, Chat], R],
    items: Iterable[T],
    generate: Generate,
    *,
    concurrency: int = 1,
    max_batch: int | None = None,
) -> list[R]:
    """``[fn(item, chat) for item in items]``, up to ``concurrency`` at a time with batched ``chat`` calls.

    >>> def echo(conversations, tools):
    ...     return [m[-1]["content"].upper() for m in conversations]
    >>> map_batched(lambda x, chat: chat([{"role": "user", "content": x}], None), ["a", "b", "c"], echo,
    ...             concurrency=2)
    ['A', 'B', 'C']
    """
    work = list(items)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if concurrency == 1 or len(work) <= 1:
        return [fn(item, lambda m, t: generate([m], [t])[0]) for item in work]
    limit = max_batch or concurrency
    cond = threading.Condition()
    pending: list[tuple[Messages, Tools, dict[str, Any]]] = []
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []
    state = {"next": 0, "live": min(concurrency, len(work))}

    def chat(messages: Messages, tools: Tools) -> str:
        slot: dict[str, Any] = {}
        with cond:
            pending.append((messages, tools, slot))
            cond.notify_all()
            cond.wait_for(lambda: "reply" in slot or "error" in slot)
        if "error" in slot:
            raise RuntimeError("generation failed for a batched episode") from slot["error"]
        return str(slot["reply"])

    def worker() -> None:
        try:
            while not errors:
                with cond:
                    index = state["next"]
                    state["next"] += 1
                if index >= len(work):
                    break
                results[index] = fn(work[index], chat)
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller after every thread stops
            with cond:
                errors.append(exc)
        finally:
            with cond:
                state["live"] -= 1
                cond.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(state["live"])]
    for thread in threads:
        thread.start()
    while True:
        with cond:
            cond.wait_for(lambda: state["live"] == 0 or len(pending) >= min(limit, state["live"]) > 0)
            if not pending:
                break
            batch = pending[:limit]
            del pending[:limit]
        try:
            replies = generate([m for m, _, _ in batch], [t for _, t, _ in batch])
            outcome: list[tuple[str, Any]] = [("reply", r) for r in replies]
        except BaseException as exc:  # noqa: BLE001 -- every waiting episode gets the failure
            outcome = [("error", exc)] * len(batch)
        with cond:
            for (_, _, slot), (key, value) in zip(batch, outcome, strict=True):
                slot[key] = value
            cond.notify_all()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@dataclasses.dataclass(frozen=True)
class Resume:
    """The one resume protocol of every benchmark runner (ASB, InjecAgent, AgentDojo, the single-turn ones
    through ``evaluation.RunContext``, which builds it).

    ``offset``/``limit`` select the cases (:meth:`select`); :meth:`start` announces every selected id
    (``on_start``) and returns the records of an earlier run (``done``), which the runner does not play
    again; :meth:`record` keeps each new record, hands it to ``on_record`` as soon as it is scored (so an
    interrupted run loses nothing), and advances ``on_case`` by one.

    >>> kept = {}
    >>> resume = Resume(offset=1, limit=2, done={"b": {"id": "b"}}, on_record=lambda r: kept.update({r["id"]: r}))
    >>> resume.select(["a", "b", "c", "d"]), sorted(resume.start(["b", "c"]))
    (['b', 'c'], ['b'])
    >>> found = resume.start(["b", "c"])
    >>> resume.record(found, {"id": "c", "x": 1})
    {'id': 'c', 'x': 1}
    >>> sorted(found), list(kept)
    (['b', 'c'], ['c'])
    """

    offset: int = 0
    limit: int | None = None
    done: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    on_start: Callable[[list[str]], object] | None = None
    on_record: Callable[[dict[str, Any]], object] | None = None
    on_case: Callable[[int], object] | None = None

    def select(self, items: Sequence[T]) -> list[T]:
        """``items[offset : offset + limit]``."""
        return list(items[self.offset : None if self.limit is None else self.offset + self.limit])

    def start(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Announce the selected ``ids``; the records already scored, by id (the runner's table)."""
        if self.on_start:
            self.on_start(list(ids))
        return {k: dict(v) for k, v in self.done.items()}

    def record(self, found: dict[str, dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
        """Keep a new ``record`` (with its ``"id"``) in ``found`` and report it; returns it."""
        found[record["id"]] = record
        if self.on_record:
            self.on_record(record)
        if self.on_case:
            self.on_case(1)
        return record
