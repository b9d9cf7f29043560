"""Process handling for the sandbox: command line, limits, output capture, timeouts."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

__all__ = [
    "INSTALL_HINT",
    "Limits",
    "RunResult",
    "Sandbox",
    "SandboxUnavailableError",
    "probe",
]

INSTALL_HINT = (
    "The code sandbox needs bubblewrap (`bwrap`). Install it with `apt-get install -y bubblewrap` "
    "(Debian/Ubuntu), `dnf install bubblewrap` (Fedora) or `pacman -S bubblewrap` (Arch). If it is "
    "installed but cannot create namespaces, unprivileged user namespaces are disabled: allow them "
    "(`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 also "
    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`) or, inside Docker, run the container with "
    "`--security-opt seccomp=unconfined`. Pass allow_unsafe=True only if you accept running untrusted "
    "code with resource limits alone (no isolation)."
)

# Uid the sandbox runs as when the caller is root: root is exempt from RLIMIT_NPROC, and a uid without
# files of its own cannot read or signal anything outside the sandbox even if a namespace leaked.
NOBODY = 65534
_LAUNCHER = (Path(__file__).with_name("_launcher.py")).read_text()
_SANDBOX_DIR = "/sandbox"
_CHANNEL_CAP = 1 << 20
_READ_CHUNK = 1 << 16
_SHM_BYTES = 16 << 20
# After the program exits, how long its pipes may take to deliver the rest and close (bwrap returns as
# soon as the program's status is known, while the kernel tears the namespace down).
_EXIT_GRACE = 0.5

Status = Literal["ok", "error", "timeout", "output_limit", "sandbox_error"]


class SandboxUnavailableError(RuntimeError):
    """The real sandbox (bubblewrap) cannot run on this machine."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limits:
    """Resource limits of one sandboxed run.

    Parameters
    ----------
    wall_seconds
        Wall-clock limit; on expiry the whole process group (and with it the PID namespace) is killed.
    cpu_seconds
        ``RLIMIT_CPU``; ``None`` (default) means ``ceil(wall_seconds)``.
    memory_mb
        ``RLIMIT_AS`` (address space) of each process, default 1024 MiB as in the reference reward.
    file_size_mb
        ``RLIMIT_FSIZE``, the largest file the program may write, default 16 MiB.
    processes
        ``RLIMIT_NPROC``: processes and threads in the sandbox's user namespace, default 32.
    open_files
        ``RLIMIT_NOFILE``, default 64.
    tmp_mb
        Size of the private writable ``/tmp`` (a tmpfs), default 64 MiB.
    output_bytes
        Cap on each of stdout and stderr; a program that writes more is killed (status
        ``"output_limit"``), default 64 KiB.
    """

    wall_seconds: float = 5.0
    cpu_seconds: float | None = None
    memory_mb: int = 1024
    file_size_mb: int = 16
    processes: int = 32
    open_files: int = 64
    tmp_mb: int = 64
    output_bytes: int = 1 << 16

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"Limits.{field.name} must be a positive finite number, got {value!r}")
        if self.processes < 2:
            raise ValueError(f"Limits.processes must be at least 2 (the launcher itself), got {self.processes}")
        if self.open_files < 8:
            raise ValueError(f"Limits.open_files must be at least 8, got {self.open_files}")

    def launcher_arg(self) -> str:
        cpu = math.ceil(self.cpu_seconds if self.cpu_seconds is not None else self.wall_seconds)
        return ",".join(str(int(v)) for v in (
            cpu, self.memory_mb << 20, self.file_size_mb << 20, self.processes, self.open_files))


