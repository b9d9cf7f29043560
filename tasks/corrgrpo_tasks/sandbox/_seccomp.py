"""A small seccomp filter for the sandbox (classic BPF, built here, handed to ``bwrap --seccomp FD``).

It refuses, with ``EPERM``:

* every system call made through another ABI than the machine's own (32-bit ``int 0x80`` calls on x86-64,
  x32 calls), which would otherwise reach the same kernel under other numbers;
* ``memfd_create`` and the System V ``shmget``, ``msgget``, ``semget``: memory that no process has
  mapped is resident nowhere, so a watchdog that sums the sandbox's resident memory would not see it
  (cgroups would; the tmpfs mounts are capped by size instead), and System V objects outlive processes,
  so a program could carry a cache from one timing round (or job) into the next through them; for the
  same reason POSIX message queues (``mq_open``) and kernel keys (``add_key``, ``request_key``,
  ``keyctl``);
* ``unshare``/``clone`` with ``CLONE_NEWUSER``: the equivalent of ``bwrap --disable-userns`` for a
  bubblewrap too old to have it (a nested user namespace could mount its own, uncapped tmpfs);
* ``clone3`` with ``ENOSYS``, because its flags sit in memory where a filter cannot read them; the C
  library then falls back to ``clone``.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["filter_program"]

_ARCHES = {  # machine: (AUDIT_ARCH, unshare, clone, clone3, refused...)
    # refused: memfd_create, shmget, msgget, semget, mq_open, add_key, request_key, keyctl
    "x86_64": (0xC000003E, 272, 56, 435, (319, 29, 68, 64, 240, 248, 249, 250)),
    "aarch64": (0xC00000B7, 97, 220, 435, (279, 194, 186, 190, 180, 217, 218, 219)),
}
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW = 0x7FFF0000
_EPERM = 0x00050000 | errno.EPERM
_ENOSYS = 0x00050000 | errno.ENOSYS


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter as ``struct sock_filter`` array bytes, or None on an architecture it does not know."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, unshare, clone, clone3, refused = arch
    # (code, jump-if-true label, jump-if-false label, k); labels name instructions below.
    program: list[tuple[int, str | int, str | int, int]] = [
        (_LD_ABS, 0, 0, 4),  # A = seccomp_data.arch
        (_JEQ, "nr", "deny", audit),
    ]
    labels: dict[str, int] = {}

    def mark(name: str) -> None:
        labels[name] = len(program)

    mark("nr")
    program += [
        (_LD_ABS, 0, 0, 0),  # A = seccomp_data.nr
        (_JGE, "deny", 0, _X32_BIT) if audit == 0xC000003E else (_JEQ, 0, 0, 0xFFFFFFFF),
        *((_JEQ, "deny", 0, number) for number in refused),
        (_JEQ, "enosys", 0, clone3),
        (_JEQ, "flags", 0, unshare),
        (_JEQ, "flags", "allow", clone),
    ]
    mark("flags")
    program += [
        (_LD_ABS, 0, 0, 16),  # A = low 32 bits of args[0] (little-endian)
        (_JSET, "deny", "allow", _CLONE_NEWUSER),
    ]
    mark("allow")
    program.append((_RET, 0, 0, _ALLOW))
    mark("deny")
    program.append((_RET, 0, 0, _EPERM))
    mark("enosys")
    program.append((_RET, 0, 0, _ENOSYS))
    out = bytearray()
    for index, (code, true, false, k) in enumerate(program):

        def offset(target: str | int, here: int = index) -> int:
            return target if isinstance(target, int) else labels[target] - here - 1

        out += struct.pack("=HBBI", code, offset(true), offset(false), k)
    return bytes(out)
