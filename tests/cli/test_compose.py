"""Commands that compose: ``explain`` on ``corrgrpo train``'s folder, on standard input, on a file whose
groups are all single rows, and one default estimator list from the registry."""

from __future__ import annotations

import io
import re
import sys

import numpy as np
import pytest

import corrgrpo_core as cc
from corrgrpo_core.cli.facts import default_estimators, in_reward_units, sees_only_total


def _train_folder(tmp_path):
    """The layout ``corrgrpo train`` writes: logs at the top, rollouts/ESTIMATOR-seedS.csv below."""
    rng = np.random.default_rng(0)
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "steps.csv").write_text("step,loss\n1,0.5\n")
    (tmp_path / "evals.csv").write_text("step,accuracy\n0,0.1\n")
    for estimator in ("grpo", "corrgrpo"):
        for seed in (0, 1):
            lines = ["step,group,match,judge,score"]
            for step in (1, 2):
                for g in range(3):
                    for _ in range(4):
                        m, j = float(rng.integers(0, 2)), round(float(rng.random() * 8), 3)
                        lines.append(f"{step},p{g},{m},{j},{m + j}")
            (tmp_path / "rollouts" / f"{estimator}-seed{seed}.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


@pytest.mark.parametrize("sub", ["", "rollouts"])
def test_explain_reads_train_output_one_labelled_table_per_estimator_and_seed(run_cli, tmp_path, sub):
    folder = _train_folder(tmp_path)
    code, out, err = run_cli("explain", str(folder / sub if sub else folder), "--max-steps", "2")
    assert code == 0, err
    headings = re.findall(r"^# run (\w+), seed (\d)", out, re.MULTILINE)
    assert headings == [("corrgrpo", "0"), ("corrgrpo", "1"), ("grpo", "0"), ("grpo", "1")]
    # each run is compared with the estimator it trained with, read from its file name
    assert "the run's own advantages: corrgrpo on the components" in out
    assert "the run's own advantages: grpo on score" in out
    assert out.count("Run: ") == 4
    assert "steps.csv" not in out


def test_explain_reads_standard_input(run_cli, monkeypatch, fig2_csv):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(fig2_csv.encode())))
    code, out, err = run_cli("explain", "-", "--group-col", "prompt")
    assert code == 0, err
    assert "Reward batch: <stdin>: 4 rollouts, 1 group(s)" in out
    assert "1.6986" in out


def test_every_group_of_one_row_points_at_the_group_column(run_cli, write_csv):
    code, _, err = run_cli("explain", str(write_csv("group,r\n1,0.5\n2,0.1\n3,1\n")))
    assert code == 2
    assert "every group has one row" in err
    assert "--group-col" in err


def test_one_default_estimator_list_from_the_registry(run_cli):
    assert default_estimators() == cc.estimator_names()
    assert "rloo" in default_estimators()
    code, out, _ = run_cli("explain", "--example")
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("| row"))
    assert [c.strip() for c in header.strip("|").split("|")][4:] == list(cc.estimator_names())


def test_estimator_facts_are_read_off_the_estimators():
    assert {e for e in cc.estimator_names() if sees_only_total(e)} == {"grpo", "dr_grpo", "rloo"}
    assert {e for e in cc.estimator_names() if in_reward_units(e)} >= {"corrgrpo", "dr_grpo", "rloo"}
    assert not in_reward_units("grpo")
    assert not in_reward_units("gdpo")


def test_explain_says_which_advantages_are_in_reward_units_and_flags_large_ones(run_cli, write_csv):
    rows = [[0.1, 0.1, 3.0]] * 7 + [[0.5, 0.1, 1.0]]  # the review's 7-vs-1 group: |A| 1400
    text = "group,m,p,j\n" + "".join(f"q,{a},{b},{c}\n" for a, b, c in rows)
    code, out, _ = run_cli("explain", str(write_csv(text)), "--estimators", "grpo,corrgrpo")
    assert code == 0
    assert re.search(r"\| corrgrpo +\| [\d.]+ +\| 1400\.\d+ LARGE \| reward units", out)
    assert re.search(r"\| grpo +\| [\d.]+ +\| 2\.4749 +\| unit-free", out)
    assert "DEGENERATE" in out
    assert "largest abs(A) 1400" in out
    code, out, _ = run_cli(
        "explain", str(write_csv(text)), "--estimators", "grpo,corrgrpo", "--plot", "x.txt"
    )
    assert code == 2  # argument errors still come first


def test_argument_errors_come_before_heavy_imports(tmp_path):
    import subprocess

    code = (
        "import sys; from corrgrpo_core.cli import main\n"
        "for argv in (['explain', 'x.csv', '--max-groups', '-1'], ['explain', 'x.csv', '--plot', 'a.txt'],"
        " ['explain', '--example', '--estimators', 'nope'], ['simulate', '--estimators', 'nope']):\n"
        "    assert main(argv) == 2\n"
        "print(sorted(m for m in ('pyarrow', 'matplotlib', 'torch', 'jax') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert proc.stdout.strip() == "[]"


def test_explaining_a_plain_file_loads_only_what_it_uses(tmp_path, write_csv):
    # every start pays its imports: a file of plain labels and numbers needs neither pyarrow's
    # compute functions, nor the package index (plugins), nor numpy's masked arrays
    import subprocess

    path = write_csv("group,r1,r2\np1,1,0\np2,0,1\np1,2,1\np2,1,1\n")
    code = (
        "import sys; from corrgrpo_core.cli import main\n"
        f"assert main(['explain', {str(path)!r}]) == 0\n"
        "heavy = ('pyarrow.compute', 'importlib.metadata', 'numpy.ma', 'numpy.random', 'numpy.testing')\n"
        "print(sorted(m for m in heavy if type(sys.modules.get(m)).__name__ == 'module'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]"
