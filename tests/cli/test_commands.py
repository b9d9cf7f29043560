"""``corrgrpo estimators``, ``corrgrpo demo`` and the ``python -m corrgrpo_core.cli`` entry point."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import corrgrpo_core as cc
from corrgrpo_core.cli import main


def test_estimators_lists_every_registered_estimator(run_cli):
    code, out, _ = run_cli("estimators")
    assert code == 0
    names = [line.split("|")[1].strip() for line in out.splitlines()[2:]]
    assert names == list(cc.estimator_names())
    assert cc.get_estimator("corrgrpo").summary in out


def test_module_entry_point_runs():
    env = dict(os.environ, PYTHONWARNINGS="error")
    proc = subprocess.run(
        [sys.executable, "-m", "corrgrpo_core.cli", "explain", "--example"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "c_q = 1.6986" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "corrgrpo_core.cli", "explain", "missing.csv"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "missing.csv: no such file" in proc.stderr


def test_missing_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert cc.__version__ in capsys.readouterr().out


def test_demo_writes_its_plots(run_cli, tmp_path):
    out_dir = tmp_path / "demo"
    code, out, err = run_cli("demo", "--out", str(out_dir), "--no-progress")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) <= 40  # a screen: Figure 2 first, the rest in the files
    assert max(map(len, lines)) <= 100
    assert lines[0].startswith("# The paper's Figure 2")
    assert "c_q = 1.6986" in "\n".join(lines[:14])
    assert "correlation sum 5.3902" in out
    assert "In words (corrgrpo against grpo" in out
    flat = " ".join(out.split())  # the lines are wrapped at 100 columns
    assert re.search(r"- anticorrelated: [^-]*largest \|A\| 1\.5e\+03 [^-]*degenerate groups", flat)
    written = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file())
    scenarios = ["anticorrelated", "code_chain", "dominant_scale", "duplicated", "utility_security"]
    plots = [f"simulate/{s}{suffix}.png" for s in scenarios for suffix in ("", "_vs_grpo")]
    files = ["explain.md", "explain_fig2.png", *plots, "simulate/report.md", "simulate/summary.csv"]
    assert written == sorted(files)
    report = (out_dir / "simulate" / "report.md").read_text()
    assert "CorrGRPO against GRPO" in report
    assert "In words" in report
    assert "c_q = 1.6986" in (out_dir / "explain.md").read_text()


def test_a_long_report_piped_into_head_exits_0(tmp_path):
    # more output than a pipe holds, so the write itself meets the closed pipe
    path = tmp_path / "r.csv"
    path.write_text("group,a,b\n" + "".join(f"g{i // 4},{i % 3},{i % 2}\n" for i in range(4000)))
    command = f"{sys.executable} -m corrgrpo_core.cli explain {path} --max-groups 1000 | head -3"
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith(f"Reward batch: {path}: 4000 rollouts, 1000 group(s)")
