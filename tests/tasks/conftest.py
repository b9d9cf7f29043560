"""Shared helpers for the code-task and sandbox suites.

Tests of the real sandbox FAIL (never skip) when bubblewrap cannot run here, with the probe's reason:
CI installs bubblewrap, so a missing sandbox is a broken environment, not an optional feature.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from corrgrpo_tasks.sandbox import SANDBOX_UIDS, Sandbox, probe

FIXTURES = Path(__file__).resolve().parents[2] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"


@pytest.fixture(scope="session")
def box() -> Sandbox:
    ok, reason = probe()
    if not ok:
        pytest.fail(f"the real sandbox is unavailable on this machine: {reason}")
    return Sandbox()


def _another_runs(pid: int) -> bool:
    """Whether ``pid`` descends from another live pytest process than this one: a sandbox of a suite
    running beside this one on the same machine (CI runs two environments at a time), not our leftover."""
    while pid > 1:
        if pid == os.getpid():
            return False
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        if b"pytest" in cmdline and pid != os.getpid():
            return True
        pid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0)
    return False


def _stray_processes(mark: str) -> list[str]:
    """Processes a sandbox may have left behind: any process of a lane's uid (``SANDBOX_UIDS``, when we
    are root), or any process whose command line carries ``mark`` (found even when the tests do not run
    as root). Not uid 65534: one-shot sandboxes of any other user of the machine run as it too."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "\nState:\tZ" in status:
            continue  # already dead: an orphaned bwrap helper waiting for init to collect its exit status
        uid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), -1)
        if ((os.geteuid() == 0 and uid in SANDBOX_UIDS) or mark in cmdline) and not _another_runs(
            int(entry.name)
        ):
            found.append(f"{entry.name}: uid {uid} {cmdline[:80]!r}")
    return found


@pytest.fixture
def stray_processes() -> Callable[[str], list[str]]:
    return _stray_processes


@pytest.fixture
def host_left_clean(box: Sandbox) -> Callable[[str, set[str]], None]:
    """``host_left_clean(mark, shm_before)``: after closing the scorer's idle lanes (sandboxes kept between
    jobs), no process of a sandbox is left, ``/dev/shm`` holds nothing new, and a sandbox still runs."""

    def check(mark: str, shm_before: set[str]) -> None:
        import time

        from corrgrpo_tasks.code import _lanes

        _lanes._LANES.close()
        # bwrap returns as soon as the program's status is known; the namespace's last processes are torn
        # down by the kernel right after, so allow that a moment before calling anything a leftover.
        deadline = time.monotonic() + 3.0
        while (strays := _stray_processes(mark)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert strays == []
        assert set(os.listdir("/dev/shm")) <= shm_before
        assert box.run("print(1)").stdout == "1\n"

    return check


@pytest.fixture
def assert_linear() -> Callable[[Callable[[str], object], Callable[[int], str], str], None]:
    """``assert_linear(work, text_of, what)``: ``work`` is linear in its input, judged by a ratio of
    processor times, never a threshold (a loaded machine slows both sides alike): ``work(text_of(n))``
    against ``work(text_of(n / 4))`` at n = 512 Ki characters, each the smaller of two interleaved
    runs, must stay under 8 (linear work gives about 4, quadratic 16, the hostile shapes of the
    parsers' tests were quadratic before; 20 ms for the timer's resolution on tiny inputs)."""

    def check(work: Callable[[str], object], text_of: Callable[[int], str], what: str) -> None:
        size = 1 << 19
        texts = {"quarter": text_of(size // 4), "whole": text_of(size)}
        best = dict.fromkeys(texts, math.inf)
        for _ in range(2):
            for name, text in texts.items():
                start = time.process_time()
                work(text)
                best[name] = min(best[name], time.process_time() - start)
        assert best["whole"] < 8 * best["quarter"] + 0.02, (what, best)

    return check
