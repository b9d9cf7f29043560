"""cgroup v2 memory cap per sandbox, where the machine delegates a cgroup subtree to the scorer.

Where a cgroup v2 directory is delegated with the memory controller enabled for its children
(``memory`` in the directory's ``cgroup.subtree_control``, the directory writable by the scorer), each
sandbox gets a child cgroup with ``memory.max`` (and ``memory.swap.max = 0``, ``memory.oom.group = 1``):
the kernel then counts all of the sandbox's memory, kernel buffers and tmpfs pages included, with no
polling window. The sandbox's ``bwrap`` is started behind a gate (a shell blocked on a pipe) until the
scorer has moved it into the cgroup, so every descendant starts inside it.

Which directory: ``CORRGRPO_SANDBOX_CGROUP=<directory>`` names one; ``CORRGRPO_SANDBOX_CGROUP=off``
turns the mode off; unset, the scorer's own cgroup (``0::<path>`` in ``/proc/self/cgroup``, under the
cgroup2 mount) is used when it passes the same checks. Otherwise the sandbox falls back to the watchdog.
The machines this was written on mount cgroup v1 for memory, so this path is checked only with a
stand-in directory (plumbing), not against a kernel.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time

__all__ = ["cgroup_parent", "create", "oom_killed", "remove"]

_COUNTER = itertools.count()


_PROC_SELF_CGROUP = "/proc/self/cgroup"
_PROC_MOUNTS = "/proc/self/mounts"


def _cgroup2_mount() -> str | None:
    """Where the cgroup2 file system is mounted (``/sys/fs/cgroup`` on most hosts, ``.../unified`` on
    hybrid ones), from the mount table rather than a guessed path."""
    try:
        with open(_PROC_MOUNTS) as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1]
    except OSError:
        return None
    return None


def _own_cgroup() -> str | None:
    """The scorer's own cgroup v2 directory (the ``0::`` line of /proc/self/cgroup), if there is one."""
    try:
        with open(_PROC_SELF_CGROUP) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    root = _cgroup2_mount()
    for line in lines:
        if line.startswith("0::") and root is not None:
            return os.path.join(root, line[3:].lstrip("/"))
    return None


def _usable(path: str) -> bool:
    if not os.path.isdir(path) or not os.access(path, os.W_OK):
        return False
    try:
        with open(os.path.join(path, "cgroup.subtree_control")) as handle:
            return "memory" in handle.read().split()
    except OSError:
        return False


def cgroup_parent() -> str | None:
    """The delegated directory sandboxes' cgroups go under, or None (then the watchdog caps memory).

    ``CORRGRPO_SANDBOX_CGROUP`` names it (``off``: none); unset, the scorer's own cgroup is used when it
    is a delegated cgroup v2 directory with the memory controller enabled for its children.
    """
    path = os.environ.get("CORRGRPO_SANDBOX_CGROUP")
    if path == "off":
        return None
    if not path:
        path = _own_cgroup()
    return path if path is not None and _usable(path) else None


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
