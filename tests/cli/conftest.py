"""Shared helpers for the CLI tests: write small reward files, run the command and capture it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from corrgrpo_core.cli import main
from corrgrpo_core.cli.explain import EXAMPLE


@pytest.fixture
def write_csv(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(text: str, name: str = "rewards.csv") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[[Sequence[object], str], Path]:
    def write(rows: Sequence[object], name: str = "rewards.jsonl") -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    return write


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``run_cli("explain", "--example")`` -> (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def fig2_csv() -> str:
    """The paper's Figure 2 group as CSV text, grouped by a ``prompt`` column."""
    lines = ["prompt,r1,r2,r3"] + [f"p0,{a},{b},{c}" for a, b, c in EXAMPLE.tolist()]
    return "\n".join(lines) + "\n"
