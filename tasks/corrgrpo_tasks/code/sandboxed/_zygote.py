"""Helpers of the long-lived processes at PID 1 of the judge's and the servers' sandboxes (standard library
C modules only; copied into each sandbox as ``/sandbox/_zygote.py``).

Such a process never runs the job's code itself: it forks a fresh process per job or session and, when
that is over, ``clean`` kills every other process of the namespace and reaps them, so nothing of one job
or session can run on into the next. The judge's sandbox also empties ``/tmp`` and ``/dev/shm`` (``wipe``:
only the dataset's test code writes there). The servers' sessions, which run the candidate's program, get
more (``Confinement``): each is PID 1 of a PID namespace of its own with a mount namespace of its own --
fresh tmpfs ``/tmp`` and ``/dev/shm`` (size and inode count capped; nothing of an earlier session, not
even the roots' modes, times or extended attributes, nor the file system's inode numbering) and a fresh
``/proc`` that shows only the session -- and it drops every capability and adds the session seccomp
filter before any of the program's code runs. When the session's last process dies, its file systems
go with its namespaces.
"""

# No contextlib here (start-up cost): try/except/pass it is.
# ruff: noqa: SIM105, S110

from __future__ import annotations

import _socket
import array
import os
import signal

__all__ = ["Confinement", "clean", "default_signals", "nodump", "recv_fds", "send_fds", "wipe"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 22, 2, 38, 47
_CAP_VERSION_3 = 0x20080522


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


def clean(child: int, *, wipe_tmp: bool = True) -> None:
    """Kill and reap every other process of the namespace, then (``wipe_tmp``) empty its private ``/tmp``
    and ``/dev/shm``. Outside a namespace of our own (unsafe mode, not PID 1) only ``child``'s process
    group is killed and nothing is wiped: those directories would be the host's."""
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
    if wipe_tmp:
        for top in ("/tmp", "/dev/shm"):
            wipe(top)


def nodump() -> None:
    """Make this process non-dumpable: no ptrace, no ``/proc/1/mem``, no ``pidfd_getfd`` from the jobs."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:  # noqa: BLE001 - best effort; PID 1 and the namespace still protect it
        pass


def default_signals() -> None:
    """Every catchable signal back to its default action. A namespace's init ignores a signal sent from
    inside its namespace unless it installed a handler, and Python installs one for SIGINT: with this,
    nothing inside can interrupt, stop or kill it."""
    for number in range(1, signal.NSIG):
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass


def own_pid_namespace() -> None:
    """Continue in a child that is PID 1 of a new PID namespace (owned by this sandbox's user namespace,
    so that it may create one per session); this process only waits for it and exits with its status."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
    child = os.fork()
    if child == 0:
        return
    default_signals()
    for fd in range(3, 1024):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == child:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


class Confinement:
    """What a server does around each session's fork (see the module's docstring).

    The server (PID 1 of its own namespace, holding ``CAP_SYS_ADMIN`` and ``CAP_SYS_CHROOT`` in the
    sandbox's user namespace) lives in a mount namespace of its own (its *home*). ``before_fork()``: the
    next child is PID 1 of a fresh PID namespace and starts in a fresh mount namespace with fresh
    ``/tmp`` and ``/dev/shm``, made here, so that none of that work is the session's processor time;
    ``after_fork()``: the server goes home. ``enter()`` in the child, before anything of the program: a
    fresh ``/proc`` (of its own PID namespace), working directory ``/tmp``, no capabilities,
    ``no_new_privs`` and the session filter (``bpf``: ``struct sock_filter`` array bytes). ``take()``
    hands the server the session's mount namespace after the session is gone: closing it unmounts its
    file systems, which waits for an RCU grace period, so the server does it after reporting the session
    clean, off the judge's critical path. ``namespaces=False`` (no namespace can be made: the rlimits-only
    mode) leaves only ``restrict()``.
    """

    def __init__(
        self,
        bpf: bytes,
        *,
        tmp_bytes: int,
        shm_bytes: int,
        tmp_inodes: int,
        shm_inodes: int,
        namespaces: bool = True,
    ) -> None:
        import ctypes

        self.ctypes = ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        self.libc = libc
        count = len(bpf) // 8
        self.filter = ctypes.create_string_buffer(bpf, len(bpf))

        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self.prog = _Prog(count, ctypes.addressof(self.filter))
        self.header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
        self.caps = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty (two words)
        self.mounts = (
            (b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={tmp_bytes},nr_inodes={tmp_inodes},mode=1777".encode()),
            (b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={shm_bytes},nr_inodes={shm_inodes},mode=1777".encode()),
        )  # fmt: skip
        self.session_ns = -1
        if not namespaces:
            return
        self.pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        # A mount namespace of our own, owned by this sandbox's user namespace (bubblewrap's is not), so
        # that we may come back to it after making each session's.
        self._check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        self._check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount(MS_PRIVATE)")
        self.home = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            raise OSError(self.ctypes.get_errno(), what)

    def before_fork(self) -> None:
        libc = self.libc
        # After a session's namespace is gone, children would go nowhere: back to our own one first.
        self._check(libc.setns(self.pid_ns, _CLONE_NEWPID), "setns(CLONE_NEWPID)")
        self._check(libc.unshare(_CLONE_NEWPID), "unshare(CLONE_NEWPID)")
        if self.session_ns >= 0:  # a session that was never ended: its namespace goes now
            os.close(self.session_ns)
        self._check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        self.session_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        for source, target, kind, flags, data in self.mounts:
            self._check(libc.mount(source, target, kind, flags, data), f"mount {target.decode()}")

    def after_fork(self) -> None:
        self._check(self.libc.setns(self.home, _CLONE_NEWNS), "setns(CLONE_NEWNS)")

    def enter(self) -> None:
        for fd in (self.pid_ns, self.home, self.session_ns):
            os.close(fd)
        flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        self._check(self.libc.mount(b"proc", b"/proc", b"proc", flags, None), "mount /proc")
        os.chdir("/tmp")
        self.restrict()

    def take(self) -> int:
        """The last session's mount namespace (a descriptor, or -1); the caller closes it."""
        namespace, self.session_ns = self.session_ns, -1
        return namespace

    def restrict(self) -> None:
        """No capabilities, no new privileges, the session filter (also where no namespace is possible)."""
        libc = self.libc
        self._check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        self._check(libc.capset(self.header, self.caps), "capset")
        libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL (capset already emptied it)
        prog = self.ctypes.addressof(self.prog)
        self._check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, prog, 0, 0), "seccomp")
