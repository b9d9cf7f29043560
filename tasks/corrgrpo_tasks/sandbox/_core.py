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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from . import _cgroup, _view, _watch
from ._seccomp import filter_program

__all__ = [
    "INSTALL_HINT",
    "Limits",
    "RunResult",
    "Running",
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
#: Host uids a root scorer may hand to long-lived sandboxes (``Sandbox.start(uid=...)``), one per lane of
#: the code judge, so that per-user kernel quotas (descriptors in flight, pipe buffers, inotify, pending
#: signals) of one lane are never another's. No file on the host belongs to them.
SANDBOX_UIDS = range(2_000_000_000, 2_000_000_000 + 4096)
#: Where ``Sandbox(packages=...)`` binds the named packages (read-only, first on ``sys.path``).
PACKAGES_DIR = "/sandbox-packages"
_LAUNCHER = (Path(__file__).with_name("_launcher.py")).read_text()
_STAGE = (Path(__file__).with_name("_stage.py")).read_text()
_SANDBOX_DIR = "/sandbox"
_CHANNEL_CAP = 1 << 20
_READ_CHUNK = 1 << 16
_SHM_BYTES = 16 << 20
# After the program exits, how long its pipes may take to deliver the rest and close (bwrap returns as
# soon as the program's status is known, while the kernel tears the namespace down).
_EXIT_GRACE = 0.5

Status = Literal["ok", "error", "timeout", "output_limit", "memory_limit", "sandbox_error"]
MemoryMode = Literal["cgroup", "watchdog", "rlimits"]


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
        Cap on the resident memory of the whole sandbox (all its processes together: cgroup v2
        ``memory.max`` where delegated, else the watchdog), and ``RLIMIT_AS`` of each process; default
        1024 MiB as in the reference reward.
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
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"Limits.{field.name} must be a positive finite number, got {value!r}")
        if self.processes < 2:
            raise ValueError(
                f"Limits.processes must be at least 2 (the launcher itself), got {self.processes}"
            )
        if self.open_files < 8:
            raise ValueError(f"Limits.open_files must be at least 8, got {self.open_files}")

    def launcher_arg(self) -> str:
        cpu = math.ceil(self.cpu_seconds if self.cpu_seconds is not None else self.wall_seconds)
        return ",".join(
            str(int(v))
            for v in (cpu, self.memory_mb << 20, self.file_size_mb << 20, self.processes, self.open_files)
        )


