"""``corrgrpo explain FILE``: what the report says equals what the core computes on the whole batch,
whatever the file's format, its pyarrow blocks and the slices the CLI hands the core."""

from __future__ import annotations

import json

import numpy as np
import pytest

import corrgrpo_core as cc
import corrgrpo_core.cli.explain as ex
import corrgrpo_core.cli.io as cio
from corrgrpo_core.cli.explain import explain, explain_file, render_explanation
from corrgrpo_core.cli.io import RewardBatch, read_rewards

pa = pytest.importorskip("pyarrow")

ESTIMATORS = ("grpo", "corrgrpo", "gdpo", "rloo", "mo_grpo")
FORMATS = ("csv", "tsv", "jsonl", "parquet")


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
    if fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        columns = list(rows[0])
        cells = [[r.get(c) for c in columns] for r in rows]
        lines = [sep.join(columns), *(sep.join("" if v is None else str(v) for v in row) for row in cells)]
        path.write_text("\n".join(lines) + "\n")
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=37)
    return path


@pytest.fixture
def small_pieces(monkeypatch):
    """pyarrow blocks of 64 bytes (grown for longer lines) and slices of 7 rows handed to the core:
    every boundary is crossed."""
    monkeypatch.setattr(cio, "_BLOCK", 64)
    monkeypatch.setattr(ex, "SLICE_ROWS", 7)


