"""The file view of a sandbox with private files: what ``_stage.py`` copies into memory (see there).

``manifest(python, binds)`` lists, as ``(kind, destination, source or link target, mode)`` with kind
``"d"``, ``"f"`` or ``"l"`` (a file's source is its host path; inside the sandbox it is at its
destination, where the pre-stage copies it from): the interpreter and the chain of symbolic links to it, its standard library
(without ``config-*``, the static library, and without the site-packages below it), the shared libraries
that the interpreter and every extension module of the view load (as ``ldd`` resolves them), the dynamic
linker's configuration, ``/etc/localtime``, the ``C.UTF-8`` locale and ``gconv-modules.cache`` (both
mapped at start-up), and every host directory the sandbox binds (``binds``: the packages, python paths,
site-packages). Nothing else of ``/usr`` is in the view.
"""

from __future__ import annotations

import glob
import json
import os
import stat
import subprocess
from collections.abc import Sequence

__all__ = ["VIEW_CAP_BYTES", "manifest"]

Entry = tuple[str, str, str, int]
#: The largest view a sandbox may copy into memory (per sandbox that asks for private files).
VIEW_CAP_BYTES = 2 << 30
_SKIP_IN_STDLIB = ("site-packages", "dist-packages")
_SHOW_PATH = "import json, sys\nprint(json.dumps([p for p in sys.path if p]))"


def _chain(path: str, out: dict[str, Entry], depth: int = 0) -> None:
    """``path`` and every symbolic link met on the way to it (component by component)."""
    parts = [p for p in path.split("/") if p]
    current = ""
    for index, part in enumerate(parts):
        step = f"{current}/{part}"
        if depth < 40 and os.path.islink(step):
            target = os.readlink(step)
            out.setdefault(step, ("l", step, target, 0))
            rest = "/".join(parts[index + 1 :])
            resolved = os.path.normpath(os.path.join(current or "/", target))
            _chain(f"{resolved}/{rest}" if rest else resolved, out, depth + 1)
            return
        current = step
    _walk(current, current, out, top_skip=())


def _walk(source: str, dest: str, out: dict[str, Entry], top_skip: Sequence[str]) -> None:
    try:
        info = os.lstat(source)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        out.setdefault(dest, ("l", dest, os.readlink(source), 0))
    elif stat.S_ISREG(info.st_mode):
        out.setdefault(dest, ("f", dest, source, stat.S_IMODE(info.st_mode)))
    elif stat.S_ISDIR(info.st_mode):
        out.setdefault(dest, ("d", dest, "", stat.S_IMODE(info.st_mode)))
        try:
            names = sorted(os.listdir(source))
        except OSError:
            return
        for name in names:
            if name not in top_skip and not (top_skip and name.startswith("config-")):
                _walk(os.path.join(source, name), os.path.join(dest, name), out, top_skip=())


def _libraries(binaries: list[str]) -> list[str]:
    """The shared libraries ``binaries`` load, as the dynamic linker resolves them (``ldd``)."""
    if not binaries:
        return []
    try:
        text = subprocess.run(
            ["ldd", *binaries], capture_output=True, text=True, timeout=120, check=False, env={}
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise OSError(
            f"private file view: `ldd` failed ({exc}); it is needed to find shared libraries"
        ) from exc
    found = []
    for line in text.splitlines():
        for word in line.split():
            if word.startswith("/") and not word.endswith(":") and os.path.exists(word):
                found.append(word)
    return sorted(set(found))


def manifest(python: str, binds: Sequence[tuple[str, str]]) -> bytes:
    """The view's entries as JSON bytes (see the module's docstring); ``binds`` are (host path, path in
    the sandbox) pairs. Raises ``ValueError`` past ``VIEW_CAP_BYTES``."""
    out: dict[str, Entry] = {}
    _chain(python, out)
    shown = subprocess.run(
        [python, "-S", "-B", "-c", _SHOW_PATH], capture_output=True, text=True, timeout=60, check=True, env={}
    )
    for entry in json.loads(shown.stdout):
        if os.path.isdir(entry):
            real = os.path.realpath(entry)
            _walk(real, real, out, top_skip=_SKIP_IN_STDLIB)
    for source, dest in binds:
        _walk(os.path.realpath(source), dest, out, top_skip=())
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(path):
            _walk(os.path.realpath(path), path, out, top_skip=())
    for path in ("/usr/lib/locale/C.utf8", *glob.glob("/usr/lib/*/gconv/gconv-modules.cache")):
        if os.path.exists(path):
            _chain(path, out)
    binaries = [e[2] for e in out.values() if e[0] == "f" and (".so" in e[1] or e[1] == python)]
    inside = tuple(os.path.realpath(source) + "/" for source, _ in binds)
    for library in _libraries(binaries):
        if not os.path.realpath(library).startswith(inside):  # else it is in the view already, bound
            _chain(library, out)
    total = sum(os.stat(e[2]).st_size for e in out.values() if e[0] == "f")
    if total > VIEW_CAP_BYTES:
        raise ValueError(
            f"the sandbox's private file view would hold {total >> 20} MiB (over {VIEW_CAP_BYTES >> 20} MiB): "
            "name fewer packages or python paths"
        )
    return json.dumps(sorted(out.values(), key=lambda e: e[1])).encode()
