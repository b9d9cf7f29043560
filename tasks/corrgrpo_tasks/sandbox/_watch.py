"""Per-sandbox memory cap by a watchdog, and reaping of orphans when the scorer is PID 1.

One daemon thread serves every running sandbox: every ``INTERVAL`` seconds it lists ``/proc`` (reading the
parent of each new process once), builds the process tree, sums the resident memory of each registered sandbox's processes (the outer
``bwrap`` process and all its descendants: inside a PID namespace, orphans are re-parented to the
namespace's init, which is itself a descendant, so none can leave the tree) and kills a sandbox whose sum
passes its cap. Resident set sizes count pages shared between processes (copy-on-write after ``fork``)
once per process, so the sum errs on the side of killing. Memory that no process has mapped (tmpfs files,
SysV shared memory, memfd files) is not resident anywhere: the sandbox caps the first by size and refuses
the others with a seccomp filter (``_seccomp.py``).

When the scorer runs as PID 1 (a container started without ``--init``), every process orphaned on the
host side (bubblewrap's helpers, an rlimits-mode program's daemons) becomes its child and stays a zombie
unless it is waited for; the same thread waits for zombie children that ``subprocess`` does not own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Self

__all__ = ["INTERVAL", "Watch", "owned", "spawn_lock"]

INTERVAL = 0.05
_PAGE = os.sysconf("SC_PAGE_SIZE")
# Held while a child is started and registered, so that the reaper never waits for a child that
# subprocess is about to own (it would steal its exit status).
spawn_lock = threading.Lock()
_owned: set[int] = set()
_lock = threading.Lock()
_watches: dict[int, Watch] = {}
_thread: threading.Thread | None = None
_wake = threading.Event()


def owned(pid: int, add: bool) -> None:
    """Mark ``pid`` as a child that ``subprocess`` waits for itself (call with ``spawn_lock`` held)."""
    if add:
        _owned.add(pid)
    else:
        _owned.discard(pid)


class Watch:
    """Memory watch of one sandbox rooted at ``pid``: ``killed`` tells whether it hit ``cap_bytes``."""

    def __init__(self, pid: int, cap_bytes: int, kill: Callable[[], None]) -> None:
        self.pid = pid
        self.cap_bytes = cap_bytes
        self.peak_bytes = 0
        self.killed = False
        self._kill = kill

    def __enter__(self) -> Self:
        global _thread
        with _lock:
            _watches[self.pid] = self
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_loop, name="sandbox-watchdog", daemon=True)
                _thread.start()
        _wake.set()
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _watches.pop(self.pid, None)


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2 :].split()
    return fields if len(fields) >= 22 else None


class _Tree:
    """Parent of every process, read incrementally: a process's parent is read once, when it first
    appears; it changes only by re-parenting to an ancestor (the namespace's init, or PID 1 outside),
    which keeps a sandbox's processes inside its tree and everyone else's outside."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def scan(self) -> tuple[dict[int, list[int]], list[int]]:
        current = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        for pid in self.parent.keys() - current:
            del self.parent[pid]
        me = os.getpid()
        zombies = []
        # New processes, and orphans (their recorded parent is gone: they were re-parented).
        stale = [pid for pid, ppid in self.parent.items() if ppid not in self.parent and ppid > 1]
        for pid in (current - self.parent.keys()).union(stale):
            fields = _stat(pid)
            if fields is not None:
                self.parent[pid] = int(fields[1])
        if me == 1:  # zombies only matter when we are everyone's reaper
            zombies = [pid for pid, ppid in self.parent.items() if ppid == me and _is_zombie(pid)]
        children: dict[int, list[int]] = {}
        for pid, ppid in self.parent.items():
            children.setdefault(ppid, []).append(pid)
        return children, zombies


def _is_zombie(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] == b"Z"


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _loop() -> None:
    reaping = os.getpid() == 1
    tree = _Tree()
    while True:
        with _lock:
            watches = list(_watches.values())
        if not watches and not reaping:
            tree = _Tree()
            _wake.wait(1.0)
            _wake.clear()
            continue
        try:
            children, zombies = tree.scan()
        except OSError:
            children, zombies = {}, []
        for watch in watches:
            total, pending, seen = 0, [watch.pid], 0
            while pending and seen < 100_000:
                pid = pending.pop()
                seen += 1
                total += _resident(pid)
                pending.extend(children.get(pid, ()))
            watch.peak_bytes = max(watch.peak_bytes, total)
            if total > watch.cap_bytes and not watch.killed:
                watch.killed = True
                with contextlib.suppress(Exception):
                    watch._kill()
        if reaping and zombies:
            with spawn_lock:
                for pid in zombies:
                    if pid not in _owned:
                        with contextlib.suppress(ChildProcessError, OSError):
                            os.waitpid(pid, os.WNOHANG)
        _wake.wait(INTERVAL if watches else 0.5)
        _wake.clear()
