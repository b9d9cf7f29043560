"""Where and when a benchmark ran: load average before and after, date and tree.

The docs cite every figure with the command that reproduces it and the load, date and commit it was
measured at; the harnesses write these into their JSON ``meta`` and as the footer of their markdown so
the raw files carry them. Nothing here may fail a run: without git (or outside a checkout) the tree is
``None`` and the footer says ``n/a``.

>>> rec = RunRecord.start()
>>> rec.finish()
>>> sorted(rec.meta())
['date', 'load_after', 'load_before', 'tree', 'tree_dirty']
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["RunRecord", "git_tree", "loadavg"]

_HERE = Path(__file__).resolve().parent


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages as ``"0.52 0.61 0.70"``, or ``"n/a"`` where the OS has none."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(_HERE), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):  # no git, or it hung: the run goes on without
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_tree() -> tuple[str | None, bool | None]:
    """``git rev-parse --short HEAD`` of the checkout these benchmarks live in, and whether tracked files
    differ from it (``None, None`` without git or outside a checkout)."""
    rev = _git("rev-parse", "--short", "HEAD")
    if not rev:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return rev, (bool(status) if status is not None else None)


@dataclass
class RunRecord:
    """Load average before and after a run, its start date (UTC) and the tree it measured."""

    date: str
    load_before: str
    tree: str | None
    tree_dirty: bool | None
    load_after: str | None = None

    @classmethod
    def start(cls) -> RunRecord:
        tree, dirty = git_tree()
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return cls(date=date, load_before=loadavg(), tree=tree, tree_dirty=dirty)

    def finish(self) -> None:
        self.load_after = loadavg()

    def meta(self) -> dict[str, object]:
        """The fields for a JSON ``meta``."""
        return {
            "date": self.date,
            "load_before": self.load_before,
            "load_after": self.load_after,
            "tree": self.tree,
            "tree_dirty": self.tree_dirty,
        }

    def footer(self) -> str:
        """One line for the end of a markdown table."""
        tree = self.tree or "n/a"
        if self.tree_dirty:
            tree += " with uncommitted changes"
        return (
            f"load average (1, 5, 15 min) before: {self.load_before}; after: {self.load_after or 'n/a'}; "
            f"{self.date}; tree {tree}"
        )