@dataclasses.dataclass(frozen=True)
class RunResult:
    """Outcome of one sandboxed run.

    ``status``: ``"ok"`` (exit code 0), ``"error"`` (non-zero exit; with bubblewrap a death by signal N
    shows as exit code 128 + N), ``"timeout"`` (wall-clock limit, or ``RLIMIT_CPU``'s SIGXCPU/SIGKILL),
    ``"output_limit"`` (stdout or stderr over ``Limits.output_bytes``; killed) or ``"sandbox_error"``
    (the sandbox itself failed to start the program). ``stdout``/``stderr`` hold at most
    ``Limits.output_bytes`` bytes each (decoded with replacement). ``channel`` holds what the program
    wrote to the side channel (see ``Sandbox.run``).
    """

    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    wall_seconds: float
    channel: bytes = b""
    backend: str = "bwrap"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _traversable(path: str, uid: int | None) -> bool:
    """Whether ``uid`` (None: this process) can reach and execute ``path``."""
    if uid is None:
        return os.access(path, os.X_OK)
    parts = Path(path).parts
    for depth in range(1, len(parts) + 1):
        current = os.path.join(*parts[:depth])
        try:
            info = os.stat(current)
        except OSError:
            return False
        bit = stat.S_IXUSR if info.st_uid == uid else stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


def _find_python(uid: int | None) -> str:
    candidates = [getattr(sys, "_base_executable", "") or "", sys.executable,
                  shutil.which("python3") or "", "/usr/bin/python3", "/usr/local/bin/python3"]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate):
            real = os.path.realpath(candidate)
            if _traversable(real, uid):
                return real
    raise SandboxUnavailableError(
        "no Python interpreter readable by the sandbox user was found (tried "
        f"{[c for c in candidates if c]}); pass python=... to Sandbox")


def _run_as() -> int | None:
    return NOBODY if os.geteuid() == 0 else None


def _system_binds(python: str) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + top
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    # The dynamic linker needs its cache to find multiarch libraries; nothing else of /etc is exposed.
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    prefix = os.path.dirname(os.path.dirname(python))
    roots = [prefix] if not prefix.startswith("/usr/") and prefix != "/usr" else []
    for path in roots:
        args += ["--ro-bind", path, path]
    return args


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _feed(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:  # the program exited or closed its stdin: nothing left to deliver
        pass
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=8)
def probe(bwrap: str | None = None, python: str | None = None) -> tuple[bool, str]:
    """Whether the real sandbox works here: ``(True, "")`` or ``(False, reason)``.

    Runs one trivial program through bubblewrap with the same flags the sandbox uses. Cached.
    """
    bwrap = bwrap or shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap (`bwrap`) is not installed. " + INSTALL_HINT
    try:
        box = Sandbox(python=python, bwrap=bwrap, _probe=False)
        result = box.run("import os\nprint('sandbox-ok', os.getuid() != 0)\n", limits=Limits(wall_seconds=20))
    except (OSError, SandboxUnavailableError) as exc:
        return False, f"bubblewrap failed to start: {exc}. " + INSTALL_HINT
    if result.status != "ok" or "sandbox-ok True" not in result.stdout:
        return False, (f"bubblewrap is installed but a test program failed (status {result.status}, exit "
                       f"{result.exit_code}): {result.stderr.strip()[-500:]!r}. " + INSTALL_HINT)
    return True, ""


