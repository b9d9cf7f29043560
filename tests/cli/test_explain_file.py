"""``corrgrpo explain FILE`` streamed: passes of whole groups give what the whole batch in memory
gives; the readers, the group coding, GDPO's batch z-score and the magnitude split behind it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import corrgrpo_core as cc
import corrgrpo_core.cli.explain as ex
import corrgrpo_core.cli.io as cio
from corrgrpo_core.cli.explain import explain, explain_file
from corrgrpo_core.cli.io import RewardBatch, read_rewards

pa = pytest.importorskip("pyarrow")

ESTIMATORS = ("grpo", "corrgrpo", "gdpo", "rloo", "mo_grpo")


def _rows(seed: int, groups: int = 40) -> list[dict[str, object]]:
    """Groups of 1-7 rollouts shuffled through the file, one of them constant, ints and floats."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(np.repeat(np.arange(groups), rng.integers(1, 8, groups)))
    rows = []
    for g in ids:
        rows.append(
            {
                "group": f"prompt-{g:03d}" if g % 3 else f" q{g} ",  # padded labels: trimmed
                "r1": round(float(rng.random()), 4),
                "r2": int(rng.random() < 0.5),
                "r3": 0.5 if g == 7 else round(float(rng.normal() * 10), 3),
            }
        )
    return rows


def _write(tmp_path, rows, fmt):
    path = tmp_path / f"r.{fmt}"
    if fmt == "csv":
        columns = list(rows[0])
        cells = [[r.get(c) for c in columns] for r in rows]
        lines = [",".join(columns), *(",".join("" if v is None else str(v) for v in row) for row in cells)]
        path.write_text("\n".join(lines) + "\n")
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=37)
    return path


@pytest.fixture
def small_passes(monkeypatch):
    """Blocks of ~100 bytes, passes of a few dozen rows, slices of 7: every boundary is crossed."""
    monkeypatch.setattr(cio, "_TEXT_BLOCK", 100)
    monkeypatch.setattr(cio, "_STREAM_ROWS", 13)
    monkeypatch.setattr(ex, "PASS_BYTES", 1)
    monkeypatch.setattr(ex, "PASS_SHARE", dict.fromkeys(ex.PASS_SHARE, 40))
    monkeypatch.setattr(ex, "SLICE_ROWS", 7)


