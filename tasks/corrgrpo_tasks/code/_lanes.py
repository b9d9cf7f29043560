"""Lanes of sandboxes that score one judge job at a time: a judge, a candidate server, a reference server.

``run_job(job, sandbox=..., memory_mb=..., seconds=...)`` is all the reward needs: the judge's records
(first of each stage) and whether the lane came back clean. A job that meets a failing lane before its
program can have had a hand in it (no record at all, or the judge's ``lane`` record) is run again on a
fresh lane, so a sandbox failure is never the candidate's score.

Each lane runs as a host uid of its own (``SANDBOX_UIDS``, when the scorer is root), so per-user kernel
quotas are never shared between lanes; its sandboxes are started from one long-lived thread, because
bubblewrap's ``--die-with-parent`` follows the *thread* that started it: a lane started by a worker of a
thread pool would die with that worker when the pool shuts down, under the next batch's first job.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import json
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

from ..sandbox import SANDBOX_UIDS, Limits, Running, Sandbox
from ..sandbox._seccomp import session_filter

__all__ = ["run_job", "sandbox_for"]

# What runs inside the sandboxes, shipped as text (never imported here): see sandboxed/__init__.py.
_HERE = Path(__file__).parent / "sandboxed"
_JUDGE = (_HERE / "_judge.py").read_text()
_SERVER = (_HERE / "_server.py").read_text()
_WIRE = (_HERE / "_wire.py").read_text()
_ZYGOTE = (_HERE / "_zygote.py").read_text()
_SYNTAX = (_HERE / "_syntax.py").read_text()
_SESSION_FILTER = session_filter() or b""
# Per session of a server: a fresh /tmp (the lane's tmp size) and /dev/shm, and at most this many inodes
# in each (kernel memory the size cap does not see).
_SHM_BYTES = 16 << 20
_TMP_INODES = 4096
_SHM_INODES = 256
# A job whose lane failed (not the program's doing) is tried this many times in all.
_ATTEMPTS = 3
# A lane's sandboxes live this long at most, and serve at most this many jobs before they are replaced.
_LANE_SECONDS = 3600.0
_LANE_JOBS = 500
# Beyond a job's own time limit: how long its records and the lane's clean-up may take.
_JOB_GRACE = 3.0
_RECORDS_CAP = 1 << 20


@functools.lru_cache(maxsize=4)
def sandbox_for(
    allow_unsafe: bool, python_paths: tuple[str, ...] = (), packages: tuple[str, ...] = ()
) -> Sandbox:
    """The sandbox the reward scores in (cached per options); ``packages`` are installed packages exposed
    read-only inside (``Sandbox(packages=...)``)."""
    return Sandbox(allow_unsafe=allow_unsafe, python_paths=python_paths, packages=packages)


def _records(channel: bytes) -> dict[str, dict[str, Any]]:
    """The judge's records, first of each stage; anything malformed is skipped (and never raises)."""
    found: dict[str, dict[str, Any]] = {}
    for line in channel.split(b"\n"):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError, MemoryError):
            continue
        if isinstance(record, dict) and isinstance(record.get("stage"), str):
            found.setdefault(record["stage"], record)
    return found