class Sandbox:
    """Runs untrusted Python programs in a separate, isolated, resource-limited process.

    Each run is a new ``bwrap`` process in its own process group: its own user, PID, network, IPC, UTS
    and cgroup namespaces (no network at all, only a loopback device of its own), a read-only view of
    ``/usr`` and the interpreter's prefix (nothing else of the host: no ``/home``, ``/root``, ``/etc``,
    ``/tmp``), a private size-capped tmpfs ``/tmp`` as working directory, a fresh ``/proc`` that shows
    only the sandbox's own processes, no capabilities, an empty environment, a new terminal session, and
    death when the scoring process dies. When the caller is root the sandbox runs as uid 65534.
    Inside, a tiny launcher sets ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NPROC``,
    ``RLIMIT_NOFILE`` and ``RLIMIT_CORE=0`` before the program starts.

    Parameters
    ----------
    allow_unsafe
        Default False: bubblewrap must work, else ``SandboxUnavailableError`` (with install advice).
        True: fall back to an rlimits-only subprocess (no isolation at all) when bubblewrap is missing.
    backend
        ``"auto"`` (default), ``"bwrap"`` or ``"rlimits"`` (requires ``allow_unsafe=True``).
    python
        Interpreter to run inside the sandbox; default: this one's base interpreter if the sandbox user
        can reach it, else ``/usr/bin/python3``. Programs get its standard library and site-packages.
    extra_ro_paths
        More host paths to expose read-only.
    python_paths
        Host directories exposed read-only and put on the sandbox's ``PYTHONPATH`` (e.g. a
        site-packages holding ``sortedcontainers``, which some LeetCode solutions import).

    Examples
    --------
    >>> box = Sandbox()                                           # doctest: +SKIP
    >>> box.run("print(input()[::-1])", stdin="abc").stdout      # doctest: +SKIP
    'cba\\n'
    """

    def __init__(self, *, allow_unsafe: bool = False, backend: Literal["auto", "bwrap", "rlimits"] = "auto",
                 python: str | None = None, extra_ro_paths: Sequence[str] = (),
                 python_paths: Sequence[str] = (), bwrap: str | None = None,
                 _probe: bool = True) -> None:
        if backend not in ("auto", "bwrap", "rlimits"):
            raise ValueError(f"backend must be 'auto', 'bwrap' or 'rlimits', got {backend!r}")
        if backend == "rlimits" and not allow_unsafe:
            raise ValueError("backend='rlimits' runs untrusted code without isolation; pass allow_unsafe=True")
        self._uid = _run_as()
        self.python = python if python is not None else _find_python(self._uid)
        self.python_paths = tuple(os.path.realpath(p) for p in python_paths)
        missing = [p for p in self.python_paths if not os.path.isdir(p)]
        if missing:
            raise ValueError(f"python_paths must be existing directories, missing: {missing}")
        self.extra_ro_paths = (*(str(p) for p in extra_ro_paths), *self.python_paths)
        self._bwrap = bwrap or shutil.which("bwrap")
        self.backend: Literal["bwrap", "rlimits"] = "bwrap"
        if backend == "rlimits":
            self.backend = "rlimits"
        elif _probe:
            ok, reason = probe(self._bwrap, self.python)
            if not ok:
                if not allow_unsafe or backend == "bwrap":
                    raise SandboxUnavailableError(reason)
                warnings.warn("bubblewrap sandbox unavailable; running untrusted code with resource limits "
                              f"only (allow_unsafe=True). Reason: {reason}", RuntimeWarning, stacklevel=2)
                self.backend = "rlimits"
        elif self._bwrap is None:
            raise SandboxUnavailableError("bubblewrap (`bwrap`) is not installed. " + INSTALL_HINT)

    def __repr__(self) -> str:
        return f"Sandbox(backend={self.backend!r}, python={self.python!r})"

    def run(self, source: str | bytes, *, stdin: str | bytes = b"", limits: Limits | None = None,
            files: Mapping[str, str | bytes] | None = None, channel: bool = False) -> RunResult:
        """Run ``source`` (Python) with ``stdin`` under ``limits``; never raises for the program's faults.

        ``files`` are placed read-only in ``/sandbox/<name>`` (the program itself is
        ``/sandbox/main.py``). With ``channel=True`` the program gets a side channel: the environment
        variable ``SANDBOX_CHANNEL_FD`` names a write-only descriptor whose bytes (up to 1 MiB) come back
        in ``RunResult.channel``; a trusted harness uses it to report separately from the program's
        output.
        """
        limits = limits if limits is not None else Limits()
        source_bytes = source.encode() if isinstance(source, str) else bytes(source)
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        named = {"main.py": source_bytes}
        for name, data in (files or {}).items():
            if not name or "/" in name or name in (".", "..", "main.py"):
                raise ValueError(f"invalid sandbox file name {name!r}")
            named[name] = data.encode() if isinstance(data, str) else bytes(data)
        if self.backend == "bwrap":
            return self._run_bwrap(named, stdin_bytes, limits, channel)
        return self._run_rlimits(named, stdin_bytes, limits, channel)

    def _env(self, channel_fd: int | None) -> dict[str, str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        if self.python_paths:
            env["PYTHONPATH"] = os.pathsep.join(self.python_paths)
        if channel_fd is not None:
            env["SANDBOX_CHANNEL_FD"] = str(channel_fd)
        return env

    def _run_bwrap(self, named: dict[str, bytes], stdin: bytes, limits: Limits, channel: bool) -> RunResult:
        assert self._bwrap is not None
        fds = [_memfd(name, data) for name, data in named.items()]
        channel_r, channel_w = os.pipe() if channel else (None, None)
        try:
            args = [self._bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
                    "--cap-drop", "ALL", *_system_binds(self.python),
                    "--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp",
                    # bwrap's /dev is an unbounded tmpfs owned by the sandbox user: make it read-only
                    # below, leaving only a small /dev/shm for POSIX semaphores and shared memory.
                    "--size", str(_SHM_BYTES), "--tmpfs", "/dev/shm"]
            for path in self.extra_ro_paths:  # after /tmp's tmpfs, which would hide paths below it
                args += ["--ro-bind", path, path]
            for fd, name in zip(fds, named, strict=False):
                args += ["--ro-bind-data", str(fd), f"{_SANDBOX_DIR}/{name}"]
            args += ["--hostname", "sandbox", "--clearenv"]
            for key, value in self._env(channel_w).items():
                args += ["--setenv", key, value]
            args += ["--chdir", "/tmp", "--remount-ro", "/dev", "--remount-ro", "/", "--",
                     self.python, "-s", "-B", "-c", _LAUNCHER, limits.launcher_arg(), f"{_SANDBOX_DIR}/main.py"]
        except BaseException:
            for leftover in (*fds, channel_r, channel_w):
                if leftover is not None:
                    _close_quietly(leftover)
            raise
        keep = tuple(fds) if channel_w is None else (*fds, channel_w)
        try:
            # _execute closes `keep` right after the start: closing them twice could hit a descriptor
            # that another scoring thread has been handed since.
            return _execute(args, stdin=stdin, limits=limits, pass_fds=keep, channel_r=channel_r,
                            close_after_start=keep, env={}, cwd="/", uid=self._uid, backend="bwrap")
        finally:
            if channel_r is not None:
                os.close(channel_r)

    def _run_rlimits(self, named: dict[str, bytes], stdin: bytes, limits: Limits, channel: bool) -> RunResult:
        workdir = tempfile.mkdtemp(prefix="corrgrpo-unsafe-")
        channel_r, channel_w = os.pipe() if channel else (None, None)
        try:
            for name, data in named.items():
                Path(workdir, name).write_bytes(data)
            if self._uid is not None:
                os.chown(workdir, self._uid, self._uid)
            env = {**self._env(channel_w), "HOME": workdir, "TMPDIR": workdir, "SANDBOX_PDEATHSIG": "1"}
            args = [self.python, "-s", "-B", "-c", _LAUNCHER, limits.launcher_arg(), f"{workdir}/main.py"]
        except BaseException:
            for leftover in (channel_r, channel_w):
                if leftover is not None:
                    _close_quietly(leftover)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        keep = () if channel_w is None else (channel_w,)
        try:
            return _execute(args, stdin=stdin, limits=limits, pass_fds=keep, channel_r=channel_r,
                            close_after_start=keep, env=env, cwd=workdir, uid=self._uid, backend="rlimits")
        finally:
            if channel_r is not None:
                os.close(channel_r)
            shutil.rmtree(workdir, ignore_errors=True)


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _drain(fd: int, buffer: bytearray, cap: int) -> None:
    os.set_blocking(fd, False)
    try:
        while len(buffer) < cap:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return
            buffer += chunk[:cap - len(buffer)]
    except BlockingIOError:
        return


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _execute(args: list[str], *, stdin: bytes, limits: Limits, pass_fds: Sequence[int], channel_r: int | None,
             close_after_start: Sequence[int], env: dict[str, str], cwd: str, uid: int | None,
             backend: str) -> RunResult:
    stdin_r, stdin_w = os.pipe()
    start = time.monotonic()
    try:
        if uid is None:
            proc = subprocess.Popen(args, stdin=stdin_r, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=tuple(pass_fds), env=env, cwd=cwd, start_new_session=True)
        else:
            proc = subprocess.Popen(args, stdin=stdin_r, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=tuple(pass_fds), env=env, cwd=cwd, start_new_session=True,
                                    user=uid, group=uid, extra_groups=[])
    except OSError as exc:
        for fd in (stdin_r, stdin_w, *close_after_start):
            _close_quietly(fd)
        return RunResult("sandbox_error", None, "", f"could not start the sandbox: {exc}", False, False,
                         time.monotonic() - start, b"", backend)
    os.close(stdin_r)
    for fd in close_after_start:
        _close_quietly(fd)  # the child holds its copies; ours would keep pipes open forever
    feeder = threading.Thread(target=_feed, args=(stdin_w, stdin), daemon=True)
    feeder.start()
    assert proc.stdout is not None
    assert proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers: dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
    caps = {out_fd: limits.output_bytes, err_fd: limits.output_bytes}
    if channel_r is not None:
        buffers[channel_r] = bytearray()
        caps[channel_r] = _CHANNEL_CAP
    truncated = dict.fromkeys(buffers, False)
    deadline = start + limits.wall_seconds
    reason: Status | None = None
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        open_fds = set(buffers)
        exited_at: float | None = None
        while open_fds:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _EXIT_GRACE:
                break  # the program is done; whoever still holds its pipes (rlimits mode) is not waited for
            remaining = deadline - now
            if remaining <= 0:
                reason = "timeout"
                break
            for key, _ in selector.select(timeout=min(remaining, 0.05 if exited_at is not None else 0.5)):
                fd = int(key.fd)
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(fd)
                    open_fds.discard(fd)
                    continue
                room = caps[fd] - len(buffers[fd])
                buffers[fd] += chunk[:max(room, 0)]
                if len(chunk) > room:
                    truncated[fd] = True
                    if fd != channel_r:
                        reason = "output_limit"
            if reason is not None:
                break
            if proc.poll() is not None and not open_fds - {channel_r}:
                # The program is gone and its output closed; a straggler (rlimits mode) may still hold
                # the channel open, so take what is there without waiting for end-of-file.
                if channel_r in open_fds:
                    _drain(channel_r, buffers[channel_r], _CHANNEL_CAP)
                break
    if reason is not None:
        _kill_group(proc.pid)
    try:
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        reason = reason or "timeout"
        _kill_group(proc.pid)
        code = proc.wait()
    # Whatever the program started in its group (rlimits mode) goes with it; with bwrap the PID
    # namespace already took every descendant down with its init process.
    _kill_group(proc.pid)
    wall = time.monotonic() - start
    proc.stdout.close()
    proc.stderr.close()
    feeder.join(timeout=1.0)
    channel_bytes = bytes(buffers[channel_r]) if channel_r is not None else b""
    status: Status
    if reason is not None:
        status = reason
    elif code == 0:
        status = "ok"
    elif code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        status = "timeout"  # RLIMIT_CPU
    elif backend == "bwrap" and code == 1 and bytes(buffers[err_fd]).startswith(b"bwrap:"):
        status = "sandbox_error"
    else:
        status = "error"
    return RunResult(status, code, bytes(buffers[out_fd]).decode("utf-8", "replace"),
                     bytes(buffers[err_fd]).decode("utf-8", "replace"), truncated[out_fd], truncated[err_fd],
                     wall, channel_bytes, backend)

