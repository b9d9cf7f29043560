"""Small seccomp filters for the sandbox (classic BPF, built here; standard library only).

``filter_program()`` is handed to ``bwrap --seccomp FD`` and holds for every process of a sandbox. It
refuses, with ``EPERM``:

* every system call made through another ABI than the machine's own (32-bit ``int 0x80`` calls on x86-64,
  x32 calls), which would otherwise reach the same kernel under other numbers;
* ``memfd_create``, ``memfd_secret`` and the System V ``shmget``, ``msgget``, ``semget``: memory that no
  process has mapped is resident nowhere, so a watchdog that sums the sandbox's resident memory would not
  see it (cgroups would; the tmpfs mounts are capped by size instead), and System V objects outlive
  processes, so a program could carry a cache from one timing round (or job) into the next through them;
  for the same reason POSIX message queues (``mq_open``) and kernel keys (``add_key``, ``request_key``,
  ``keyctl``);
* what reads or steers the host's page cache, which every sandbox shares: ``fadvise64`` (evicts pages
  of a read-only file), ``readahead``, ``mincore`` and ``cachestat`` (report residency), ``madvise`` with
  ``MADV_COLD``/``MADV_PAGEOUT`` (evict), ``preadv2``/``pwritev2`` with ``RWF_NOWAIT`` (fail on a page
  not cached: a residency probe);
* interfaces no judged program needs and whose work or memory is accounted elsewhere: ``io_uring_*``
  (kernel worker threads), ``userfaultfd``, ``perf_event_open``, ``bpf``, ``process_madvise``; and legacy
  AIO (``io_setup``, ``io_submit``, ``io_getevents``, ``io_pgetevents``, ``io_cancel``, ``io_destroy``),
  whose ``RWF_NOWAIT`` reads sit in memory where a filter cannot see them (a page-cache residency probe);
* ``unshare``/``clone`` with ``CLONE_NEWUSER``: the equivalent of ``bwrap --disable-userns`` for a
  bubblewrap too old to have it (a nested user namespace could mount its own, uncapped tmpfs);
* ``clone3`` with ``ENOSYS``, because its flags sit in memory where a filter cannot read them; the C
  library then falls back to ``clone``.

``session_filter()`` is stacked on top of it, inside a sandbox, for each *session* of the code judge's
servers (the candidate's program, or the reference), after the server forked it: it refuses creating
processes (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``; threads stay allowed, their time is
the process's), ``execve``, creating sockets or pipes and sending descriptors (``socket``,
``socketpair``, ``sendmsg``, ``sendmmsg``, ``pipe``, ``pipe2``: kernel buffers no memory cap sees, and
descriptors in flight count against a per-user quota), inotify/fanotify instances (per-user quotas),
anything that reaches another process (``ptrace``, ``process_vm_*``, ``kcmp``, ``pidfd_*``,
``prlimit64`` on any process but itself), making itself dumpable again (``prctl(PR_SET_DUMPABLE, n)``
with ``n`` not 0: the server made it non-dumpable, which keeps ``/proc/self/pagemap`` and the like
closed) and changes of scheduling or memory placement
(``setpriority``, ``sched_set*``, ``ioprio_set``, ``migrate_pages``, ``move_pages``).
"""

from __future__ import annotations

import errno
import os

__all__ = ["filter_program", "session_filter"]

# Per machine: AUDIT_ARCH, and system call numbers by name (only the ones the filters name).
# fmt: off
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "mincore": 27, "madvise": 28, "pipe": 22, "socket": 41, "sendmsg": 46, "socketpair": 53,
            "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "msgget": 68, "semget": 64, "shmget": 29,
            "ptrace": 101, "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144,
            "readahead": 187, "sched_setaffinity": 203, "fadvise64": 221, "mq_open": 240, "add_key": 248,
            "request_key": 249, "keyctl": 250, "ioprio_set": 251, "inotify_init": 253, "migrate_pages": 256,
            "unshare": 272, "move_pages": 279, "pipe2": 293, "inotify_init1": 294, "perf_event_open": 298,
            "fanotify_init": 300, "prlimit64": 302, "sendmmsg": 307, "process_vm_readv": 310,
            "process_vm_writev": 311, "kcmp": 312, "sched_setattr": 314, "memfd_create": 319, "bpf": 321,
            "execveat": 322, "userfaultfd": 323, "preadv2": 327, "pwritev2": 328,
            "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438,
            "process_madvise": 440, "memfd_secret": 447, "cachestat": 451, "prctl": 157, "io_setup": 206,
            "io_destroy": 207, "io_getevents": 208, "io_submit": 209, "io_cancel": 210, "io_pgetevents": 333,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "inotify_init1": 26, "ioprio_set": 30, "pipe2": 59, "unshare": 97, "ptrace": 117,
            "sched_setparam": 118, "sched_setscheduler": 119, "sched_setaffinity": 122, "setpriority": 140,
            "mq_open": 180, "msgget": 186, "semget": 190, "shmget": 194, "socket": 198, "socketpair": 199,
            "sendmsg": 211, "readahead": 213, "add_key": 217, "request_key": 218, "keyctl": 219,
            "clone": 220, "execve": 221, "fadvise64": 223, "mincore": 232, "madvise": 233,
            "migrate_pages": 238, "move_pages": 239, "perf_event_open": 241, "prlimit64": 261,
            "fanotify_init": 262, "sendmmsg": 269, "process_vm_readv": 270, "process_vm_writev": 271,
            "kcmp": 272, "sched_setattr": 274, "memfd_create": 279, "bpf": 280, "execveat": 281,
            "userfaultfd": 282, "preadv2": 286, "pwritev2": 287, "pidfd_send_signal": 424,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "pidfd_open": 434,
            "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "memfd_secret": 447,
            "cachestat": 451, "io_setup": 0, "io_destroy": 1, "io_submit": 2, "io_cancel": 3, "io_getevents": 4,
            "prctl": 167, "io_pgetevents": 292,
        },
    ),
}
_BASE_REFUSED = (
    "memfd_create", "memfd_secret", "shmget", "msgget", "semget", "mq_open", "add_key", "request_key",
    "keyctl", "fadvise64", "readahead", "mincore", "cachestat", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "userfaultfd", "perf_event_open", "bpf", "process_madvise", "io_setup",
    "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
)
_SESSION_REFUSED = (
    "fork", "vfork", "execve", "execveat", "socket", "socketpair", "sendmsg", "sendmmsg", "pipe", "pipe2",
    "inotify_init", "inotify_init1", "fanotify_init", "ptrace", "process_vm_readv", "process_vm_writev",
    "kcmp", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "setpriority", "sched_setparam",
    "sched_setscheduler", "sched_setaffinity", "sched_setattr", "ioprio_set", "migrate_pages",
    "move_pages",
)
# fmt: on
_CLONE_NEWUSER = 0x10000000
_CLONE_THREAD = 0x00010000
_MADV_COLD, _MADV_PAGEOUT = 20, 21
_PR_SET_DUMPABLE = 4
_RWF_NOWAIT = 0x00000008
_X32_BIT = 0x40000000
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW = 0x7FFF0000
_EPERM = 0x00050000 | errno.EPERM
_ENOSYS = 0x00050000 | errno.ENOSYS
# Offsets in struct seccomp_data: nr, arch, then instruction_pointer (8 bytes), then args[6] (8 bytes
# each, the low 32 bits first on these little-endian machines).
_NR, _ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index


