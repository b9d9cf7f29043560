"""The benchmark harness itself: small grids, fast. Checks what the tables claim, not the speed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import corrgrpo_core as cc
from benchmarks import LAYOUTS, make_case, run
from benchmarks import _provenance as provenance
from benchmarks._cli import main, markdown
from benchmarks._loop import LOOPS


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_cases_have_the_promised_layout(layout):
    case = make_case(layout, 1000, 3)
    size, kind = LAYOUTS[layout]
    ids = case.flat_ids
    assert case.flat.shape == (case.rows, 3)
    sizes = np.bincount(ids)
    sizes = sizes[sizes > 0]
    if size:
        assert set(sizes.tolist()) == {size}
    else:
        assert sizes.min() >= 1
        assert sizes.max() <= 32
        assert len(set(sizes.tolist())) > 1
    changes = int(np.count_nonzero(ids[1:] != ids[:-1]))
    if kind == "shuffled":
        assert changes > len(sizes)  # groups are split up
    else:
        assert changes == len(sizes) - 1  # each group's rows are adjacent
    if kind == "dense":
        assert case.ids is None
        assert case.scores.shape == (case.rows // size, size, 3)


@pytest.mark.parametrize("estimator", sorted(LOOPS))
@pytest.mark.parametrize("layout", ["dense8", "runs", "shuffled"])
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_loop_baseline_matches_the_library(estimator, layout, lib):
    case = make_case(layout, 600, 4, seed=3)
    x, ids = case.flat, case.flat_ids
    want = np.asarray(cc.get_estimator(estimator).fn(case.scores, case.ids)).reshape(-1)
    if lib == "torch":
        torch = pytest.importorskip("torch")
        got = LOOPS[estimator](torch.from_numpy(x), ids).numpy()
    else:
        got = np.asarray(LOOPS[estimator](x, ids))
    # verl's GRPO gives a group of one (x - 0) / (1 + eps), the library 0: compare the other rows.
    keep = np.bincount(ids)[ids] > 1 if estimator == "grpo" else np.ones(len(ids), bool)
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-6, atol=1e-6)


def test_run_reports_ratios_from_the_same_run():
    pytest.importorskip("torch")  # the reference loop that x_loop compares against is torch code
    rows = run(
        ns=[512],
        ks=[3],
        layouts=["dense8", "shuffled"],
        estimators=["corrgrpo", "grpo"],
        backends=["numpy"],
        loop_max=512,
        min_repeat=1,
        budget_s=0.0,
    )
    assert len(rows) == 4
    for r in rows:
        assert r.n == 512
        assert r.median_s > 0
        assert r.floor_s > 0
        assert r.x_floor == pytest.approx(r.median_s / r.floor_s)
        assert r.x_loop == pytest.approx(r.loop_s / r.median_s)
        assert r.rows_per_s == pytest.approx(512 / r.median_s)
        assert r.peak_extra_bytes is not None
        assert r.peak_extra_bytes > 0


def test_torch_rows_agree_with_numpy():
    pytest.importorskip("torch")
    rows = run(
        ns=[300],
        ks=[2],
        layouts=["runs"],
        estimators=["corrgrpo", "gdpo"],
        backends=["numpy", "torch"],
        loop_max=0,
        min_repeat=1,
        budget_s=0.0,
        memory=False,
    )
    torch_rows = [r for r in rows if r.backend == "torch"]
    assert len(torch_rows) == 2
    for r in torch_rows:
        assert r.max_abs_diff_vs_numpy is not None
        assert r.max_abs_diff_vs_numpy < 1e-9
        assert r.peak_extra_bytes is None
        assert r.loop_s is None


def test_cli_writes_json_and_markdown(tmp_path, capsys):
    out_json, out_md = tmp_path / "t.json", tmp_path / "t.md"
    code = main(
        [
            "--n",
            "2e2",
            "--k",
            "2",
            "--layout",
            "runs8",
            "--estimator",
            "gdpo_corr",
            "--backend",
            "numpy",
            "--repeat",
            "1",
            "--budget",
            "0",
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
        ]
    )
    assert code == 0
    data = json.loads(out_json.read_text())
    assert [r["estimator"] for r in data["rows"]] == ["gdpo_corr"]
    assert data["rows"][0]["n"] == 200
    table = out_md.read_text()
    assert table.startswith("| backend | layout |")
    assert "gdpo_corr" in table
    assert table in capsys.readouterr().out
    # The raw files carry the load before and after, the date and the tree they measured.
    meta = data["meta"]
    assert {"load_before", "load_after", "date", "tree", "tree_dirty"} <= set(meta)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", meta["date"])
    footer = table.rstrip("\n").splitlines()[-1]
    assert footer.startswith(f"load average (1, 5, 15 min) before: {meta['load_before']}; after: ")
    assert meta["date"] in footer
    assert f"tree {meta['tree'] or 'n/a'}" in footer
    if shutil.which("git") and (Path(__file__).parents[2] / ".git").exists():
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        assert meta["tree"] == head.stdout.strip()


def test_run_record_without_git_or_outside_a_checkout(monkeypatch, tmp_path):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    rec = provenance.RunRecord.start()
    rec.finish()
    assert (rec.tree, rec.tree_dirty) == (None, None)
    assert rec.footer().endswith("; tree n/a")
    monkeypatch.undo()
    monkeypatch.setattr(provenance, "_HERE", tmp_path)  # not a git checkout: git fails, the run does not
    assert provenance.git_tree() == (None, None)


def test_markdown_leaves_out_columns_nobody_measured():
    rows = run(
        ns=[64],
        ks=[1],
        layouts=["dense4"],
        estimators=["grpo"],
        backends=["numpy"],
        loop_max=0,
        min_repeat=1,
        budget_s=0.0,
        memory=False,
    )
    header = markdown(rows).splitlines()[0]
    assert "vs loop" not in header
    assert "peak extra MB" not in header
    assert "x floor" in header


def test_jax_rows_are_jitted_and_agree_with_numpy():
    jax = pytest.importorskip("jax")
    x64 = jax.config.read("jax_enable_x64")  # the jax backend turns it on; give it back
    try:
        rows = run(
            ns=[200],
            ks=[3],
            layouts=["dense4", "shuffled"],
            estimators=["corrgrpo"],
            backends=["numpy", "jax"],
            loop_max=0,
            min_repeat=1,
            budget_s=0.0,
            memory=False,
        )
    finally:
        jax.config.update("jax_enable_x64", x64)
    jax_rows = [r for r in rows if r.backend == "jax"]
    assert len(jax_rows) == 2
    assert all(r.max_abs_diff_vs_numpy is not None and r.max_abs_diff_vs_numpy < 1e-9 for r in jax_rows)
