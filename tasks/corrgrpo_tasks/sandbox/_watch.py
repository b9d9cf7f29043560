"""Per-sandbox memory cap by a watchdog, and reaping of orphans when the scorer is PID 1.

One daemon thread serves every running sandbox: every ``INTERVAL`` seconds it reads ``/proc/*/stat`` once,
builds the process tree, sums the resident memory of each registered sandbox's processes (the outer
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
import signal
import threading
from collections.abc import Callable

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

    def __enter__(self) -> Watch:
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


def _scan() -> tuple[dict[int, list[int]], dict[int, int], list[int]]:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    zombies: list[int] = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2:].split()
        if len(fields) < 22:
            continue
        pid, ppid = int(name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * _PAGE
        if fields[0] == b"Z" and ppid == me:
            zombies.append(pid)
    return children, rss, zombies


def _loop() -> None:
    reaping = os.getpid() == 1
    while True:
        with _lock:
            watches = list(_watches.values())
        if not watches and not reaping:
            _wake.wait(1.0)
            _wake.clear()
            continue
        try:
            children, rss, zombies = _scan()
        except OSError:
            children, rss, zombies = {}, {}, []
        for watch in watches:
            total, pending, seen = 0, [watch.pid], 0
            while pending and seen < 100_000:
                pid = pending.pop()
                seen += 1
                total += rss.get(pid, 0)
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


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group (a sandbox's outer bwrap leads one)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
