"""``corrgrpo explain RUN``: verl rollout dumps, step logs, per-step numbers checked against the core.

The dumps are written in verl 0.9.1's exact format by :func:`write_verl_dump`, a replica of
``RayPPOTrainer._write_generations`` (``verl/trainer/ppo/ray_trainer.py`` lines 453-477 of the
0.9.1 wheel: one ``<global_steps>.jsonl`` per step, keys input, output, gts, score, step, then every
reward extra-info list whose length is the batch's, one ``json.dumps(entry, ensure_ascii=False,
default=str)`` per line) fed the way ``_log_rollout_data`` (lines 514-547) feeds it. The verl suite
(tests/adapters/verl/test_explain_rollout_dumps.py) checks that this replica writes byte-identical
files to verl's own writer, and runs the command on files verl wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import corrgrpo_core as cc
from corrgrpo_core.cli import io as cli_io
from corrgrpo_core.cli.runs import analyse_run, find_run


def write_verl_dump(folder: Path, step: int, inputs, outputs, gts, scores, extra: dict) -> Path:
    """Replica of verl 0.9.1 ``RayPPOTrainer._write_generations`` (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{step}.jsonl"
    n = len(inputs)
    base = {"input": inputs, "output": outputs, "gts": gts, "score": scores, "step": [step] * n}
    for key, values in extra.items():
        if len(values) == n:
            base[key] = values
    with path.open("w") as handle:
        for i in range(n):
            handle.write(
                json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False, default=str) + "\n"
            )
    return path


def _step_data(rng: np.random.Generator, step: int, prompts: int, n: int = 4):
    inputs = [
        f"Question {step}.{p}: what is {p} + {step}? Ünïcode ✓" for p in range(prompts) for _ in range(n)
    ]
    outputs = [f"answer {i}" for i in range(len(inputs))]
    gts = [{"ground_truth": str(p)} if p % 2 else str(p) for p in range(prompts) for _ in range(n)]
    acc = (rng.random(len(inputs)) < 0.5).tolist()  # bools, as compute_score dicts often return
    fmt = rng.random(len(inputs)).round(3).tolist()
    length = rng.integers(10, 800, len(inputs)).tolist()
    score = [float(a) + 0.1 * f for a, f in zip(acc, fmt, strict=True)]
    extra = {"acc": acc, "fmt": fmt, "length": length, "request_id": [f"req-{i}" for i in range(len(inputs))]}
    return inputs, outputs, gts, score, extra


