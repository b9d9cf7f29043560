"""Run many multi-turn episodes at once, their model calls batched into one ``generate`` per round.

Each episode is ordinary sequential code that calls ``chat(messages, tools) -> str`` (ASB's plan-then-act
loop, AgentDojo's own pipeline). :func:`map_batched` runs up to ``concurrency`` of them in threads; their
``chat`` calls queue up, and the calling thread answers every queued call with one
``generate(conversations, tools)`` as soon as each running episode is waiting (or ``max_batch`` calls
are queued). Under greedy decoding the replies equal one-at-a-time generation up to batch numerics;
results come back in input order. With ``concurrency=1`` no thread is started.
"""

from __future__ import annotations

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