def _no_fallback(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the streamed reader fell back to the whole-file reader")

    monkeypatch.setattr(ex, "read_rewards", refuse)


def _same_report(a, b, *, rtol=1e-12):
    assert (a.n_rows, a.n_groups, a.components, a.estimators) == (
        b.n_rows,
        b.n_groups,
        b.components,
        b.estimators,
    )
    assert a.summary == pytest.approx(b.summary, rel=rtol, abs=1e-14)
    np.testing.assert_allclose(a.mean_correlation, b.mean_correlation, rtol=rtol, atol=1e-14)
    for e in a.estimators:
        np.testing.assert_allclose(a.magnitude[e], b.magnitude[e], rtol=rtol, atol=1e-15)
    assert len(a.groups) == len(b.groups)
    for va, vb in zip(a.groups, b.groups, strict=True):
        assert va.label == vb.label
        np.testing.assert_array_equal(va.rows, vb.rows)
        np.testing.assert_array_equal(va.scores, vb.scores)
        for e in a.estimators:
            np.testing.assert_allclose(va.advantages[e], vb.advantages[e], rtol=rtol, atol=1e-15)
        np.testing.assert_allclose(va.covariance, vb.covariance, rtol=rtol, atol=1e-14)
        np.testing.assert_allclose(va.correlation, vb.correlation, rtol=rtol, atol=1e-14)
        assert (va.c_q, va.degenerate, va.zero_variance) == pytest.approx(
            (vb.c_q, vb.degenerate, vb.zero_variance)
        )


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_passes_of_whole_groups_give_the_whole_batchs_report(tmp_path, monkeypatch, small_passes, fmt):
    path = _write(tmp_path, _rows(1), fmt)
    batch = read_rewards(path)
    whole = explain(batch, estimators=ESTIMATORS, detail=range(batch.n_groups))
    _no_fallback(monkeypatch)
    streamed, shown = explain_file(path, estimators=ESTIMATORS, max_groups=batch.n_groups)
    assert shown == 0
    _same_report(streamed, whole)
    # and the core's own numbers, on the whole batch in file order
    for e in ESTIMATORS:
        a = np.asarray(cc.compute_advantages(batch.scores, batch.group_ids, estimator=e))
        mean, top = streamed.magnitude[e]
        assert mean == pytest.approx(float(np.mean(np.abs(a))), rel=1e-12)
        assert top == pytest.approx(float(np.max(np.abs(a))), rel=1e-12)


def test_weights_missing_values_and_a_plot_group_stream_too(tmp_path, monkeypatch, small_passes):
    rows = _rows(2)
    rows[3]["r1"] = None
    rows[10] = {"group": rows[10]["group"]}  # a row with no reward at all
    path = _write(tmp_path, rows, "jsonl")
    batch = read_rewards(path, allow_nan=True)
    w = np.array([2.0, 1.0, 0.25])
    label = batch.group_labels[17]
    detail = sorted({0, 1, 17})
    whole = explain(batch, estimators=ESTIMATORS, weights=w, nan_policy="ignore", detail=detail)
    _no_fallback(monkeypatch)
    streamed, shown = explain_file(
        path,
        estimators=ESTIMATORS,
        weights=lambda names: w,
        nan_policy="ignore",
        max_groups=2,
        plot_group=label,
    )
    assert streamed.groups[shown].label == label
    _same_report(streamed, whole)


def test_option_errors_come_in_the_whole_file_order(tmp_path, run_cli):
    # weights, then --plot-group, then the estimators (as when the file was read whole first)
    path = _write(tmp_path, _rows(6), "csv")
    argv = ["explain", str(path), "--estimators", "nope", "--plot-group", "zz"]
    assert "--plot-group 'zz' is not a group" in run_cli(*argv)[2]
    assert "--weights has 1 values" in run_cli(*argv, "--weights", "1")[2]
    assert "unknown estimator(s) ['nope']" in run_cli("explain", str(path), "--estimators", "nope")[2]


def test_max_groups_zero_still_streams(tmp_path, run_cli, monkeypatch):
    path = _write(tmp_path, _rows(5), "csv")
    _no_fallback(monkeypatch)
    code, out, err = run_cli("explain", str(path), "--max-groups", "0", "--plot", str(tmp_path / "p.png"))
    assert code == 0, err
    assert "## group" not in out
    assert "more groups not shown" in out


def test_estimators_that_need_the_whole_batch_get_it(tmp_path, monkeypatch, small_passes):
    path = _write(tmp_path, _rows(3), "csv")
    batch = read_rewards(path)
    names = ("dara", "gdpo_corr", "grpo")
    whole = explain(batch, estimators=names, detail=range(3))
    _no_fallback(monkeypatch)
    streamed, _ = explain_file(path, estimators=names, max_groups=3)
    _same_report(streamed, whole)


def test_the_printed_report_is_the_same(tmp_path, run_cli, monkeypatch):
    path = _write(tmp_path, _rows(4), "csv")
    batch = read_rewards(path)
    from corrgrpo_core.cli.explain import render_explanation

    expected = render_explanation(explain(batch, detail=range(10)))
    code, out, _ = run_cli("explain", str(path))
    assert code == 0
    assert out == expected + "\n"


@pytest.mark.parametrize(
    "text",
    [
        'group,r1\n"a\nb",1\n"a\nb",2\nc,3\nc,5\n',  # a line end inside a quoted value
        "group,r1\n" + "".join(f"{'x' * 80}{i % 3},{i}\n" for i in range(12)),  # labels past 64 bytes
        "group,r1\n007,1\n007,2\n7,3\n7,4\n",  # numeric-looking labels, read as numbers by pyarrow
        "group,r1\na,1\na,2\nb,1\nb,1.5\nb,yes\n",  # a column whose type changes from block to block
    ],
)
def test_files_the_fast_path_declines_still_match(tmp_path, small_passes, text):
    path = tmp_path / "r.csv"
    path.write_text(text)
    batch = read_rewards(path)
    whole = explain(batch, detail=range(batch.n_groups))
    streamed, _ = explain_file(path, max_groups=batch.n_groups)
    _same_report(streamed, whole)


def test_group_codes_match_the_whole_file_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(cio, "_TEXT_BLOCK", 40)
    labels = ["b", "a", "ccc", " a", "é", "b", "a much longer label", "ccc", "z" * 64, "é "]
    path = tmp_path / "r.csv"
    path.write_text("group,r\n" + "".join(f"{g},{i}\n" for i, g in enumerate(labels)))
    codes = cio.stream_group_codes(path, fmt=None, group_col="group", components=None)
    batch = read_rewards(path)
    np.testing.assert_array_equal(codes.codes, batch.group_ids)
    assert [codes.label(g) for g in range(codes.n_groups)] == list(batch.group_labels)
    assert codes.index("ccc") == batch.group_labels.index("ccc")
    assert codes.index("nope") is None
    rows = codes.rows([0, 2])
    np.testing.assert_array_equal(rows[0], np.flatnonzero(batch.group_ids == 0))
    np.testing.assert_array_equal(rows[2], np.flatnonzero(batch.group_ids == 2))


def test_positions_are_a_stable_sort_by_group():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 9, 200).astype(np.int32)
    sizes = np.bincount(codes, minlength=9)
    fill = np.cumsum(sizes) - sizes
    got = np.concatenate([ex._positions(part, fill) for part in np.array_split(codes, 7)])
    order = np.argsort(codes, kind="stable")
    np.testing.assert_array_equal(got[order], np.arange(codes.size))