class _Lane:
    """A judge sandbox with a candidate server sandbox and a reference server sandbox, reused job after job.

    Each of the three is PID 1 of its namespace and never runs a job's code itself: the judge forks a
    process per job, the servers one per session; between jobs every other process of each sandbox is
    killed and its ``/tmp`` emptied (see ``sandboxed/_zygote.py``), so a job meets nothing of the one before while
    the start-up of three sandboxes is paid once per lane instead of once per sample. A lane that misses
    a deadline or loses a sandbox (a memory bomb, an output flood) is thrown away whole.
    """

    def __init__(self, sandbox: Sandbox, memory_mb: int, uid: int | None) -> None:
        limits = Limits(wall_seconds=_LANE_SECONDS, memory_mb=memory_mb)
        pairs = {
            who: socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            for who in ("ctl", "candidate", "reference")
        }
        files = {"_wire.py": _WIRE, "_zygote.py": _ZYGOTE, "_syntax.py": _SYNTAX}
        confine = sandbox.backend == "bwrap"
        session = {
            "confine": confine,
            "tmp_bytes": limits.tmp_mb << 20,
            "shm_bytes": _SHM_BYTES,
            "tmp_inodes": _TMP_INODES,
            "shm_inodes": _SHM_INODES,
        }
        server_files: dict[str, str | bytes] = {
            **files,
            "session.json": json.dumps(session),
            "session.bpf": _SESSION_FILTER,
        }
        self.uid = uid
        self.running: list[Running] = []
        try:
            for who in ("candidate", "reference"):
                self.running.append(
                    sandbox.start(
                        _SERVER,
                        limits=limits,
                        files=server_files,
                        pass_fds={"SERVER_FD": pairs[who][1].detach()},
                        as_init=True,
                        background=True,
                        uid=uid,
                        # The server makes each session's namespaces and file systems (setns into a
                        # mount namespace needs CAP_SYS_CHROOT too); the session drops both before any
                        # of the program runs.
                        keep_caps=("CAP_SYS_ADMIN", "CAP_SYS_CHROOT") if confine else (),
                        # Every file a session can map is a copy in this sandbox's memory, never a page
                        # of the host's cache that another sandbox could have loaded (issue 34).
                        private_files=confine,
                    )
                )
            self.running.append(
                sandbox.start(
                    _JUDGE,
                    limits=limits,
                    files=files,
                    as_init=True,
                    background=True,
                    uid=uid,
                    pass_fds={
                        "JUDGE_CTL_FD": pairs["ctl"][1].detach(),
                        "JUDGE_CANDIDATE_FD": pairs["candidate"][0].detach(),
                        "JUDGE_REFERENCE_FD": pairs["reference"][0].detach(),
                    },
                )
            )
        except BaseException:
            self.close()
            raise
        finally:
            for who, pair in pairs.items():
                for end in pair[1:] if who == "ctl" else pair:
                    end.close()  # a no-op for the ends handed to the sandboxes
        self.ctl = pairs["ctl"][0]
        self.jobs = 0

    def alive(self) -> bool:
        return len(self.running) == 3 and all(r.alive() for r in self.running)

    def score(self, job: dict[str, Any], seconds: float) -> tuple[bytes, bool]:
        """Run one job: the judge's records, and whether the lane is clean and can take another."""
        self.jobs += 1
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            socket.send_fds(
                self.ctl, [json.dumps({"op": "job", "seconds": seconds}).encode()], [theirs.fileno()]
            )
        except OSError:
            mine.close()
            return b"", False
        finally:
            theirs.close()
        deadline = time.monotonic() + seconds + _JOB_GRACE
        records = bytearray()
        try:
            writer = threading.Thread(target=_send_job, args=(mine, json.dumps(job).encode()), daemon=True)
            writer.start()
            while len(records) < _RECORDS_CAP:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([mine], [], [], remaining)[0]:
                    return bytes(records), False
                try:
                    chunk = mine.recv(1 << 16)
                except OSError:
                    return bytes(records), False
                if not chunk:
                    break
                records += chunk
            writer.join(timeout=1.0)
        finally:
            mine.close()
        remaining = deadline + _JOB_GRACE - time.monotonic()
        if remaining <= 0 or not select.select([self.ctl], [], [], remaining)[0]:
            return bytes(records), False
        try:
            done = json.loads(self.ctl.recv(4096))
        except (OSError, ValueError):
            return bytes(records), False
        return bytes(records), isinstance(done, dict) and done.get("ok") is True

    def close(self) -> None:
        for running in self.running:
            running.kill()
        for running in self.running:
            running.wait()
        ctl = getattr(self, "ctl", None)
        if ctl is not None:
            ctl.close()


def _send_job(sock: socket.socket, payload: bytes) -> None:
    try:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class _LanePool:
    """Idle lanes per (sandbox, memory cap); each worker thread holds one lane while it scores a sample."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[tuple[int, int], list[_Lane]] = {}
        self.free_uids = list(reversed(SANDBOX_UIDS)) if os.geteuid() == 0 else []
        # Every sandbox of every lane is started from this one thread (see the module's docstring).
        self.spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lane-spawner")

    def _new(self, sandbox: Sandbox, memory_mb: int) -> _Lane:
        with self.lock:
            uid = self.free_uids.pop() if self.free_uids else None
        try:
            return self.spawner.submit(_Lane, sandbox, memory_mb, uid).result()
        except BaseException:
            self._free(uid)
            raise

    def _free(self, uid: int | None) -> None:
        if uid is not None:
            with self.lock:
                self.free_uids.append(uid)

    def discard(self, lane: _Lane) -> None:
        lane.close()
        self._free(lane.uid)

    def acquire(self, sandbox: Sandbox, memory_mb: int) -> _Lane:
        key = (id(sandbox), memory_mb)
        while True:
            with self.lock:
                lane = self.idle.get(key, []).pop() if self.idle.get(key) else None
            if lane is None:
                return self._new(sandbox, memory_mb)
            if lane.alive():
                return lane
            self.discard(lane)

    def release(self, sandbox: Sandbox, memory_mb: int, lane: _Lane, clean: bool) -> None:
        if clean and lane.jobs < _LANE_JOBS and lane.alive():
            with self.lock:
                self.idle.setdefault((id(sandbox), memory_mb), []).append(lane)
        else:
            self.discard(lane)

    def close(self) -> None:
        with self.lock:
            lanes = [lane for group in self.idle.values() for lane in group]
            self.idle.clear()
        for lane in lanes:
            self.discard(lane)


_LANES = _LanePool()
atexit.register(_LANES.close)


def run_job(
    job: dict[str, Any], *, sandbox: Sandbox, memory_mb: int, seconds: float
) -> tuple[dict[str, dict[str, Any]], bool]:
    """Score one job in a lane: the judge's records by stage, and whether the lane finished clean.

    A lane that fails before the job's program can have caused it -- the judge sends no record at all
    (it was gone, or its start failed), or reports ``lane`` (a server gone before a session started, a
    session that could not be confined) -- is replaced and the job run again, ``_ATTEMPTS`` times in all;
    then no records (the reward's ``sandbox_error``).
    """
    for _ in range(_ATTEMPTS):
        lane = _LANES.acquire(sandbox, memory_mb)
        records: dict[str, dict[str, Any]] = {}
        clean = False
        try:
            channel, clean = lane.score(job, seconds)
            records = _records(channel)
        finally:
            _LANES.release(sandbox, memory_mb, lane, clean and "lane" not in records)
        if records and "lane" not in records:
            return records, clean
    return {}, False
