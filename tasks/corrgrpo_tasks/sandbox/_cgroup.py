"""Opt-in cgroup v2 memory cap per sandbox: ``CORRGRPO_SANDBOX_CGROUP=<delegated cgroup directory>``.

Where the machine delegates a cgroup v2 subtree with the memory controller enabled for its children
(``memory`` in the directory's ``cgroup.subtree_control``, the directory writable by the scorer), each
sandbox gets a child cgroup with ``memory.max`` (and ``memory.swap.max = 0``, ``memory.oom.group = 1``):
the kernel then counts all of the sandbox's memory, kernel buffers and tmpfs pages included, with no
polling window. The sandbox's ``bwrap`` is started behind a gate (a shell blocked on a pipe) until the
scorer has moved it into the cgroup, so every descendant starts inside it.

Not detected automatically: the machines this was written on mount cgroup v1 for memory, so this path
is checked only with a stand-in directory (plumbing), not against a kernel; set the variable to use it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time

__all__ = ["cgroup_parent", "create", "oom_killed", "remove"]

_COUNTER = itertools.count()


def cgroup_parent() -> str | None:
    """The delegated directory from ``CORRGRPO_SANDBOX_CGROUP``, if it is usable; else None."""
    path = os.environ.get("CORRGRPO_SANDBOX_CGROUP")
    if not path or not os.path.isdir(path) or not os.access(path, os.W_OK):
        return None
    try:
        with open(os.path.join(path, "cgroup.subtree_control")) as handle:
            if "memory" not in handle.read().split():
                return None
    except OSError:
        return None
    return path


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def create(parent: str, memory_bytes: int) -> str:
    """A new child cgroup capped at ``memory_bytes``; raises OSError when the cap cannot be set."""
    path = os.path.join(parent, f"corrgrpo-{os.getpid()}-{next(_COUNTER)}")
    os.mkdir(path)
    try:
        _write(os.path.join(path, "memory.max"), str(memory_bytes))
    except OSError:
        remove(path)
        raise
    for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
        with contextlib.suppress(OSError):
            _write(os.path.join(path, name), value)
    return path


def enter(path: str, pid: int) -> None:
    _write(os.path.join(path, "cgroup.procs"), str(pid))


def oom_killed(path: str) -> bool:
    """Whether the kernel killed something in the cgroup for passing ``memory.max``."""
    try:
        with open(os.path.join(path, "memory.events")) as handle:
            events = dict(line.split() for line in handle if len(line.split()) == 2)
    except (OSError, ValueError):
        return False
    return int(events.get("oom_kill", "0") or 0) > 0 or int(events.get("oom_group_kill", "0") or 0) > 0


def remove(path: str) -> None:
    """Kill whatever is left in the cgroup and remove it (a few tries: the kernel frees it lazily)."""
    with contextlib.suppress(OSError):
        _write(os.path.join(path, "cgroup.kill"), "1")
    for _ in range(20):
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.01)