@dataclasses.dataclass(frozen=True)
class RunResult:
    """Outcome of one sandboxed run.

    ``status``: ``"ok"`` (exit code 0), ``"error"`` (non-zero exit; with bubblewrap a death by signal N
    shows as exit code 128 + N), ``"timeout"`` (wall-clock limit, or ``RLIMIT_CPU``'s SIGXCPU/SIGKILL),
    ``"output_limit"`` (stdout or stderr over ``Limits.output_bytes``; killed), ``"memory_limit"`` (the
    sandbox's processes together passed ``Limits.memory_mb``; killed) or ``"sandbox_error"`` (the
    sandbox itself failed to start the program). ``memory_mode`` says how the sandbox-wide memory cap was
    enforced: ``"cgroup"`` (cgroup v2 ``memory.max``), ``"watchdog"`` (resident memory of the sandbox's
    processes summed every 50 ms) or ``"rlimits"`` (unsafe mode: per process only). ``stdout``/``stderr`` hold at most
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
    memory_mode: MemoryMode = "watchdog"
    peak_memory_bytes: int = 0

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
    candidates = [
        getattr(sys, "_base_executable", "") or "",
        sys.executable,
        shutil.which("python3") or "",
        "/usr/bin/python3",
        "/usr/local/bin/python3",
    ]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate):
            real = os.path.realpath(candidate)
            if _traversable(real, uid):
                return real
    raise SandboxUnavailableError(
        "no Python interpreter readable by the sandbox user was found (tried "
        f"{[c for c in candidates if c]}); pass python=... to Sandbox"
    )


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


def package_paths(names: Sequence[str]) -> tuple[str, ...]:
    """Host paths of the installed top-level packages or modules ``names`` (as this interpreter finds
    them, nothing imported), with each package's bundled shared libraries (``numpy.libs`` beside
    ``numpy``); raises ``ValueError`` naming a package that is not installed."""
    import importlib.util

    found: list[str] = []
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"packages takes top-level import names, got {name!r}")
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ValueError(f"package {name!r} is not installed for {sys.executable}")
        locations = list(spec.submodule_search_locations or ())
        path = locations[0] if locations else spec.origin
        if not path or not os.path.exists(path):
            raise ValueError(f"package {name!r} has no directory or file to expose (found {path!r})")
        path = os.path.realpath(path)
        found.append(path)
        parent, base = os.path.split(path)
        stem = base.split(".", 1)[0].lower()
        for sibling in sorted(os.listdir(parent)):
            if sibling.endswith(".libs") and sibling[: -len(".libs")].lower() == stem:
                found.append(os.path.join(parent, sibling))
    return tuple(dict.fromkeys(found))


def _site_dirs(python: str) -> tuple[str, ...]:
    """This interpreter's own site-packages, when the sandbox runs this interpreter (``-S`` skips ``site``,
    whose ``.pth`` processing costs more than the rest of the start-up)."""
    if python not in {
        os.path.realpath(p) for p in (sys.executable, getattr(sys, "_base_executable", "")) if p
    }:
        return ()
    import sysconfig

    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    return tuple(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)))


@functools.lru_cache(maxsize=8)
def _bwrap_features(bwrap: str) -> frozenset[str]:
    try:
        text = subprocess.run(
            [bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(flag for flag in ("--disable-userns", "--seccomp", "--as-pid-1") if flag in text)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _feed(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # the program exited or closed its stdin: nothing left to deliver
        pass
    finally:
        os.close(fd)


_PROBE = """\
import os, socket, sys
canary = sys.argv[1]
checks = {
    "canary_hidden": not os.path.exists(canary) and not os.path.exists(os.path.dirname(canary)),
    "unprivileged": os.getuid() != 0 and os.geteuid() != 0,
    "pid_namespace": all(int(p) < 100 for p in os.listdir("/proc") if p.isdigit()),
    "no_network": [name for _, name in socket.if_nameindex()] in ([], ["lo"]),
}
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    checks["no_user_namespaces"] = libc.unshare(0x10000000) != 0
    checks["no_memfd"] = libc.syscall({memfd}, b"x", 0) < 0 if {memfd} else True
except OSError:
    checks["no_user_namespaces"] = False
