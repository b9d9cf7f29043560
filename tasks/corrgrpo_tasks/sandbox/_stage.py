"""Pre-stage of a sandbox with private files (``Sandbox.start(private_files=True)``); not imported by the
package: its text is passed to the interpreter with ``-c``, before the launcher, so before any limit.

Arguments: ``MANIFEST_FD DROP_ADMIN COMMAND...``. The manifest (JSON, from ``_view.manifest``) lists the
directories, files and symbolic links of the sandbox's file view. In a mount namespace of its own, this
copies them into a fresh tmpfs, binds the copy read-only over every mount point whose file system is not
already memory-only (``/usr``, ``/etc/ld.so.cache``, the packages, ...: bubblewrap's binds of host files),
then replaces itself with ``COMMAND``, so that nothing of the host's files stays mapped either. From then
on every file the sandbox can open or map is in memory for good (tmpfs pages are always resident on a
machine without swap): which of its pages are "cached" says nothing about any other sandbox.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

_MEMORY_ONLY = {"tmpfs", "proc", "devtmpfs", "devpts", "mqueue", "ramfs", "sysfs", "cgroup2", "cgroup"}
_STAGE = "/tmp"  # bubblewrap's /tmp, covered by the staging tmpfs while the copy is made
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = (
    0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000, 0x40000,
)  # fmt: skip
_MNT_DETACH = 2
_CAP_SYS_ADMIN = 21

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _cover_points() -> list[str]:
    """Mount points of the sandbox whose files live in the host's page cache, outermost first."""
    points: list[str] = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            kind = fields[fields.index("-") + 1]
            if kind not in _MEMORY_ONLY:
                points.append(_unescape(fields[4]))
    points.sort(key=lambda p: (p.count("/"), p))
    outer: list[str] = []
    for point in points:
        if not any(point == o or point.startswith(o.rstrip("/") + "/") for o in outer):
            outer.append(point)
    return outer


def _copy(source: str, target: str, mode: int) -> None:
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode & 0o555)
        try:
            info = os.fstat(src)
            offset = 0
            while offset < info.st_size:
                sent = os.sendfile(dst, src, offset, info.st_size - offset)
                if sent == 0:
                    break
                offset += sent
            # The source's times: a cached .pyc is valid only for its source's modification time.
            os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _build(entries: list[tuple[str, str, str, int]], points: list[str], total: int) -> None:
    _check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount(MS_PRIVATE)")
    options = f"size={total + (8 << 20)},nr_inodes={len(entries) + len(points) + 1024},mode=755"
    _check(libc.mount(b"tmpfs", _STAGE.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()), "stage")
    files = [p for p in points if not os.path.isdir(p)]
    for point in points:
        os.makedirs(os.path.dirname(_STAGE + point), exist_ok=True)
        if point in files:
            open(_STAGE + point, "wb").close()
        else:
            os.makedirs(_STAGE + point, exist_ok=True)
    for kind, dest, extra, mode in entries:  # all below a host bind (the rest is bubblewrap's own)
        target = _STAGE + dest
        if kind == "d":
            os.makedirs(target, exist_ok=True)
        elif kind == "l":
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(extra, target)
        elif dest in files:
            os.unlink(target)
            _copy(dest, target, mode)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _copy(dest, target, mode)
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    for point in points:
        _check(libc.mount((_STAGE + point).encode(), point.encode(), None, _MS_BIND, None), f"bind {point}")
        _check(libc.mount(None, point.encode(), None, flags, None), f"read-only {point}")
    os.chdir("/")
    _check(libc.umount2(_STAGE.encode(), _MNT_DETACH), "umount stage")


def _drop_admin() -> None:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capget(header, data), "capget")
    mask = ~(1 << _CAP_SYS_ADMIN) & 0xFFFFFFFF
    for index in (0, 1, 2):  # effective, permitted, inheritable (low words; CAP_SYS_ADMIN is bit 21)
        data[index] &= mask
    _check(libc.capset(header, data), "capset")
    libc.prctl(47, 3, _CAP_SYS_ADMIN, 0, 0)  # PR_CAP_AMBIENT_LOWER (capset already cleared it)


def _main() -> None:
    fd, drop, command = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
    with os.fdopen(fd, "rb") as handle:
        entries = [(str(k), str(d), str(x), int(m)) for k, d, x, m in json.loads(handle.read())]
    try:
        points = _cover_points()
        entries = [
            e for e in entries if any(e[1] == p or e[1].startswith(p.rstrip("/") + "/") for p in points)
        ]
        total = sum(os.stat(e[1]).st_size for e in entries if e[0] == "f")
        _build(entries, points, total)
        if drop:
            _drop_admin()
    except OSError as exc:
        sys.stderr.write(f"sandbox: private file view failed: {exc}\n")
        os._exit(125)
    os.execv(command[0], command)


if __name__ == "__main__":
    _main()
