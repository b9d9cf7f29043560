"""The sandbox API on its own: isolation, limits, output capture, refusal without bubblewrap."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from corrgrpo_tasks.sandbox import INSTALL_HINT, Limits, Sandbox, SandboxUnavailableError, probe


def test_bwrap_probe_reports_working_sandbox() -> None:
    ok, reason = probe()
    assert ok, f"bubblewrap does not work here: {reason}"


def test_stdin_stdout_and_exit_code(box: Sandbox) -> None:
    result = box.run("import sys\nprint(input()[::-1])\nsys.exit(3)", stdin="abc")
    assert (result.status, result.exit_code, result.stdout) == ("error", 3, "cba\n")
    assert box.run("print('hi')").ok


def test_clean_environment_unprivileged_and_no_host_files(box: Sandbox) -> None:
    os.environ["CORRGRPO_SANDBOX_SECRET"] = "s3cret"
    try:
        result = box.run(
            "import os\n"
            "print(sorted(os.environ))\n"
            "print(os.getuid(), os.geteuid())\n"
            "print(sorted(os.listdir('/')))\n"
            "print(os.path.exists('/root'), os.path.exists('/home'), os.path.exists('/work'))\n"
            "print(os.listdir('/tmp'))\n"
        )
    finally:
        del os.environ["CORRGRPO_SANDBOX_SECRET"]
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert "CORRGRPO_SANDBOX_SECRET" not in result.stdout
    assert "s3cret" not in result.stdout
    assert lines[1] != "0 0"
    assert "root" not in lines[2]
    assert "home" not in lines[2]
    assert lines[3] == "False False False"
    assert lines[4] == "[]"


def test_root_is_read_only_and_tmp_is_private_and_capped(box: Sandbox) -> None:
    result = box.run(
        "import errno\n"
        "for path in ('/usr/evil', '/evil', '/sandbox/evil', '/dev/evil'):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('denied', path)\n"
        "open('/tmp/ok', 'w').write('x')\n"
        "try:\n"
        "    open('/tmp/big', 'wb').write(b'x' * (8 << 20))\n"
        "except OSError as exc:\n"
        "    print('full', exc.errno in (errno.ENOSPC, errno.EFBIG))\n",
        limits=Limits(tmp_mb=4),
    )
    assert "wrote" not in result.stdout, result.stdout
    assert result.stdout.count("denied") == 4
    assert "full True" in result.stdout or result.exit_code == 128 + 25  # SIGXFSZ


def test_wall_clock_timeout_kills(box: Sandbox) -> None:
    result = box.run("import time\ntime.sleep(30)", limits=Limits(wall_seconds=0.5))
    assert result.status == "timeout"
    assert result.wall_seconds < 3


def test_cpu_limit(box: Sandbox) -> None:
    result = box.run("while True: pass", limits=Limits(wall_seconds=10, cpu_seconds=1))
    assert result.status == "timeout"
    assert result.wall_seconds < 5


def test_output_is_capped_and_killed(box: Sandbox) -> None:
    result = box.run("import os\nwhile True: os.write(1, b'x' * 65536)", limits=Limits(output_bytes=1000))
    assert result.status == "output_limit"
    assert result.stdout_truncated
    assert len(result.stdout) == 1000


def test_memory_limit(box: Sandbox) -> None:
    result = box.run("x = bytearray(600 << 20)\nprint('allocated')", limits=Limits(memory_mb=256))
    assert result.status == "error"
    assert "MemoryError" in result.stderr


def test_process_limit(box: Sandbox) -> None:
    result = box.run(
        "import os, time\nn = 0\ntry:\n    for _ in range(100):\n        if os.fork() == 0:\n"
        "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)",
        limits=Limits(processes=8, wall_seconds=3),
    )
    assert int(result.stdout.split()[0]) < 8


def test_open_files_limit(box: Sandbox) -> None:
    result = box.run(
        "fs = []\ntry:\n    while True:\n        fs.append(open('/dev/null'))\nexcept OSError:\n"
        "    print(len(fs))",
        limits=Limits(open_files=16),
    )
    assert int(result.stdout) < 16


def test_no_network_even_to_host_loopback(box: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    thread = threading.Thread(target=serve)
    thread.start()
    result = box.run(
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    print('connected')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n"
        "import os\nprint(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'no-sys')"
    )
    thread.join()
    server.close()
    assert "connected" not in result.stdout
    assert not accepted
    assert "refused" in result.stdout


def test_proc_shows_only_the_sandbox(box: Sandbox) -> None:
    result = box.run(
        "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        f"print(os.path.exists('/proc/{os.getpid()}/environ'))"
    )
    pids, visible = result.stdout.splitlines()
    assert len(eval(pids)) <= 3  # bwrap's init, the program (and maybe a reaper)
    assert visible == "False" or os.getpid() < 4


def test_channel_and_files(box: Sandbox) -> None:
    result = box.run(
        "import os\nos.write(int(os.environ['SANDBOX_CHANNEL_FD']), open('/sandbox/data.txt').read()"
        ".encode())",
        files={"data.txt": "payload"},
        channel=True,
    )
    assert result.ok
    assert result.channel == b"payload"
    with pytest.raises(ValueError, match="invalid sandbox file name"):
        box.run("pass", files={"../x": "y"})


def test_limits_validation() -> None:
    with pytest.raises(ValueError, match="wall_seconds"):
        Limits(wall_seconds=0)
    with pytest.raises(ValueError, match="processes"):
        Limits(processes=1)
    assert Limits(wall_seconds=2.5).launcher_arg().startswith("3,")


def test_refuses_without_bubblewrap_and_says_how_to_install() -> None:
    ok, reason = probe("/nonexistent/bwrap")
    assert not ok
    assert "apt-get install -y bubblewrap" in reason
    with pytest.raises(SandboxUnavailableError, match="apt-get install -y bubblewrap"):
        Sandbox(bwrap="/nonexistent/bwrap")
    assert "allow_unsafe=True" in INSTALL_HINT
    with pytest.raises(ValueError, match="allow_unsafe"):
        Sandbox(backend="rlimits")


def test_unsafe_mode_only_on_request_and_still_limits() -> None:
    with pytest.warns(RuntimeWarning, match="resource limits only"):
        unsafe = Sandbox(allow_unsafe=True, bwrap="/nonexistent/bwrap")
    assert unsafe.backend == "rlimits"
    assert unsafe.run("print(input())", stdin="x").stdout == "x\n"
    assert unsafe.run("while True: pass", limits=Limits(wall_seconds=0.5)).status == "timeout"
    assert "MemoryError" in unsafe.run("x = bytearray(600 << 20)", limits=Limits(memory_mb=256)).stderr


def test_python_paths_are_importable_and_read_only(box: Sandbox) -> None:
    del box
    root = Path(tempfile.mkdtemp(prefix="corrgrpo-pypath-"))
    try:
        root.chmod(0o755)  # the sandbox user must be able to reach it
        (root / "helper_mod_x.py").write_text("VALUE = 42\n")
        (root / "helper_mod_x.py").chmod(0o644)
        result = Sandbox(python_paths=[str(root)]).run(
            "import helper_mod_x\nprint(helper_mod_x.VALUE)\n"
            f"try:\n    open('{root}/new.py', 'w')\nexcept OSError:\n    print('read-only')"
        )
        assert result.stdout.split() == ["42", "read-only"]
        assert sorted(p.name for p in root.iterdir()) == ["helper_mod_x.py"]
    finally:
        shutil.rmtree(root)
    with pytest.raises(ValueError, match="python_paths"):
        Sandbox(python_paths=["/nonexistent/dir"])


def _sandboxed_sleepers(mark: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if cmdline == b"sleep\0" + mark.encode() + b"\0" and state != "Z":
                pids.append(int(entry.name))
    return pids


def test_sandbox_dies_with_the_scoring_process(box: Sandbox) -> None:
    del box
    mark = "4242.75"  # the sandboxed program's command line carries it (as an argument)
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "from corrgrpo_tasks.sandbox import Sandbox, Limits\n"
                'Sandbox().run(\'import os; os.execv("/bin/sleep", ["sleep", "' + mark + "\"])', "
                "limits=Limits(wall_seconds=60))\n"
            ),
        ]
    )
    try:
        deadline = time.monotonic() + 20
        while not _sandboxed_sleepers(mark):
            assert time.monotonic() < deadline, "the sandboxed program never started"
            assert parent.poll() is None, "the scoring process exited early"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while _sandboxed_sleepers(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandboxed_sleepers(mark) == []
