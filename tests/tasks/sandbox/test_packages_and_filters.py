"""Named packages inside the sandbox, per-lane uids, kept capabilities and the seccomp filters' refusals."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from corrgrpo_tasks.sandbox import SANDBOX_UIDS, Sandbox
from corrgrpo_tasks.sandbox._core import package_paths
from corrgrpo_tasks.sandbox._seccomp import filter_program, session_filter

NUMPY = "import numpy\nprint(int(numpy.arange(4).sum()), numpy.__file__)\n"


def test_named_packages_import_read_only_and_only_when_named(box: Sandbox) -> None:
    pytest.importorskip("numpy")
    missing = box.run(NUMPY)
    assert missing.status == "error"
    assert "No module named 'numpy'" in missing.stderr
    with_numpy = Sandbox(packages=("numpy",))
    result = with_numpy.run(
        NUMPY + "import sys\nprint(sys.path[0])\n"
        "try:\n    open(numpy.__file__, 'a')\nexcept OSError as exc:\n    print(type(exc).__name__)\n"
    )
    assert result.ok, result.stderr
    total, where, first, refused = result.stdout.split()
    assert total == "6"
    assert where.startswith("/sandbox-packages/numpy/")
    assert first == "/sandbox-packages"
    assert refused in ("OSError", "PermissionError")  # read-only


def test_package_paths_include_bundled_libraries_and_refuse_unknown_names() -> None:
    pytest.importorskip("numpy")
    paths = package_paths(("numpy",))
    assert os.path.basename(paths[0]) == "numpy"
    assert all(os.path.isdir(p) for p in paths)
    with pytest.raises(ValueError, match="not installed"):
        package_paths(("no_such_package_corrgrpo",))
    with pytest.raises(ValueError, match="top-level import names"):
        package_paths(("numpy.linalg",))


def test_a_uid_per_sandbox_and_kept_capabilities(box: Sandbox) -> None:
    if os.geteuid() != 0:
        pytest.skip("a sandbox runs as a chosen uid only when the scorer is root")
    uid = SANDBOX_UIDS[7]
    show = "import os\nprint(os.getuid(), open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
    plain = box.start(show, uid=uid).wait()
    admin = box.start(show, uid=uid, keep_caps=("CAP_SYS_ADMIN",)).wait()
    assert plain.stdout.split() == [str(uid), "0000000000000000"]
    assert admin.stdout.split() == [str(uid), "0000000000200000"]  # bit 21: CAP_SYS_ADMIN, in its namespace
    with pytest.raises(ValueError, match="SANDBOX_UIDS"):
        box.start("pass", uid=0)
    with pytest.raises(ValueError, match="capability names"):
        box.start("pass", keep_caps=("ALL; rm",))


def test_sandbox_filter_refuses_page_cache_probes_and_kernel_side_work(box: Sandbox) -> None:
    probe = textwrap.dedent(
        """
        import ctypes, errno, json, mmap, os
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        fd = os.open('/usr/bin/env', os.O_RDONLY)
        anon = mmap.mmap(-1, 4096)
        page = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(anon)))
        buf = ctypes.create_string_buffer(16)
        class Vec(ctypes.Structure):
            _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
        vec = Vec(ctypes.addressof(buf), 16)
        def sys(*args):
            return 'ok' if libc.syscall(*args) >= 0 else errno.errorcode[ctypes.get_errno()]
        code = libc.posix_fadvise(fd, 0, 0, 4)  # POSIX_FADV_DONTNEED; returns the error number
        out = {'posix_fadvise': 'ok' if code == 0 else errno.errorcode[code]}
        out['readahead'] = sys(187, fd, 0, 4096)
        out['mincore'] = sys(27, page, 4096, buf)
        out['madvise_pageout'] = sys(28, page, 4096, 21)
        out['madvise_cold'] = sys(28, page, 4096, 20)
        out['preadv2_nowait'] = sys(327, fd, ctypes.byref(vec), 1, 0, 0, 8)
        out['cachestat'] = sys(451, fd, 0, 0, 0)
        for name, number in (('io_uring_setup', 425), ('userfaultfd', 323), ('perf_event_open', 298),
                             ('bpf', 321), ('memfd_secret', 447)):
            out[name] = sys(number, 0, 0, 0, 0, 0)
        plain = {'preadv2': sys(327, fd, ctypes.byref(vec), 1, 0, 0, 0), 'madvise': sys(28, page, 4096, 4)}
        print(json.dumps([sorted(out.items()), sorted(plain.items())]))
        """
    )
    if os.uname().machine != "x86_64":
        pytest.skip("the probe uses x86-64 system call numbers")
    result = box.run(probe)
    assert result.ok, result.stderr
    refused, allowed = (dict(part) for part in json.loads(result.stdout))
    assert refused == dict.fromkeys(refused, "EPERM"), refused
    assert allowed == {"preadv2": "ok", "madvise": "ok"}  # the same calls without the probing flags


def test_filters_assemble_for_every_known_machine() -> None:
    for machine in ("x86_64", "aarch64"):
        for build in (filter_program, session_filter):
            program = build(machine)
            assert program is not None
            assert len(program) % 8 == 0
            assert len(program) // 8 < 256  # jumps are 8-bit
    assert filter_program("sparc") is None
    assert session_filter("sparc") is None