@pytest.fixture
def verl_run(tmp_path: Path) -> Path:
    """Four steps: step 2 has a malformed (truncated) line, step 3 a component missing in two rows,
    step 4 a single group."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "rollouts"
    for step, prompts in [(1, 5), (2, 5), (3, 5), (4, 1)]:
        inputs, outputs, gts, score, extra = _step_data(rng, step, prompts)
        path = write_verl_dump(folder, step, inputs, outputs, gts, score, extra)
        lines = path.read_text().splitlines(keepends=True)
        if step == 2:
            lines.insert(5, lines[5][:40] + "\n")  # a line cut short by a killed writer
        if step == 3:
            for i in (1, 6):
                row = json.loads(lines[i])
                del row["fmt"]
                lines[i] = json.dumps(row, ensure_ascii=False) + "\n"
        path.write_text("".join(lines))
    (folder / "notes.txt").write_text("not a dump")
    return folder


def _rows(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def test_layout_is_recognised_and_components_are_the_numeric_extra_keys(verl_run):
    source = find_run(verl_run, group_col=None, step_col="step", file_format=None)
    assert source.kind == "verl"
    assert [p.name for p in source.files] == ["1.jsonl", "2.jsonl", "3.jsonl", "4.jsonl"]
    assert source.group_col == "input"
    report = analyse_run(source, nan_policy="ignore")
    # not score or step; not request_id (text), gts (objects), input or output
    assert report.components == ("acc", "fmt", "length")
    # score = acc + 0.1 fmt exactly: those weights are found and used
    np.testing.assert_array_equal(report.weights, [1.0, 0.1, 0.0])


def test_run_report_end_to_end(run_cli, verl_run):
    code, out, err = run_cli("explain", str(verl_run), "--nan-policy", "ignore", "--components", "acc,fmt")
    assert code == 0, err
    assert "verl rollout dumps, 4 step file(s); 4 step(s)" in out
    assert "skipped 1 malformed line(s): 2.jsonl line 6: invalid JSON" in out
    assert "2 rollout(s) miss a component" in out
    step4 = next(line for line in out.splitlines() if line.startswith("| 4 ") and "rollouts" not in line)
    assert [c.strip() for c in step4.strip("|").split("|")][:3] == ["4", "4", "1"]
    assert "Switching" in out
    assert "algorithm.adv_estimator=corrgrpo +algorithm.reward_keys='[acc,fmt]'" in out
    assert "+algorithm.reward_weights='[1, 0.1]'" in out


def test_missing_component_without_ignore_names_file_line_and_key(run_cli, verl_run):
    code, out, err = run_cli("explain", str(verl_run), "--components", "acc,fmt")
    assert code == 2
    assert out == ""
    assert "3.jsonl row 2 (line 2): column 'fmt': missing value (pass --nan-policy ignore" in err


def _independent_spearman(a, b):
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def test_step_numbers_equal_the_core_on_the_same_rows(verl_run):
    source = find_run(verl_run, group_col=None, step_col="step", file_format=None)
    report = analyse_run(source, components=["acc", "fmt"], weights=np.array([1.0, 0.1]), nan_policy="ignore")
    assert [s.step for s in report.steps] == ["1", "2", "3", "4"]
    for step in report.steps:
        rows = _rows(verl_run / f"{step.step}.jsonl")
        labels = {r["input"]: None for r in rows}
        ids = np.array([list(labels).index(r["input"]) for r in rows])
        x = np.array([[float(r["acc"]), float(r.get("fmt", np.nan))] for r in rows])
        score = np.array([r["score"] for r in rows])
        assert step.rows == len(rows)
        assert step.groups == len(labels)
        stats = cc.advantage_stats(x, ids, weights=[1.0, 0.1], nan_policy="ignore")
        first = np.array([np.flatnonzero(ids == g)[0] for g in range(len(labels))])
        varies = np.asarray(stats.total_varies)[first]
        np.testing.assert_allclose(step.c_q[2], np.median(np.asarray(stats.c_q)[first][varies]))
        base = cc.compute_advantages(score[:, None], ids, estimator="grpo")
        corr = cc.compute_advantages(x, ids, estimator="corrgrpo", weights=[1.0, 0.1], nan_policy="ignore")
        change = step.changes["corrgrpo"]
        np.testing.assert_allclose(change.rank, _independent_spearman(corr, base), atol=1e-12)
        np.testing.assert_allclose(change.scale, np.mean(np.abs(corr)) / np.mean(np.abs(base)))
        assert change.flips == np.mean(np.sign(corr) * np.sign(base) < 0)
    assert report.steps[-1].groups == 1  # the single-group step is analysed, not dropped
    assert report.baseline_from_score


def test_each_step_is_read_alone_and_text_columns_are_not_kept(verl_run, monkeypatch):
    calls = []
    real = cli_io.read_columns

    def spy(path, **kw):
        cols = real(path, **kw)
        calls.append((Path(path).name, sorted(cols.data)))
        return cols

    monkeypatch.setattr("corrgrpo_core.cli.runs.read_columns", spy)
    source = find_run(verl_run, group_col=None, step_col="step", file_format=None)
    analyse_run(source, components=["acc", "fmt"], nan_policy="ignore")
    assert [name for name, _ in calls] == ["1.jsonl", "2.jsonl", "3.jsonl", "4.jsonl"]  # once each
    assert all("output" not in keys and "gts" not in keys for _, keys in calls)


def test_collapsed_group_gets_the_floor_advice(run_cli, tmp_path):
    # one prompt whose two components are perfectly anti-correlated on different scales
    folder = tmp_path / "dumps"
    inputs = ["p"] * 4 + ["q"] * 4
    fmt = [1, 0, 1, 0, 1, 0, 0, 1]
    val = [-1.5, 1.5, -1.5, 1.5, 0.2, 0.1, 0.4, 0.3]
    score = [a + b for a, b in zip(fmt, val, strict=True)]
    write_verl_dump(folder, 7, inputs, ["o"] * 8, [None] * 8, score, {"fmt": fmt, "values": val})
    code, out, err = run_cli("explain", str(folder))
    assert code == 0, err
    assert re.search(r"collapsed groups \(corr. sum < 0.25\) +\| 1 ", out)
    assert "Set min_correlation_sum=1" in out
    assert "estimator_kwargs='{min_correlation_sum: 1}'" in out
    assert "advantage_min_correlation_sum=1" in out


def test_one_component_says_corrgrpo_is_dr_grpo(run_cli, tmp_path):
    folder = tmp_path / "v1"
    write_verl_dump(
        folder,
        1,
        ["a"] * 3 + ["b"] * 3,
        ["o"] * 6,
        ["1"] * 6,
        [0.0, 1, 1, 0, 0, 1],
        {"uid": [f"u{i}_0_0" for i in range(6)]},
    )
    code, out, err = run_cli("explain", str(folder))
    assert code == 0, err
    assert "components: score" in out
    assert "CorrGRPO is Dr.GRPO here" in out


def test_log_file_with_step_and_group_columns(run_cli, write_csv, tmp_path):
    rng = np.random.default_rng(1)
    lines = ["step,group,r1,r2"]
    for step in (1, 2, 3):
        for g in range(4):
            for _ in range(5):
                lines.append(f"{step},g{g},{rng.random():.4f},{rng.integers(0, 2)}")
    path = write_csv("\n".join(lines) + "\n", "train_log.csv")
    code, out, err = run_cli("explain", str(path))
    assert code == 0, err
    assert "a log file with a step column; 3 step(s), 60 rollouts, 12 groups" in out
    pa = pytest.importorskip("pyarrow")
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    folder = tmp_path / "logs"
    folder.mkdir()
    table = pcsv.read_csv(path)
    pq.write_table(table.slice(0, 20), folder / "part-1.parquet")
    pq.write_table(table.slice(20), folder / "part-10.parquet")
    code, out2, err = run_cli("explain", str(folder))
    assert code == 0, err
    assert "2 log file(s); 3 step(s), 60 rollouts, 12 groups" in out2
    assert pa is not None


def test_run_plot(run_cli, verl_run, tmp_path):
    png = tmp_path / "plots" / "run.png"
    code, _out, err = run_cli("explain", str(verl_run), "--nan-policy", "ignore", "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "is a folder with no verl rollout dumps (<step>.jsonl"),
        (lambda d: (d / "1.jsonl").write_text(""), "no data rows in the run"),
        (
            lambda d: (d / "1.jsonl").write_text('{"input": "a", "step": 1, "note": "x"}\n'),
            "no numeric reward",
        ),
    ],
)
def test_run_errors(run_cli, tmp_path, setup, message):
    folder = tmp_path / "run"
    folder.mkdir()
    setup(folder)
    code, _out, err = run_cli("explain", str(folder))
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_run_estimator(run_cli, verl_run):
    code, _, err = run_cli("explain", str(verl_run), "--run-estimator", "ppo")
    assert code == 2
    assert "unknown estimator(s) ['ppo']" in err


def _log_rows(rng, steps=(1, 2, 3), groups=4, n=5):
    return [
        (step, f"g{g}", round(float(rng.random()), 4), int(rng.integers(0, 2)))
        for step in steps
        for g in range(groups)
        for _ in range(n)
    ]


def _reports_equal(a, b):
    assert [s.step for s in a.steps] == [s.step for s in b.steps]
    for x, y in zip(a.steps, b.steps, strict=True):
        assert (x.rows, x.groups, x.flat, x.collapsed) == (y.rows, y.groups, y.flat, y.collapsed)
        np.testing.assert_allclose(x.c_q, y.c_q)
        for e in x.changes:
            np.testing.assert_allclose(x.changes[e].rank, y.changes[e].rank)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_a_log_is_cut_into_steps_in_every_format(tmp_path, monkeypatch, fmt):
    from corrgrpo_core.cli import runs

    rows = _log_rows(np.random.default_rng(3))
    path = tmp_path / f"log.{fmt}"
    if fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        path.write_text(
            sep.join(["step", "group", "r1", "r2"])
            + "\n"
            + "".join(sep.join(map(str, row)) + "\n" for row in rows)
        )
    elif fmt == "jsonl":
        path.write_text(
            "".join(json.dumps({"step": s, "group": g, "r1": a, "r2": b}) + "\n" for s, g, a, b in rows)
        )
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        columns = list(zip(*rows, strict=True))
        pq.write_table(pa.table(dict(zip(["step", "group", "r1", "r2"], columns, strict=True))), path)
    monkeypatch.setattr(cli_io, "_BLOCK", 256)  # several pyarrow blocks per step
    seen = []
    real = runs.batch_from_columns

    def spy(cols, **kw):
        seen.append(kw["rows"].size)
        return real(cols, **kw)

    monkeypatch.setattr(runs, "batch_from_columns", spy)
    source = find_run(path, group_col=None, step_col="step", file_format=None)
    report = analyse_run(source)
    assert seen == [20, 20, 20]  # each step alone
    text = tmp_path / "log.txt"
    text.write_text("step,group,r1,r2\n" + "".join(",".join(map(str, row)) + "\n" for row in rows))
    _reports_equal(report, analyse_run(find_run(text, group_col=None, step_col="step", file_format="csv")))


def test_log_with_interleaved_steps_is_read_whole_with_the_same_numbers(write_csv):
    rows = _log_rows(np.random.default_rng(4))
    ordered = write_csv("step,group,r1,r2\n" + "".join(f"{s},{g},{a},{b}\n" for s, g, a, b in rows), "a.csv")
    shuffled = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    mixed = write_csv(
        "step,group,r1,r2\n" + "".join(f"{s},{g},{a},{b}\n" for s, g, a, b in shuffled), "b.csv"
    )
    a = analyse_run(find_run(ordered, group_col=None, step_col="step", file_format=None))
    b = analyse_run(find_run(mixed, group_col=None, step_col="step", file_format=None))
    assert [s.rows for s in b.steps] == [20, 20, 20]
    for x, y in zip(a.steps, b.steps, strict=True):
        np.testing.assert_allclose(x.c_q, y.c_q)
        assert x.groups == y.groups


def test_one_verl_dump_file_groups_by_input(run_cli, verl_run):
    code, out, err = run_cli("explain", str(verl_run / "1.jsonl"), "--components", "acc,fmt")
    assert code == 0, err
    assert "a log file with a step column; 1 step(s), 20 rollouts, 5 groups" in out
    assert "sharing 'input'" in out


def test_the_docs_example_run(run_cli, tmp_path):
    # docs/cli.md prints this example's report; keep it running and saying what the docs say
    import importlib.util

    path = Path(__file__).parents[2] / "examples" / "verl_rollout_dumps.py"
    spec = importlib.util.spec_from_file_location("verl_rollout_dumps", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_run(str(tmp_path / "rollouts"), steps=3, prompts=24)
    code, out, err = run_cli("explain", str(tmp_path / "rollouts"))
    assert code == 0, err
    assert "weights: acc=1, format=0.2, length=0.5" in out
    assert "Switching matters for this run: acc's variance is" in out
    assert "Set min_correlation_sum=1" in out


def test_group_column_is_found_and_weights_are_taken(run_cli, write_csv):
    text = "step,prompt_id,a,b\n" + "".join(
        f"{s},p{g},{(s + g + i) % 3},{i % 2}\n" for s in (1, 2) for g in range(3) for i in range(4)
    )
    path = write_csv(text, "log.csv")
    code, out, err = run_cli("explain", str(path), "--weights", "b=0.5")
    assert code == 0, err
    assert "sharing 'prompt_id'" in out
    assert "weights: a=1, b=0.5" in out
    assert "+algorithm.reward_weights='[1, 0.5]'" in out


def test_overflowing_values_in_a_run_are_a_clear_error(run_cli, tmp_path):
    folder = tmp_path / "dumps"
    write_verl_dump(
        folder,
        1,
        ["p"] * 3,
        ["o"] * 3,
        [None] * 3,
        [1.0, 0.0, 1.0],
        {"a": [1e308, -1e308, 0.0], "b": [1, 0, 1]},
    )
    code, _out, err = run_cli("explain", str(folder))
    assert code == 2
    assert "1.jsonl: values as large as 1e+308 (component 'a', row 1) overflow" in err
    assert len(err.strip().splitlines()) == 1


def test_two_alike_rewards_are_no_reason_to_switch(run_cli, tmp_path):
    # two independent rewards on one scale: neither dominates, CorrGRPO barely reorders
    rng = np.random.default_rng(0)
    folder = tmp_path / "calm"
    for step in (1, 2, 3):
        a, b = rng.normal(size=(2, 512)).tolist()
        inputs = [f"p{i // 8}" for i in range(512)]
        total = [x + y for x, y in zip(a, b, strict=True)]
        write_verl_dump(folder, step, inputs, ["o"] * 512, ["1"] * 512, total, {"a": a, "b": b})
    code, out, err = run_cli("explain", str(folder))
    assert code == 0, err
    assert "Switching would change little in this run" in out
    assert "No component dominates GRPO's denominator" in out