def _same_as_core(report, batch, *, weights=None, nan_policy="raise"):
    """Every number of ``report`` against the core's own on the whole batch, in file order."""
    options = {"weights": weights, "nan_policy": nan_policy}
    assert (report.n_rows, report.n_groups) == (batch.group_ids.size, batch.n_groups)
    for e in report.estimators:
        a = np.asarray(cc.compute_advantages(batch.scores, batch.group_ids, estimator=e, **options))
        np.testing.assert_allclose(report.advantages[e], a, rtol=1e-12, atol=1e-15)
        assert report.magnitude[e] == pytest.approx((np.mean(np.abs(a)), np.max(np.abs(a))), rel=1e-12)
        for view in report.groups:
            np.testing.assert_array_equal(view.advantages[e], report.advantages[e][view.rows])
    st = cc.advantage_stats(batch.scores, batch.group_ids, **options)
    assert report.summary == pytest.approx(st.summary(batch.components), rel=1e-12, abs=1e-300)
    first = np.array([np.flatnonzero(batch.group_ids == g)[0] for g in range(batch.n_groups)])
    for view in report.groups:
        g = batch.group_labels.index(view.label)
        np.testing.assert_array_equal(view.rows, np.flatnonzero(batch.group_ids == g))
        np.testing.assert_array_equal(view.scores, batch.scores[view.rows])
        assert view.c_q == pytest.approx(float(st.c_q[first[g]]), rel=1e-12)
        assert view.covariance_sum == pytest.approx(float(st.covariance_sum[first[g]]), rel=1e-12)
        assert view.correlation_sum == pytest.approx(float(st.correlation_sum[first[g]]), rel=1e-12)
        if np.isnan(batch.scores).any():
            continue  # with missing values the display matrices are pairwise, not the core's sums
        # the display matrices sum to the core's covariance and correlation sums
        assert float(np.sum(view.covariance)) == pytest.approx(view.covariance_sum, rel=1e-9, abs=1e-12)
        assert float(np.sum(view.correlation)) == pytest.approx(view.correlation_sum, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gives_the_cores_numbers(tmp_path, small_pieces, fmt):
    path = _write(tmp_path, _rows(1), fmt)
    batch = read_rewards(path)
    assert batch.group_labels[0] == _rows(1)[0]["group"].strip()
    report, shown = explain_file(path, estimators=ESTIMATORS, max_groups=batch.n_groups)
    assert shown == 0
    assert len(report.groups) == batch.n_groups
    _same_as_core(report, batch)


def test_the_formats_read_the_same_batch(tmp_path):
    batches = []
    for fmt in FORMATS:
        folder = tmp_path / fmt
        folder.mkdir()
        batches.append(read_rewards(_write(folder, _rows(2), fmt)))
    for b in batches[1:]:
        np.testing.assert_array_equal(b.scores, batches[0].scores)
        np.testing.assert_array_equal(b.group_ids, batches[0].group_ids)
        assert b.group_labels == batches[0].group_labels


def test_weights_missing_values_and_a_plot_group(tmp_path, small_pieces):
    rows = _rows(2)
    rows[3]["r1"] = None
    rows[10] = {"group": rows[10]["group"]}  # a row with no reward at all
    path = _write(tmp_path, rows, "jsonl")
    batch = read_rewards(path, allow_nan=True)
    w = np.array([2.0, 1.0, 0.25])
    label = batch.group_labels[17]
    report, shown = explain_file(
        path,
        estimators=ESTIMATORS,
        weights=lambda names: w,
        nan_policy="ignore",
        max_groups=2,
        plot_group=label,
    )
    assert [v.label for v in report.groups] == [*batch.group_labels[:2], label]
    assert report.groups[shown].label == label
    _same_as_core(report, batch, weights=w, nan_policy="ignore")


def test_option_errors_come_after_the_file_is_read(tmp_path, run_cli):
    # weights, then --plot-group, then the estimators
    path = _write(tmp_path, _rows(6), "csv")
    argv = ["explain", str(path), "--estimators", "nope", "--plot-group", "zz"]
    assert "--plot-group 'zz' is not a group" in run_cli(*argv)[2]
    assert "--weights has 1 values" in run_cli(*argv, "--weights", "1")[2]
    assert "unknown estimator(s) ['nope']" in run_cli("explain", str(path), "--estimators", "nope")[2]


def test_max_groups_zero(tmp_path, run_cli):
    path = _write(tmp_path, _rows(5), "csv")
    code, out, err = run_cli("explain", str(path), "--max-groups", "0", "--plot", str(tmp_path / "p.png"))
    assert code == 0, err
    assert "## group" not in out
    assert "more groups not shown" in out


def test_estimators_that_need_the_whole_batch_get_it(tmp_path, small_pieces):
    path = _write(tmp_path, _rows(3), "csv")
    report, _ = explain_file(path, estimators=("dara", "gdpo_corr", "grpo"), max_groups=3)
    _same_as_core(report, read_rewards(path))


def test_the_printed_report_is_the_rendered_explanation(tmp_path, run_cli):
    path = _write(tmp_path, _rows(4), "csv")
    expected = render_explanation(explain(read_rewards(path), detail=range(10)))
    code, out, _ = run_cli("explain", str(path))
    assert code == 0
    assert out == expected + "\n"


@pytest.mark.parametrize(
    ("text", "labels", "values"),
    [
        # a line end inside a quoted value
        ('group,r1\n"a\nb",1\n"a\nb",2\nc,3\nc,5\n', ("a\nb", "c"), [1, 2, 3, 5]),
        # labels that look like numbers are labels: 007 and 7 are two groups
        ("group,r1\n007,1\n007,2\n7,3\n7,4\n", ("007", "7"), [1, 2, 3, 4]),
        # a column whose type changes after pyarrow's first block
        ("group,r1\na,1\na,2\nb,1\nb,1.5\nb,yes\n", ("a", "b"), [1, 2, 1, 1.5, 1]),
        # a field longer than a block
        ("group,r1,note\na,1," + "x" * 500 + "\na,2,y\n", ("a",), [1, 2]),
    ],
)
def test_awkward_csv_files(tmp_path, small_pieces, text, labels, values):
    path = tmp_path / "r.csv"
    path.write_text(text)
    batch = read_rewards(path, components=["r1"])
    assert batch.group_labels == labels
    np.testing.assert_array_equal(batch.scores[:, 0], values)
    report, _ = explain_file(path, components=["r1"], max_groups=len(labels))
    _same_as_core(report, batch)


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


@pytest.mark.parametrize("seed", range(8))
def test_random_files_give_the_cores_numbers(tmp_path, monkeypatch, seed):
    # random sizes, scales, missing values, formats, block and slice sizes and estimators
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(cio, "_BLOCK", int(rng.choice([50, 200, 1 << 20])))
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
    path = _write(tmp_path, rows, FORMATS[seed % 4])
    estimators = list(
        rng.choice(["grpo", "corrgrpo", "gdpo", "rloo", "mo_grpo", "dr_grpo", "dara"], 3, replace=False)
    )
    w = rng.uniform(0.1, 3.0, k)
    batch = read_rewards(path, allow_nan=nan_policy == "ignore")
    report, _ = explain_file(
        path, estimators=estimators, weights=lambda names: w, nan_policy=nan_policy, max_groups=5
    )
    _same_as_core(report, batch, weights=w, nan_policy=nan_policy)
