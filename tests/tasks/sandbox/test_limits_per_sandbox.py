"""Limits hold per sandbox, nested user namespaces and unaccounted memory are refused, the probe demands
proof of isolation, and a scorer running as PID 1 leaves no zombies."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from corrgrpo_tasks.sandbox import Limits, Sandbox, probe

ATTEMPTS = textwrap.dedent("""\
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    print("unshare_user", libc.unshare(0x10000000))
    print("clone_user", libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0))
    print("memfd", libc.syscall(319, b"x", 0))
    print("shmget", libc.shmget(0, 1 << 20, 0o1600))
    print("msgget", libc.msgget(0, 0o1600))
    print("semget", libc.semget(0, 1, 0o1600))
    print("mq_open", libc.syscall(240, b"/q", 0o100 | 2, 0o600, 0))
    print("add_key", libc.syscall(248, b"user", b"k", b"v", 1, -2))
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    print("fork_ok", int(os.waitpid(pid, 0)[0] == pid))
""")


def test_memory_is_capped_for_the_whole_sandbox(box: Sandbox) -> None:
    # Eight processes of 200 MiB each: every one is far below RLIMIT_AS, together they pass the cap.
    result = box.run(
        textwrap.dedent("""\
        import os, time
        for _ in range(8):
            if os.fork() == 0:
                block = bytearray(200 << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                time.sleep(30)
        time.sleep(30)
    """),
        limits=Limits(wall_seconds=20, memory_mb=512),
    )
    assert result.status == "memory_limit", result
    assert result.memory_mode == box.memory_mode == "watchdog"
    assert result.wall_seconds < 15


def test_memory_of_orphans_still_counts(box: Sandbox) -> None:
    result = box.run(
        textwrap.dedent("""\
        import os, time
        for _ in range(4):
            if os.fork() == 0:
                if os.fork() == 0:
                    block = bytearray(200 << 20)
                    for i in range(0, len(block), 4096):
                        block[i] = 1
                    time.sleep(30)
                os._exit(0)
        time.sleep(30)
    """),
        limits=Limits(wall_seconds=20, memory_mb=512),
    )
    assert result.status == "memory_limit", result


def test_honest_program_below_the_cap_is_untouched(box: Sandbox) -> None:
    result = box.run("block = bytearray(100 << 20)\nprint(len(block) >> 20)", limits=Limits(memory_mb=512))
    assert (result.status, result.stdout) == ("ok", "100\n")
    assert result.peak_memory_bytes < 512 << 20


@pytest.mark.parametrize("userns_filter", [False, True], ids=["disable-userns", "seccomp-equivalent"])
def test_no_user_namespaces_and_no_unaccounted_memory(userns_filter: bool, box: Sandbox) -> None:
    del box
    sandbox = Sandbox(_userns_filter=userns_filter)
    lines = dict(line.split() for line in sandbox.run(ATTEMPTS).stdout.splitlines())
    assert lines["unshare_user"] == "-1"
    assert lines["clone_user"] == "-1"
    assert lines["memfd"] == lines["shmget"] == lines["msgget"] == lines["semget"] == "-1"
    assert lines["mq_open"] == lines["add_key"] == "-1"
    assert lines["fork_ok"] == "1"  # ordinary processes and threads still work


def test_probe_refuses_a_bwrap_that_does_not_isolate(tmp_path: Path) -> None:
    # A stand-in that claims every feature and runs the program without any isolation.
    fake = tmp_path / "bwrap"
    fake.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys, tempfile
        args = sys.argv[1:]
        if args == ["--help"]:
            print("--disable-userns --seccomp --as-pid-1")
            sys.exit(0)
        files = {{}}
        i = 0
        while args[i] != "--":
            if args[i] == "--ro-bind-data":
                files[args[i + 2]] = int(args[i + 1])
                i += 3
                continue
            i += 1
        command = args[i + 1:]
        root = tempfile.mkdtemp()
        for dest, fd in files.items():
            path = os.path.join(root, os.path.basename(dest))
            with open(path, "wb") as out:
                out.write(os.read(fd, 1 << 24))
            command = [path if part == dest else part for part in command]
        os.execv(command[0], command)
    """)
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    tmp_path.chmod(0o755)
    ok, reason = probe(str(fake), None)
    assert not ok
    assert "does not isolate" in reason or "failed" in reason, reason


