"""The tree stays ruff-clean and the typed packages mypy --strict clean (config in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("tool", [["ruff", "check", "."], [sys.executable, "-m", "mypy"]], ids=["ruff", "mypy"])
def test_clean(tool):
    if tool[0] == "ruff":
        tool[0] = shutil.which("ruff") or pytest.fail("ruff is not installed in this environment")
    result = subprocess.run(tool, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
