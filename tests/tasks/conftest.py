"""Shared helpers for the code-task and sandbox suites.

Tests of the real sandbox FAIL (never skip) when bubblewrap cannot run here, with the probe's reason:
CI installs bubblewrap, so a missing sandbox is a broken environment, not an optional feature.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corrgrpo_tasks.sandbox import Sandbox, probe
from corrgrpo_tasks.sandbox._core import NOBODY

FIXTURES = Path(__file__).resolve().parents[2] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
# Hostile programs that start background processes use this distinctive argument, so that a leftover
# can be found even when the tests do not run as root.
STRAY_MARK = "4242.5"


@pytest.fixture(scope="session")
def box() -> Sandbox:
    ok, reason = probe()
    if not ok:
        pytest.fail(f"the real sandbox is unavailable on this machine: {reason}")
    return Sandbox()


def stray_processes() -> list[str]:
    """Processes a sandbox may have left behind: any uid-65534 process (when we are root), or any
    process whose command line carries STRAY_MARK."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        uid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), -1)
        if (os.geteuid() == 0 and uid == NOBODY) or STRAY_MARK in cmdline:
            found.append(f"{entry.name}: uid {uid} {cmdline[:80]!r}")
    return found