def test_gdpo_batch_z_score_from_pieces(monkeypatch):
    # moments merged over slices and sum |h - mean| from the band around 0, against the core
    rng = np.random.default_rng(7)
    ids = np.repeat(np.arange(50), rng.integers(1, 9, 50))
    scores = rng.normal(size=(ids.size, 3)) * np.array([1e-3, 1.0, 1e3])
    batch = RewardBatch(scores, ids, tuple(map(str, range(50))), ("x", "y", "z"), "r")
    core = np.asarray(cc.compute_advantages(scores, ids, estimator="gdpo"))
    monkeypatch.setattr(ex, "SLICE_ROWS", 5)
    report = explain(batch, estimators=["gdpo"], detail=[])
    np.testing.assert_allclose(report.advantages["gdpo"], core, rtol=1e-12, atol=1e-15)
    assert report.magnitude["gdpo"] == pytest.approx((np.mean(np.abs(core)), np.max(np.abs(core))), rel=1e-12)


def test_a_batch_mean_off_the_band_is_not_guessed():
    spec = ex._zscore_spec("gdpo", np.ones(2), "raise")
    assert spec is not None
    z = ex._ZScores(spec, 4, missing=False, band=1e-9, keep=False)
    z.put(0, np.array([1.0, 2.0, 3.0, 4.5]), None)  # not centred: its mean is far from 0
    assert z.magnitude(4) is None
    z = ex._ZScores(spec, 4, missing=False, band=1e-9, keep=False)
    h = np.array([-1.0, 1e-12, 0.0, 1.0 - 1e-12])
    z.put(0, h, None)
    mean, den = z.stats()
    assert z.magnitude(4) == pytest.approx((np.mean(np.abs(h - mean)) / den, np.max(np.abs(h - mean)) / den))


def test_tiny_groups_next_to_huge_ones_stay_exact():
    # one call to the core scales by one power of two: 1e-162 beside 1e34 would lose its squares
    rng = np.random.default_rng(0)
    tiny, huge = rng.normal(size=(5, 2)) * 1e-162, rng.normal(size=(5, 2)) * 1e34
    scores = np.vstack([tiny, huge])
    ids = np.repeat([0, 1], 5)
    whole_stats = cc.advantage_stats(scores, ids)
    alone = cc.advantage_stats(tiny)
    assert float(whole_stats.correlation_sum[0]) != pytest.approx(
        float(alone.correlation_sum[0])
    )  # the limit
    report = explain(RewardBatch(scores, ids, ("t", "h"), ("a", "b"), "r"), estimators=["corrgrpo", "grpo"])
    t, h = report.groups
    assert t.correlation_sum == pytest.approx(float(alone.correlation_sum[0]), rel=1e-12)
    assert t.c_q == pytest.approx(float(alone.c_q[0]), rel=1e-12)
    assert h.correlation_sum == pytest.approx(float(cc.advantage_stats(huge).correlation_sum[0]), rel=1e-12)
    np.testing.assert_allclose(np.diag(t.correlation), 1.0, rtol=1e-12)
    for e in ("corrgrpo", "grpo"):
        np.testing.assert_allclose(t.advantages[e], cc.compute_advantages(tiny, estimator=e), rtol=1e-12)
        np.testing.assert_allclose(h.advantages[e], cc.compute_advantages(huge, estimator=e), rtol=1e-12)