print("sandbox-probe", sorted(name for name, ok in checks.items() if not ok))
"""


@functools.lru_cache(maxsize=8)
def probe(bwrap: str | None = None, python: str | None = None) -> tuple[bool, str]:
    """Whether the real sandbox works and isolates here: ``(True, "")`` or ``(False, reason)``.

    Does not trust whatever ``bwrap`` is first on ``PATH``: it runs a program through it with the same
    flags the sandbox uses and demands proof of isolation -- a canary file created on the host for this
    probe is invisible, the program runs as an unprivileged uid in its own PID namespace without network,
    and it cannot create a user namespace or unaccounted memory (``memfd_create``). Cached.
    """
    bwrap = bwrap or shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap (`bwrap`) is not installed. " + INSTALL_HINT
    canary_dir = tempfile.mkdtemp(prefix="corrgrpo-canary-")
    canary = os.path.join(canary_dir, "canary")
    try:
        Path(canary).write_text("host")
        os.chmod(canary_dir, 0o755)
        os.chmod(canary, 0o644)
        box = Sandbox(python=python, bwrap=bwrap, _probe=False)
        memfd = {"x86_64": 319, "aarch64": 279}.get(os.uname().machine, 0)
        result = box.run(
            _PROBE.replace("{memfd}", str(memfd)), limits=Limits(wall_seconds=20), argv=(canary,)
        )
    except (OSError, SandboxUnavailableError) as exc:
        return False, f"bubblewrap failed to start: {exc}. " + INSTALL_HINT
    finally:
        shutil.rmtree(canary_dir, ignore_errors=True)
    if result.status != "ok" or "sandbox-probe" not in result.stdout:
        return False, (
            f"bubblewrap is installed but a test program failed (status {result.status}, exit "
            f"{result.exit_code}): {result.stderr.strip()[-500:]!r}. " + INSTALL_HINT
        )
    if "sandbox-probe []" not in result.stdout:
        return False, (
            f"{bwrap} runs programs but does not isolate them: failed checks "
            f"{result.stdout.split('sandbox-probe', 1)[1].strip()}. " + INSTALL_HINT
        )
    return True, ""


class Sandbox:
    """Runs untrusted Python programs in a separate, isolated, resource-limited process.

    Each run is a new ``bwrap`` process in its own process group: its own user, PID, network, IPC, UTS
    and cgroup namespaces (no network at all, only a loopback device of its own), no further user
    namespaces (``--disable-userns``, or a seccomp filter where bubblewrap lacks it), a seccomp filter
    refusing unaccounted memory (``memfd_create``, ``shmget``) and foreign system-call ABIs, a read-only
    view of ``/usr`` and the interpreter's prefix (nothing else of the host: no ``/home``, ``/root``,
    ``/etc``, ``/tmp``), a private size-capped tmpfs ``/tmp`` as working directory, a fresh ``/proc``
    that shows only the sandbox's own processes, no capabilities, an empty environment, a new terminal
    session, and death when the scoring process dies. When the caller is root the sandbox runs as uid
    65534. Inside, a tiny launcher sets ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``,
    ``RLIMIT_NPROC``, ``RLIMIT_NOFILE`` and ``RLIMIT_CORE=0`` before the program starts; outside, the
    memory of all the sandbox's processes together is capped (``RunResult.memory_mode``).

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
    packages
        Top-level import names of installed packages (``("numpy",)``) exposed read-only at
        ``/sandbox-packages/<name>``, first on ``sys.path``, each with its bundled libraries
        (``numpy.libs``); nothing else of their site-packages. Default none. Binary packages must match
        the sandbox's interpreter (``python``).

    Examples
    --------
    >>> box = Sandbox()                                           # doctest: +SKIP
    >>> box.run("print(input()[::-1])", stdin="abc").stdout      # doctest: +SKIP
    'cba\\n'
    """

    def __init__(
        self,
        *,
        allow_unsafe: bool = False,
        backend: Literal["auto", "bwrap", "rlimits"] = "auto",
        python: str | None = None,
        extra_ro_paths: Sequence[str] = (),
        python_paths: Sequence[str] = (),
        packages: Sequence[str] = (),
        bwrap: str | None = None,
        _probe: bool = True,
        _userns_filter: bool = False,
    ) -> None:
        if backend not in ("auto", "bwrap", "rlimits"):
            raise ValueError(f"backend must be 'auto', 'bwrap' or 'rlimits', got {backend!r}")
        if backend == "rlimits" and not allow_unsafe:
            raise ValueError(
                "backend='rlimits' runs untrusted code without isolation; pass allow_unsafe=True"
            )
        self._uid = _run_as()
        self.python = python if python is not None else _find_python(self._uid)
        self.python_paths = tuple(os.path.realpath(p) for p in python_paths)
        missing = [p for p in self.python_paths if not os.path.isdir(p)]
        if missing:
            raise ValueError(f"python_paths must be existing directories, missing: {missing}")
        self._site = tuple(p for p in _site_dirs(self.python) if _traversable(p, self._uid))
        self.packages = tuple(packages)
        self._package_paths = package_paths(self.packages)
        hidden = [p for p in self._package_paths if not _traversable(p, self._uid)]
        if hidden:
            raise ValueError(f"packages live where the sandbox user cannot read them: {hidden}")
        self.extra_ro_paths = (*(str(p) for p in extra_ro_paths), *self.python_paths)
        found = bwrap or shutil.which("bwrap")
        self._bwrap = os.path.realpath(found) if found else None
        # Tests force the seccomp equivalent of --disable-userns to check it on a bubblewrap that has both.
        self._userns_filter = _userns_filter
        self._manifest: bytes | None = None
        self.backend: Literal["bwrap", "rlimits"] = "bwrap"
        if backend == "rlimits":
            self.backend = "rlimits"
        elif _probe:
            ok, reason = probe(self._bwrap, self.python)
            if not ok:
                if not allow_unsafe or backend == "bwrap":
                    raise SandboxUnavailableError(reason)
                warnings.warn(
                    "bubblewrap sandbox unavailable; running untrusted code with resource limits "
                    f"only (allow_unsafe=True). Reason: {reason}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self.backend = "rlimits"
        elif self._bwrap is None:
            raise SandboxUnavailableError("bubblewrap (`bwrap`) is not installed. " + INSTALL_HINT)

    def __repr__(self) -> str:
        return f"Sandbox(backend={self.backend!r}, python={self.python!r})"

    @property
    def memory_mode(self) -> MemoryMode:
        """How the sandbox-wide memory cap is enforced on this machine (see ``RunResult.memory_mode``)."""
        if self.backend == "rlimits":
            return "rlimits"
        return "cgroup" if _cgroup.cgroup_parent() is not None else "watchdog"

    def run(
        self,
        source: str | bytes,
        *,
        stdin: str | bytes = b"",
        limits: Limits | None = None,
        files: Mapping[str, str | bytes] | None = None,
        channel: bool = False,
        argv: Sequence[str] = (),
    ) -> RunResult:
        """Run ``source`` (Python) with ``stdin`` under ``limits``; never raises for the program's faults.

        ``files`` are placed read-only in ``/sandbox/<name>`` (the program itself is
        ``/sandbox/main.py``). With ``channel=True`` the program gets a side channel: the environment
        variable ``SANDBOX_CHANNEL_FD`` names a write-only descriptor whose bytes (up to 1 MiB) come back
        in ``RunResult.channel``; a trusted harness uses it to report separately from the program's
        output. ``argv`` becomes ``sys.argv[1:]``.
        """
        return self.start(source, stdin=stdin, limits=limits, files=files, channel=channel, argv=argv).wait()

    def start(
        self,
        source: str | bytes,
        *,
        stdin: str | bytes = b"",
        limits: Limits | None = None,
        files: Mapping[str, str | bytes] | None = None,
        channel: bool = False,
        argv: Sequence[str] = (),
        pass_fds: Mapping[str, int] | None = None,
        as_init: bool = False,
        on_channel: Callable[[bytes], None] | None = None,
        background: bool = False,
        uid: int | None = None,
        keep_caps: Sequence[str] = (),
        private_files: bool = False,
    ) -> Running:
        """Start a run without waiting for it (``run`` is ``start(...).wait()``).

        ``pass_fds`` maps environment variable names to descriptors of this process that the program
        inherits (under the same numbers; the variable holds the number); this process's copies are
        closed once the sandbox has started. ``as_init`` makes the program PID 1 of its namespace
        (no bubblewrap init beside it: it reaps its own orphans). ``on_channel`` is called with each
        chunk read from the channel as it arrives (from the thread that collects the run).
        ``background`` collects output in a thread of its own; ``Running.kill()`` stops the run early.
        ``uid`` (one of ``SANDBOX_UIDS``) runs this sandbox as that host uid instead of 65534 when the
        caller is root (ignored otherwise). ``keep_caps`` (e.g. ``("CAP_SYS_ADMIN",)``) are capabilities
        the program keeps *inside its own user namespace* (bubblewrap only): a trusted harness that
        mounts per-session file systems uses them and must drop them before running untrusted code.
        ``private_files`` (bubblewrap only) gives the sandbox a file view of its own, in memory: the
        interpreter, its standard library, the shared libraries they load and the bound directories are
        copied once into a read-only tmpfs bound over the host's paths before the launcher starts, and
        nothing else of ``/usr`` is visible; whether a page of a file is cached then says nothing about
        any other sandbox (the host's page cache is out of reach). It costs a copy (about 30 MiB for the
        standard library alone) and an interpreter start per sandbox; see ``_stage.py`` and ``_view.py``.
        """
        limits = limits if limits is not None else Limits()
        source_bytes = source.encode() if isinstance(source, str) else bytes(source)
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        named = {"main.py": source_bytes}
        for name, data in (files or {}).items():
            if not name or "/" in name or name in (".", "..", "main.py"):
                raise ValueError(f"invalid sandbox file name {name!r}")
            named[name] = data.encode() if isinstance(data, str) else bytes(data)
        extra = dict(pass_fds or {})
        for key, fd in extra.items():
            if not key.isidentifier() or not isinstance(fd, int) or fd < 3:
                raise ValueError(f"pass_fds needs NAME=descriptor (>= 3) pairs, got {key!r}={fd!r}")
        if uid is not None and uid not in SANDBOX_UIDS:
            raise ValueError(f"uid must be one of SANDBOX_UIDS ({SANDBOX_UIDS}), got {uid!r}")
        for cap in keep_caps:
            if not (isinstance(cap, str) and cap.startswith("CAP_") and cap[4:].replace("_", "").isalnum()):
                raise ValueError(f"keep_caps takes capability names such as 'CAP_SYS_ADMIN', got {cap!r}")
        run_as = uid if uid is not None and self._uid is not None else self._uid
        if self.backend == "bwrap":
            running = self._start_bwrap(
                named, stdin_bytes, limits, channel, tuple(argv), extra, as_init, on_channel, run_as,
                tuple(keep_caps), private_files,
            )  # fmt: skip
        else:
            running = self._start_rlimits(
                named, stdin_bytes, limits, channel, tuple(argv), extra, on_channel, run_as
            )
        if background:
            running.collect_in_background()
        return running

    def _env(self, channel_fd: int | None, extra: Mapping[str, int]) -> dict[str, str]:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8",
        }
        packages: tuple[str, ...] = (PACKAGES_DIR,) if self._package_paths and self.backend == "bwrap" else ()
        if self.backend == "rlimits":  # no namespace to bind them into: their parent directories
            packages = tuple(dict.fromkeys(os.path.dirname(p) for p in self._package_paths))
        if self.python_paths or self._site or packages:
            env["PYTHONPATH"] = os.pathsep.join((*packages, *self.python_paths, *self._site))
        if channel_fd is not None:
            env["SANDBOX_CHANNEL_FD"] = str(channel_fd)
        for key, fd in extra.items():
            env[key] = str(fd)
        return env

    def _mount_args(self, limits: Limits) -> list[str]:
        """The sandbox's file systems: the host's binds, /proc, /dev, the capped /tmp and /dev/shm."""
        args = [
            *_system_binds(self.python),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(limits.tmp_mb << 20),
            "--tmpfs",
            "/tmp",
            # bwrap's /dev is an unbounded tmpfs owned by the sandbox user: make it read-only
            # below, leaving only a small /dev/shm for POSIX semaphores and shared memory.
            "--size",
            str(_SHM_BYTES),
            "--tmpfs",
            "/dev/shm",
        ]
        for path in (
            *self.extra_ro_paths,
            *self._site,
        ):  # after /tmp's tmpfs, which would hide paths below
            args += ["--ro-bind", path, path]
        for path in self._package_paths:
            args += ["--ro-bind", path, f"{PACKAGES_DIR}/{os.path.basename(path)}"]
        return args

    def _view_manifest(self) -> bytes:
        """What a sandbox with private files copies (computed once per ``Sandbox``; see ``_view.py``)."""
        if self._manifest is None:
            binds = [(p, p) for p in (*self.extra_ro_paths, *self._site)]
            binds += [(p, f"{PACKAGES_DIR}/{os.path.basename(p)}") for p in self._package_paths]
            self._manifest = _view.manifest(self.python, binds)
        return self._manifest

    def _stage_args(self, view: list[int], admin: bool) -> list[str]:
        if not view:
            return []
        return [self.python, "-S", "-B", "-c", _STAGE, str(view[0]), "1" if admin else "0"]

    def _launch_args(self, limits: Limits, main: str, argv: tuple[str, ...]) -> list[str]:
        return [self.python, "-S", "-B", "-c", _LAUNCHER, limits.launcher_arg(), main, *argv]

    def _start_bwrap(
        self,
        named: dict[str, bytes],
        stdin: bytes,
        limits: Limits,
        channel: bool,
        argv: tuple[str, ...],
        extra: dict[str, int],
        as_init: bool,
        on_channel: Callable[[bytes], None] | None,
        uid: int | None,
        keep_caps: tuple[str, ...],
        private_files: bool = False,
    ) -> Running:
        assert self._bwrap is not None
        features = _bwrap_features(self._bwrap)
        seccomp = filter_program() if "--seccomp" in features else None
        userns_flag = "--disable-userns" in features and not self._userns_filter
        if not userns_flag and seccomp is None:
            raise SandboxUnavailableError(
                f"{self._bwrap} has neither --disable-userns nor --seccomp on this architecture; a nested "
                "user namespace could escape the sandbox's limits. Install bubblewrap >= 0.8. " + INSTALL_HINT
            )
        fds = [_memfd(name, data) for name, data in named.items()]
        view = [_memfd("view", self._view_manifest())] if private_files else []
        if seccomp is not None:
            fds.append(_memfd("seccomp", seccomp))
        channel_r, channel_w = os.pipe() if channel else (None, None)
        try:
            args = [
                self._bwrap,
                "--unshare-all",
                "--unshare-user",
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
            ]
            admin = private_files and "CAP_SYS_ADMIN" not in keep_caps  # the pre-stage's, then dropped
            for cap in (*keep_caps, *(("CAP_SYS_ADMIN",) if admin else ())):
                args += ["--cap-add", cap]
            if userns_flag:
                args.append("--disable-userns")
            if as_init:
                args.append("--as-pid-1")
            if seccomp is not None:
                args += ["--seccomp", str(fds[-1])]
            args += self._mount_args(limits)
            for fd, name in zip(fds, named, strict=False):
                args += ["--ro-bind-data", str(fd), f"{_SANDBOX_DIR}/{name}"]
            args += ["--hostname", "sandbox", "--clearenv"]
            for key, value in self._env(channel_w, extra).items():
                args += ["--setenv", key, value]
            args += [
                "--chdir",
                "/tmp",
                "--remount-ro",
                "/dev",
                "--remount-ro",
                "/",
                "--",
                *self._stage_args(view, admin),
                *self._launch_args(limits, f"{_SANDBOX_DIR}/main.py", argv),
            ]
        except BaseException:
            for leftover in (*fds, *view, channel_r, channel_w, *extra.values()):
                if leftover is not None:
                    _close_quietly(leftover)
            raise
        keep = (*fds, *view, *extra.values(), *(() if channel_w is None else (channel_w,)))
        # _spawn closes `keep` right after the start: closing them twice could hit a descriptor that
        # another scoring thread has been handed since.
        return _spawn(
            args,
            stdin=stdin,
            limits=limits,
            pass_fds=keep,
            channel_r=channel_r,
            env={},
            cwd="/",
            uid=uid,
            backend="bwrap",
            memory_mode=self.memory_mode,
            on_channel=on_channel,
            gate_python=self.python,
            cleanup=(),
        )

    def _start_rlimits(
        self,
        named: dict[str, bytes],
        stdin: bytes,
        limits: Limits,
        channel: bool,
        argv: tuple[str, ...],
        extra: dict[str, int],
        on_channel: Callable[[bytes], None] | None,
        uid: int | None,
    ) -> Running:
        workdir = tempfile.mkdtemp(prefix="corrgrpo-unsafe-")
        channel_r, channel_w = os.pipe() if channel else (None, None)
        try:
            for name, data in named.items():
                Path(workdir, name).write_bytes(data)
            if uid is not None:
                os.chown(workdir, uid, uid)
            env = {
                **self._env(channel_w, extra),
                "HOME": workdir,
                "TMPDIR": workdir,
                "SANDBOX_PDEATHSIG": "1",
            }
            args = self._launch_args(limits, f"{workdir}/main.py", argv)
        except BaseException:
            for leftover in (channel_r, channel_w, *extra.values()):
                if leftover is not None:
                    _close_quietly(leftover)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        keep = (*extra.values(), *(() if channel_w is None else (channel_w,)))
        return _spawn(
            args,
            stdin=stdin,
            limits=limits,
            pass_fds=keep,
            channel_r=channel_r,
            env=env,
            cwd=workdir,
            uid=uid,
            backend="rlimits",
            memory_mode="rlimits",
            on_channel=on_channel,
            cleanup=(workdir,),
        )


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
            buffer += chunk[: cap - len(buffer)]
    except BlockingIOError:
        return


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_GATE = (
    "import os, sys\nfd = int(sys.argv[1])\nos.read(fd, 1)\nos.close(fd)\nos.execv(sys.argv[2], sys.argv[2:])"
)


def _spawn(
    args: list[str],
    *,
    stdin: bytes,
    limits: Limits,
    pass_fds: Sequence[int],
    channel_r: int | None,
    env: dict[str, str],
    cwd: str,
    uid: int | None,
    backend: str,
    memory_mode: MemoryMode,
    on_channel: Callable[[bytes], None] | None,
    cleanup: Sequence[str],
    gate_python: str | None = None,
) -> Running:
    stdin_r, stdin_w = os.pipe()
    start = time.monotonic()
    user = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    cgroup = gate_r = gate_w = None
    try:
        if memory_mode == "cgroup":
            parent = _cgroup.cgroup_parent()
            if parent is None:
                raise OSError("the delegated cgroup directory is no longer usable")
            cgroup = _cgroup.create(parent, limits.memory_mb << 20)
            # bwrap waits behind a tiny interpreter blocked on a pipe until it is inside the cgroup (dash
            # cannot name descriptors above 9 in a redirection, and /dev/fd is closed to the dropped uid).
            gate_r, gate_w = os.pipe()
            args = [gate_python or sys.executable, "-S", "-c", _GATE, str(gate_r), *args]
            pass_fds = (*pass_fds, gate_r)
        with _watch.spawn_lock:
            proc = subprocess.Popen(
                args,
                stdin=stdin_r,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=tuple(pass_fds),
                env=env,
                cwd=cwd,
                start_new_session=True,
                **user,
            )  # type: ignore[call-overload]
            _watch.owned(proc.pid, True)
        if cgroup is not None and gate_w is not None:
            try:
                _cgroup.enter(cgroup, proc.pid)
            except OSError:
                _kill_group(proc.pid)
                raise
            finally:
                os.write(gate_w, b"\n")
                os.close(gate_w)
                gate_w = None
    except OSError as exc:
        if gate_w is not None:
            _close_quietly(gate_w)
        if cgroup is not None:
            _cgroup.remove(cgroup)
        for fd in (stdin_r, stdin_w, *pass_fds, *(() if channel_r is None else (channel_r,))):
            _close_quietly(fd)
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)
        failed = RunResult(
            "sandbox_error",
            None,
            "",
            f"could not start the sandbox: {exc}",
            False,
            False,
            time.monotonic() - start,
            b"",
            backend,
            memory_mode,
        )
        return Running(None, failed)
    os.close(stdin_r)
    for fd in pass_fds:
        _close_quietly(fd)  # the child holds its copies; ours would keep pipes open forever
    return Running(
        proc,
        None,
        stdin=stdin,
        stdin_w=stdin_w,
        limits=limits,
        channel_r=channel_r,
        start=start,
        backend=backend,
        memory_mode=memory_mode,
        on_channel=on_channel,
        cleanup=cleanup,
        cgroup=cgroup,
    )


class Running:
    """A started sandbox run: ``wait()`` collects it (once) into a ``RunResult``; ``kill()`` ends it."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes] | None,
        result: RunResult | None,
        *,
        stdin: bytes = b"",
        stdin_w: int | None = None,
        limits: Limits | None = None,
        channel_r: int | None = None,
        start: float = 0.0,
        backend: str = "bwrap",
        memory_mode: MemoryMode = "watchdog",
        on_channel: Callable[[bytes], None] | None = None,
        cleanup: Sequence[str] = (),
        cgroup: str | None = None,
    ) -> None:
        self._proc = proc
        self._result = result
        self._lock = threading.Lock()
        self._killed = threading.Event()
        self._thread: threading.Thread | None = None
        self._stdin, self._stdin_w, self._limits = stdin, stdin_w, limits or Limits()
        self._channel_r, self._start, self._backend = channel_r, start, backend
        self._memory_mode, self._on_channel, self._cleanup = memory_mode, on_channel, tuple(cleanup)
        self._cgroup = cgroup

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def alive(self) -> bool:
        """Whether the sandbox is still running."""
        return self._proc is not None and self._result is None and self._proc.poll() is None

    def kill(self) -> None:
        """Kill the whole sandbox now (its collector then returns promptly)."""
        self._killed.set()
        if self._proc is not None:
            _kill_group(self._proc.pid)

    def collect_in_background(self) -> None:
        if self._thread is None and self._result is None:
            self._thread = threading.Thread(target=self.wait, name="sandbox-collector", daemon=True)
            self._thread.start()

    def wait(self) -> RunResult:
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            if self._result is None:
                try:
                    self._result = self._collect()
                finally:
                    if self._channel_r is not None:
                        _close_quietly(self._channel_r)
                    for path in self._cleanup:
                        shutil.rmtree(path, ignore_errors=True)
            return self._result

    def _collect(self) -> RunResult:
        proc, limits, channel_r, start = self._proc, self._limits, self._channel_r, self._start
        assert proc is not None
        assert self._stdin_w is not None
        # In cgroup mode the kernel enforces the cap; the watchdog still runs, with a cap it cannot reach
        # first, for the peak figure and as a second line.
        cap = limits.memory_mb << 20 if self._cgroup is None else 2 * (limits.memory_mb << 20)
        watch = _watch.Watch(proc.pid, cap, lambda: _kill_group(proc.pid))
        with watch:
            try:
                code, reason, buffers, truncated, out_fd, err_fd = self._loop(proc, limits, channel_r, start)
            finally:
                with _watch.spawn_lock:
                    _watch.owned(proc.pid, False)
        if watch.killed or (self._cgroup is not None and _cgroup.oom_killed(self._cgroup)):
            reason = "memory_limit"
        if self._cgroup is not None:
            _cgroup.remove(self._cgroup)
        wall = time.monotonic() - start
        channel_bytes = bytes(buffers[channel_r]) if channel_r is not None else b""
        status: Status
        if reason is not None:
            status = reason
        elif code == 0:
            status = "ok"
        elif code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            status = "timeout"  # RLIMIT_CPU
        elif self._backend == "bwrap" and code == 1 and bytes(buffers[err_fd]).startswith(b"bwrap:"):
            status = "sandbox_error"
        else:
            status = "error"
        return RunResult(
            status,
            code,
            bytes(buffers[out_fd]).decode("utf-8", "replace"),
            bytes(buffers[err_fd]).decode("utf-8", "replace"),
            truncated[out_fd],
            truncated[err_fd],
            wall,
            channel_bytes,
            self._backend,
            self._memory_mode,
            watch.peak_bytes,
        )

    def _loop(
        self, proc: subprocess.Popen[bytes], limits: Limits, channel_r: int | None, start: float
    ) -> tuple[int, Status | None, dict[int, bytearray], dict[int, bool], int, int]:
        feeder = threading.Thread(target=_feed, args=(self._stdin_w, self._stdin), daemon=True)
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
                if self._killed.is_set():
                    break
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _EXIT_GRACE:
                    break  # the program is done; whoever still holds its pipes (rlimits mode) is not waited for
                remaining = deadline - now
                if remaining <= 0:
                    reason = "timeout"
                    break
                for key, _ in selector.select(
                    timeout=min(remaining, 0.05 if exited_at is not None else 0.25)
                ):
                    fd = int(key.fd)
                    chunk = os.read(fd, _READ_CHUNK)
                    if not chunk:
                        selector.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    room = caps[fd] - len(buffers[fd])
                    buffers[fd] += chunk[: max(room, 0)]
                    if fd == channel_r and self._on_channel is not None and room > 0:
                        with contextlib.suppress(Exception):
                            self._on_channel(chunk[:room])
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
        if reason is not None or self._killed.is_set():
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
        proc.stdout.close()
        proc.stderr.close()
        feeder.join(timeout=1.0)
        return code, reason, buffers, truncated, out_fd, err_fd