def test_scorer_as_pid_1_leaves_no_zombies(box: Sandbox) -> None:
    del box
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.fail("this check runs the scorer as PID 1 of a new PID namespace: it needs root and unshare")
    script = textwrap.dedent("""\
        import os, time
        from corrgrpo_tasks.code import compute_score
        assert os.getpid() == 1
        gt = {"prompt": "", "entry_point": "f", "test": "def check(candidate):\\n    assert candidate() == 1\\n",
              "reference_solution": "def f():\\n    return 1\\n"}
        for _ in range(4):
            assert compute_score("x", "```python\\ndef f():\\n    return 1\\n```", gt)["accuracy_reward"] == 1.0
        time.sleep(1.5)
        zombies = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    stat = open(f"/proc/{pid}/stat").read()
                except OSError:
                    continue
                if stat.rsplit(")", 1)[1].split()[0] == "Z":
                    zombies.append(pid)
        print("zombies", len(zombies))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert "zombies 0" in done.stdout, (done.stdout, done.stderr[-2000:])


def test_cgroup_mode_plumbing_with_a_stand_in_directory(
    box: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opt-in cgroup v2 mode: the sandbox gets a child cgroup with memory.max and enters it before bwrap
    starts. This machine has no delegated v2 memory controller, so a plain directory stands in for the
    cgroup file system: this checks the plumbing (gate, files, status), not the kernel's enforcement."""
    del box
    parent = tmp_path / "delegated"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("cpu memory pids\n")
    monkeypatch.setenv("CORRGRPO_SANDBOX_CGROUP", str(parent))
    sandbox = Sandbox()
    assert sandbox.memory_mode == "cgroup"
    result = sandbox.run("print('inside')", limits=Limits(memory_mb=300))
    assert (result.status, result.stdout, result.memory_mode) == ("ok", "inside\n", "cgroup"), result
    (child,) = [p for p in parent.iterdir() if p.is_dir()]
    assert (child / "memory.max").read_text() == str(300 << 20)
    assert int((child / "cgroup.procs").read_text()) > 0
    assert (child / "cgroup.kill").read_text() == "1"  # what is left is killed when the run ends
    (parent / "cgroup.subtree_control").write_text("cpu pids\n")  # no memory controller: not used
    assert Sandbox().memory_mode == "watchdog"


def test_cgroup_mode_found_from_the_scorers_own_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset, the variable defers to the scorer's own cgroup: the cgroup2 mount from the mount table, the
    ``0::`` line of /proc/self/cgroup. A stand-in mount table and directory check the detection (not the
    kernel); ``off`` turns the mode off, and a directory without the memory controller is not used."""
    from corrgrpo_tasks.sandbox import _cgroup

    mount, own = tmp_path / "unified", tmp_path / "unified" / "job" / "scorer"
    own.mkdir(parents=True)
    (own / "cgroup.subtree_control").write_text("cpu memory\n")
    (tmp_path / "mounts").write_text(f"proc /proc proc rw 0 0\ncgroup2 {mount} cgroup2 rw 0 0\n")
    (tmp_path / "cgroup").write_text("4:memory:/elsewhere\n0::/job/scorer\n")
    monkeypatch.setattr(_cgroup, "_PROC_MOUNTS", str(tmp_path / "mounts"))
    monkeypatch.setattr(_cgroup, "_PROC_SELF_CGROUP", str(tmp_path / "cgroup"))
    monkeypatch.delenv("CORRGRPO_SANDBOX_CGROUP", raising=False)
    assert _cgroup.cgroup_parent() == str(own)
    assert Sandbox().memory_mode == "cgroup"
    monkeypatch.setenv("CORRGRPO_SANDBOX_CGROUP", "off")
    assert _cgroup.cgroup_parent() is None
    monkeypatch.delenv("CORRGRPO_SANDBOX_CGROUP")
    (own / "cgroup.subtree_control").write_text("cpu\n")
    assert _cgroup.cgroup_parent() is None
    (tmp_path / "mounts").write_text("proc /proc proc rw 0 0\n")  # no cgroup2 mounted at all
    assert _cgroup._own_cgroup() is None
