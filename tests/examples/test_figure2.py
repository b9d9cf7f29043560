"""examples/figure2.py runs as its docstring says and prints the paper's Figure 2 numbers."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_figure2_example_prints_the_papers_numbers() -> None:
    result = subprocess.run(
        [sys.executable, "examples/figure2.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert float(lines["covariance sum (GRPO's variance)  "]) == 15.552
    assert lines["share of reward 3 in that sum     "].strip() == "91.1%"
