"""Run untrusted Python programs in an isolated, resource-limited process (bubblewrap + rlimits).

Small API: ``Sandbox().run(source, stdin=..., limits=Limits(...)) -> RunResult`` (status, exit code,
capped stdout/stderr, wall time). ``probe()`` says whether bubblewrap works on this machine. Without
bubblewrap, ``Sandbox()`` raises ``SandboxUnavailableError`` with install advice; an rlimits-only mode
(no isolation) exists only behind ``allow_unsafe=True``. See ``docs/tasks/code.md``.

Examples
--------
>>> from corrgrpo_tasks.sandbox import Limits, Sandbox
>>> box = Sandbox()                                                         # doctest: +SKIP
>>> box.run("while True: pass", limits=Limits(wall_seconds=1)).status     # doctest: +SKIP
'timeout'
"""

from ._core import (
    INSTALL_HINT,
    SANDBOX_UIDS,
    Limits,
    Running,
    RunResult,
    Sandbox,
    SandboxUnavailableError,
    probe,
)

__all__ = [
    "INSTALL_HINT",
    "SANDBOX_UIDS",
    "Limits",
    "RunResult",
    "Running",
    "Sandbox",
    "SandboxUnavailableError",
    "probe",
]