Instruction = tuple[int, "str | int", "str | int", int]


def _assemble(program: list[Instruction], labels: dict[str, int]) -> bytes:
    out = bytearray()
    for index, (code, true, false, k) in enumerate(program):

        def offset(target: str | int, here: int = index) -> int:
            return target if isinstance(target, int) else labels[target] - here - 1

        out += (code).to_bytes(2, "little") + bytes((offset(true), offset(false))) + k.to_bytes(4, "little")
    return bytes(out)


def _build(machine: str | None, refused: tuple[str, ...], session: bool) -> bytes | None:
    arch = _ARCHES.get(machine or os.uname().machine)
    if arch is None:
        return None
    audit, numbers = arch
    program: list[Instruction] = []
    labels: dict[str, int] = {}

    def mark(name: str) -> None:
        labels[name] = len(program)

    program += [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, "nr", "deny", audit),
    ]
    mark("nr")
    program += [
        (_LD_ABS, 0, 0, _NR),
        (_JGE, "deny", 0, _X32_BIT) if audit == 0xC000003E else (_JEQ, 0, 0, 0xFFFFFFFF),
        *((_JEQ, "deny", 0, numbers[name]) for name in refused if name in numbers),
    ]
    if session:
        program += [
            (_JEQ, "clone_thread", 0, numbers["clone"]),
            (_JEQ, "enosys", 0, numbers["clone3"]),
            (_JEQ, "prctl", 0, numbers["prctl"]),
            (_JEQ, "prlimit_self", "allow", numbers["prlimit64"]),
        ]
        mark("prctl")  # prctl(PR_SET_DUMPABLE, nonzero): the server made it non-dumpable, and so it stays
        program += [
            (_LD_ABS, 0, 0, _arg(0)),
            (_JEQ, 0, "allow", _PR_SET_DUMPABLE),
            (_LD_ABS, 0, 0, _arg(1)),
            (_JEQ, "allow", "deny", 0),
        ]
        mark("clone_thread")  # a thread (CLONE_THREAD) only: its time is the process's own
        program += [(_LD_ABS, 0, 0, _arg(0)), (_JSET, "allow", "deny", _CLONE_THREAD)]
        mark("prlimit_self")  # prlimit64(0, ...): this process's own limits (what setrlimit calls)
        program += [(_LD_ABS, 0, 0, _arg(0)), (_JEQ, "allow", "deny", 0)]
    else:
        program += [
            (_JEQ, "enosys", 0, numbers["clone3"]),
            (_JEQ, "flags", 0, numbers["unshare"]),
            (_JEQ, "flags", 0, numbers["clone"]),
            (_JEQ, "advice", 0, numbers["madvise"]),
            (_JEQ, "rwf", 0, numbers["preadv2"]),
            (_JEQ, "rwf", "allow", numbers["pwritev2"]),
        ]
        mark("flags")
        program += [(_LD_ABS, 0, 0, _arg(0)), (_JSET, "deny", "allow", _CLONE_NEWUSER)]
        mark("advice")
        program += [
            (_LD_ABS, 0, 0, _arg(2)),
            (_JEQ, "deny", 0, _MADV_COLD),
            (_JEQ, "deny", "allow", _MADV_PAGEOUT),
        ]
        mark("rwf")
        program += [(_LD_ABS, 0, 0, _arg(5)), (_JSET, "deny", "allow", _RWF_NOWAIT)]
    mark("allow")
    program.append((_RET, 0, 0, _ALLOW))
    mark("deny")
    program.append((_RET, 0, 0, _EPERM))
    mark("enosys")
    program.append((_RET, 0, 0, _ENOSYS))
    return _assemble(program, labels)


def filter_program(machine: str | None = None) -> bytes | None:
    """The sandbox-wide filter as ``struct sock_filter`` array bytes, or None on an unknown architecture."""
    return _build(machine, _BASE_REFUSED, session=False)


def session_filter(machine: str | None = None) -> bytes | None:
    """The filter each judged session adds on top (see the module's docstring), or None."""
    return _build(machine, _SESSION_REFUSED, session=True)