def test_line_blocks_keep_whole_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(cio, "_TEXT_BLOCK", 8)
    lines = [b"a,1\n", b"x" * 30 + b",2\n", b"b,3\n", b"c,4"]
    path = tmp_path / "r.csv"
    path.write_bytes(b"".join(lines))
    blocks = [bytes(b) for b in cio._line_blocks(path)]
    assert b"".join(blocks) == b"".join(lines)
    assert all(b.endswith(b"\n") for b in blocks[:-1])


def test_a_first_line_longer_than_a_block_still_streams(tmp_path, monkeypatch):
    # the first block then holds only the header: the types come from the first rows instead
    monkeypatch.setattr(cio, "_TEXT_BLOCK", 30)
    path = tmp_path / "r.csv"
    path.write_text("group,r1\n" + "a" * 40 + ",1\nb,2\n" + "a" * 40 + ",3\nb,5\n")
    batch = read_rewards(path)
    whole = explain(batch, detail=[0, 1])
    _no_fallback(monkeypatch)
    streamed, _ = explain_file(path)
    _same_report(streamed, whole)


@pytest.mark.parametrize("seed", range(8))
def test_random_files_stream_to_the_whole_batchs_report(tmp_path, monkeypatch, seed):
    # random sizes, scales, missing values, formats, block/pass/slice sizes and estimators
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(cio, "_TEXT_BLOCK", int(rng.choice([50, 200, 1 << 20])))
    monkeypatch.setattr(cio, "_STREAM_ROWS", int(rng.choice([5, 17, 1 << 16])))
    monkeypatch.setattr(ex, "PASS_BYTES", 1)
    monkeypatch.setattr(ex, "PASS_SHARE", dict.fromkeys(ex.PASS_SHARE, int(rng.choice([1, 10, 50]))))
    monkeypatch.setattr(ex, "SLICE_ROWS", int(rng.choice([3, 11, 1 << 14])))
    groups, k = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    ids = rng.permutation(np.repeat(np.arange(groups), rng.integers(1, 9, groups)))
    x = rng.normal(size=(ids.size, k)) * 10.0 ** rng.integers(-5, 5, k)
    nan_policy = "ignore" if seed % 3 == 0 else "raise"
    rows = [
        {
            "group": f"g{g}" if rng.random() < 0.8 else f"label number {g}",
            **{
                f"c{j}": None if nan_policy == "ignore" and rng.random() < 0.1 else float(x[i, j])
                for j in range(k)
            },
        }
        for i, g in enumerate(ids)
    ]
    path = _write(tmp_path, rows, ["csv", "jsonl", "parquet"][seed % 3])
    estimators = list(
        rng.choice(["grpo", "corrgrpo", "gdpo", "rloo", "mo_grpo", "dr_grpo", "dara"], 3, replace=False)
    )
    w = rng.uniform(0.1, 3.0, k)
    batch = read_rewards(path, allow_nan=nan_policy == "ignore")
    detail = range(min(5, batch.n_groups))
    whole = explain(batch, estimators=estimators, weights=w, nan_policy=nan_policy, detail=detail)
    _no_fallback(monkeypatch)
    streamed, _ = explain_file(
        path, estimators=estimators, weights=lambda names: w, nan_policy=nan_policy, max_groups=5
    )
    _same_report(streamed, whole)


_POOL_PROBE = """
import os, sys
from corrgrpo_core.cli.io import jemalloc_default
jemalloc_default()
import pyarrow as pa
print(pa.default_memory_pool().backend_name, os.environ.get("ARROW_DEFAULT_MEMORY_POOL"))
"""


@pytest.mark.parametrize("user", [None, "system"])
def test_jemalloc_default_pool_chosen_before_import_and_user_choice_kept(user: str | None) -> None:
    pa = pytest.importorskip("pyarrow")
    if "jemalloc" not in pa.supported_memory_backends():
        pytest.skip("this pyarrow build has no jemalloc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if user is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = user
    out = subprocess.run(
        [sys.executable, "-c", _POOL_PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert out.stderr == ""  # no warning from pyarrow
    # the variable only chose the pool at import and is gone afterwards (no child inherits it)
    assert out.stdout.split() == (["jemalloc", "None"] if user is None else ["system", "system"])
