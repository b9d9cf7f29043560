"""Helpers of the long-lived processes at PID 1 of the judge's and the servers' sandboxes (standard library
C modules only; copied into each sandbox as ``/sandbox/_zygote.py``).

Such a process never runs the job's code itself: it forks a fresh process per job or session and, when
that is over, ``clean`` kills every other process of the namespace, reaps them and empties ``/tmp`` and
``/dev/shm``, so nothing of one job or session can reach the next.
"""

# No contextlib here (start-up cost): try/except/pass it is.
# ruff: noqa: SIM105, S110

from __future__ import annotations

import _socket
import array
import os
import signal

__all__ = ["clean", "nodump", "recv_fds", "send_fds"]


def recv_fds(sock: _socket.socket) -> tuple[bytes, list[int]]:
    """One control message and the descriptors passed with it (``socket.recv_fds`` without ``socket``)."""
    message, ancillary, _, _ = sock.recvmsg(4096, _socket.CMSG_SPACE(4 * 4))
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def send_fds(sock: _socket.socket, message: bytes, fds: list[int]) -> None:
    sock.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])


def wipe(top: str) -> None:
    """Remove everything below ``top`` (bounded work; no symbolic link is followed)."""
    stack = [top]
    dirs = []
    budget = 200_000
    while stack and budget > 0:
        path = stack.pop()
        dirs.append(path)
        try:
            os.chmod(path, 0o700)
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            budget -= 1
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
    for path in reversed(dirs[1:]):
        try:
            os.rmdir(path)
        except OSError:
            pass


def clean(child: int) -> None:
    """Kill and reap every other process of the namespace, then empty its private ``/tmp`` and
    ``/dev/shm``. Outside a namespace of our own (unsafe mode, not PID 1) only ``child``'s process group
    is killed and nothing is wiped: those directories would be the host's."""
    if os.getpid() == 1:
        while True:  # kill again before each reap: a fork bomb's newest children die in the next round
            try:
                os.kill(-1, signal.SIGKILL)  # every process of the namespace except this one
            except ProcessLookupError:
                pass  # none left
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
    else:  # unsafe mode: no namespace; the child's process group is all that can be reached
        if child > 0:
            try:
                os.killpg(child, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(child, 0)
            except ChildProcessError:
                pass
        return  # and /tmp, /dev/shm are the host's: never wiped from here
    for top in ("/tmp", "/dev/shm"):
        wipe(top)


def nodump() -> None:
    """Make this process non-dumpable: no ptrace, no ``/proc/1/mem``, no ``pidfd_getfd`` from the jobs."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:  # noqa: BLE001 - best effort; PID 1 and the namespace still protect it
        pass
