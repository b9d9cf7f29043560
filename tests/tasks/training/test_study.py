"""The pre-registered study's harness (corrgrpo_tasks.training.study, step0): the design's invariants,
the frozen per-arm lr, the pre-registered test's statistics, the step-0 statistic, the mirror task, the
study arms' TRL settings. No training: records are written by hand."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import warnings
from pathlib import Path

import pytest

import corrgrpo_core as cc
from corrgrpo_tasks.training import RunRecords, write_csv, write_run_file
from corrgrpo_tasks.training import study as st
from corrgrpo_tasks.training._report import median
from corrgrpo_tasks.training._scales import MIRROR_COMPONENTS, MIRROR_RANGES, score_mirror
from corrgrpo_tasks.training.step0 import group_rows, spearman, step_rows

DOCS = Path(__file__).resolve().parents[3] / "docs" / "experiments"


def test_the_design_pairs_sixteen_test_seeds_over_two_warm_starts_and_never_tunes_on_them() -> None:
    seeds = [s for block in st.TEST_SEEDS.values() for s in block]
    assert len(seeds) == len(set(seeds)) == 16
    assert not set(st.TUNING_SEEDS) & set(seeds)
    every = st.parts()
    first_test = next(i for i, p in enumerate(every) if p.lr is None)
    assert all(p.lr is not None for p in every[:first_test])  # tuning parts come first
    assert all(p.lr is None for p in every[first_test:])
    for name, cfg in st.CONFIGS.items():
        tests = [p for p in every if p.config == name and p.lr is None]
        assert sorted(s for p in tests for s in p.seeds) == sorted(seeds)
        assert set(cfg.warm) == {p.warm for p in tests} == {"A", "B"}
        assert {p.lr for p in every if p.config == name and p.lr is not None} == set(st.LR_GRID)
    # each part well inside two hours of both cores
    assert max(p.core_hours for p in every) <= 2.0
    assert {st.CONFIGS[n].generations for n in ("scales_n4", "mirror_n4", "tool_n4")} == {4}


def _write_run(folder: Path, arm_auc: dict[str, float], seed: int) -> None:
    """A finished one-seed corrgrpo train folder whose arms' exact match is flat at the given value."""
    evals = [
        {"task": "scales", "estimator": arm, "seed": seed, "step": step, "exact_match": value, "score": 0.0}
        for arm, value in arm_auc.items()
        for step in (0, 25)
    ]
    folder.mkdir(parents=True)
    write_csv(folder / "evals.csv", evals)
    write_csv(folder / "steps.csv", [{"estimator": a, "seed": seed, "step": 1} for a in arm_auc])
    write_run_file(
        folder, RunRecords(config={"task": "scales", "estimators": list(arm_auc)}, wall_seconds=1.0)
    )


def test_the_lr_is_chosen_on_tuning_seeds_by_auc_with_ties_towards_2e_4_and_then_frozen(
    tmp_path: Path,
) -> None:
    auc = {1e-4: 0.30, 2e-4: 0.30, 4e-4: 0.35}  # grpo best at 4e-4; corrgrpo ties 1e-4/2e-4 -> 2e-4
    for part in (p for p in st.parts() if p.config == "scales_n8" and p.lr is not None):
        assert part.lr is not None
        for seed in part.seeds:
            arms = dict.fromkeys(st.ARMS, 0.1) | {
                "grpo": auc[part.lr],
                "corrgrpo": 0.5 - 0.1 * (part.lr > 3e-4),
            }
            _write_run(st.seed_folder(tmp_path, part, seed), arms, seed)
    test_part = next(p for p in st.parts() if p.config == "scales_n8" and p.lr is None)
    with pytest.raises(ValueError, match="no frozen lr"):
        st.part_command(tmp_path, test_part, test_part.seeds[0])
    chosen = st.choose_lr(tmp_path)
    assert set(chosen) == {"scales_n8"}  # the other configurations' tuning has not run
    assert (chosen["scales_n8"]["grpo"], chosen["scales_n8"]["corrgrpo"]) == (4e-4, 2e-4)
    command = " ".join(st.part_command(tmp_path, test_part, test_part.seeds[0]))
    assert "grpo=0.0004" in command
    assert "corrgrpo=0.0002" in command
    assert "--first-seed=0" in command
    # frozen: a later choose-lr keeps it even if the tuning folders changed
    json.loads((tmp_path / "lr.json").read_text())
    assert st.choose_lr(tmp_path)["scales_n8"] == chosen["scales_n8"]


def test_collected_seeds_are_a_study_root_the_harness_reads_as_the_runs(tmp_path: Path) -> None:
    from benchmarks.training_study import collect

    root, docs = tmp_path / "study", tmp_path / "docs"
    tuning = [p for p in st.parts() if p.config == "scales_n8" and p.lr is not None]
    for part in tuning:
        assert part.lr is not None
        for seed in part.seeds:
            _write_run(st.seed_folder(root, part, seed), dict.fromkeys(st.ARMS, 0.1 + part.lr), seed)
    unfinished = st.seed_folder(root, tuning[0], tuning[0].seeds[0])
    (unfinished / "run.json").write_text(json.dumps({"wall_seconds": 0}))
    written = collect(root, docs)
    assert len(written) == 2 * len(tuning) - 1  # the unfinished seed stays behind
    assert all((f / "steps.csv.gz").is_file() and not (f / "steps.csv").exists() for f in written)
    assert st.plan_lines(docs) == st.plan_lines(root)
    assert collect(root, docs) == []  # copied once
    shutil.rmtree(unfinished)  # the seed finishes in a later sitting
    _write_run(unfinished, dict.fromkeys(st.ARMS, 0.1 + 1e-4), tuning[0].seeds[0])
    assert collect(root, docs) == [st.seed_folder(docs, tuning[0], tuning[0].seeds[0])]
    assert st.choose_lr(docs) == st.choose_lr(root)


def test_the_analysis_pairs_corrgrpo_with_grpo_and_marks_an_incomplete_test(tmp_path: Path) -> None:
    rng = random.Random(0)
    diffs = []
    for part in (p for p in st.parts() if p.config == "mirror_n8" and p.lr is None and p.warm == "A"):
        for seed in part.seeds:
            d = 0.02 + rng.gauss(0, 0.01)
            diffs.append(d)
            _write_run(st.seed_folder(tmp_path, part, seed), {"grpo": 0.3, "corrgrpo": 0.3 + d}, seed)
    (row,) = st.analyse(tmp_path)
    assert row["config"] == "mirror_n8"
    assert row["n"] == 8
    assert not row["complete"]
    assert row["mean"] == pytest.approx(sum(diffs) / 8)
    assert row["p_flip"] == pytest.approx(2 / 256)  # all eight positive
    assert row["holm_t"] == pytest.approx(row["p_t"])  # one configuration in the family so far
    assert "INCOMPLETE" in st.render_analysis([row])


def test_the_test_statistics_match_their_tables() -> None:
    assert st.t_two_sided_p(2.306, 8) == pytest.approx(0.05, abs=2e-4)
    assert st.t_two_sided_p(-3.0, 15) == pytest.approx(0.00897, abs=5e-5)
    assert st.sign_flip_p([1.0, -1.0, 2.0, 3.0]) == pytest.approx(0.375)
    assert st.holm({"a": 0.001, "b": 0.2}) == {"a": 0.002, "b": 0.2}
    assert median([150, 150, 225, 250]) == 187.5


def test_step0_finds_the_zero_correlation_sum_group_and_the_alignment_sign() -> None:
    comps = ("match_reward", "prefix_reward", "judge_reward")
    # the referee's degenerate group: 7 x (0.1, 0.1, 3.0) + 1 x (0.5, 0.1, 1.0)
    rows = [{"step": 1, "group": "1-0", **dict(zip(comps, (0.1, 0.1, 3.0), strict=True))} for _ in range(7)]
    rows.append({"step": 1, "group": "1-0", **dict(zip(comps, (0.5, 0.1, 1.0), strict=True))})
    # a group whose total follows the learnable signal, and one where the judge's noise reverses it
    for g, judge in (("1-1", (1.0, 2.0, 3.0, 4.0)), ("2-0", (4.0, 3.0, 2.0, 1.0))):
        rows += [
            {"step": int(g[0]), "group": g, "match_reward": m, "prefix_reward": m, "judge_reward": j}
            for m, j in zip((0.1, 0.3, 0.5, 0.7), judge, strict=True)
        ]
    groups = {g["group"]: g for g in group_rows(rows, comps, "scales")}
    assert groups["1-0"]["degenerate"]
    assert groups["1-0"]["total_varies"]
    assert groups["1-0"]["c_q"] > 100
    assert groups["1-1"]["alignment"] == pytest.approx(1.0)
    assert groups["2-0"]["alignment"] == pytest.approx(-1.0)
    steps = step_rows(list(groups.values()), [{"step": 1, "entropy": 0.5}, {"step": 2, "entropy": 0.9}])
    assert [(s["degenerate_groups"], s["varying_groups"], s["entropy"]) for s in steps] == [
        (1, 2, 0.5),
        (0, 1, 0.9),
    ]
    assert spearman([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)


def test_the_mirror_judge_carries_the_signal_and_corrgrpo_shrinks_noise_only_groups() -> None:
    rng = random.Random(1)
    target = "dbacgh"
    for answer in ("", target, "zzz", target[:3]):
        row = score_mirror(answer, target)
        for name in (*MIRROR_COMPONENTS, "exact_match"):
            low, high = MIRROR_RANGES[name]
            assert low <= row[name] <= high + 1e-12
    # a group of equally right answers (one wrong letter each): only noise varies
    noise = [target[:i] + "z" + target[i + 1 :] for i in range(6)]
    # a group of answers from right to wrong
    mixed = [target, target[:5] + "z", target[:3] + "zzz", "zzzzzz", target[:4] + "zz", "zz" + target[2:]]
    rng.shuffle(mixed)
    rows = [[score_mirror(a, target)[c] for c in MIRROR_COMPONENTS] for a in (*noise, *mixed)]
    import numpy as np

    stats = cc.advantage_stats(np.array(rows), np.array([0] * 6 + [1] * 6))
    c_q = np.asarray(stats.c_q)
    assert c_q[0] < 0.5 < c_q[6]  # GRPO weights both groups alike; CorrGRPO the informative one up
    totals = [sum(r) for r in rows[6:]]
    rights = [score_mirror(a, target)["judge_reward"] for a in mixed]
    assert spearman(totals, rights) > 0.9


def test_the_study_arms_set_their_trl_options_without_a_future_warning(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from corrgrpo_tasks.training._run import TrainConfig, _grpo_args
    from corrgrpo_tasks.training._tasks import get_task

    cfg = TrainConfig(
        task="scales", estimators=("corrgrpo_floor1", "grpo_batch_std"), arm_lr=(("grpo_batch_std", 4e-4),)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # transformers' gradient_checkpointing rename
        floor = _grpo_args(cfg, get_task("scales"), "corrgrpo_floor1", 0, tmp_path, 10)
        batch = _grpo_args(cfg, get_task("scales"), "grpo_batch_std", 0, tmp_path, 10)
    assert floor.advantage_plan().estimator == "corrgrpo"
    assert floor.advantage_plan().options["min_correlation_sum"] == 1.0
    assert batch.advantage_plan().options["std_scope"] == "batch"
    assert (floor.learning_rate, batch.learning_rate) == (cfg.lr, 4e-4)
    from trl import SFTConfig

    from corrgrpo_tasks.training._model import checkpointing_option

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert (
            SFTConfig(
                output_dir=str(tmp_path), use_cpu=True, bf16=False, **checkpointing_option(False)
            ).gradient_checkpointing
            is False
        )
        assert (
            SFTConfig(
                output_dir=str(tmp_path), use_cpu=True, bf16=False, **checkpointing_option(True)
            ).gradient_checkpointing
            is True
        )
    with pytest.raises(ValueError, match="arm_lr"):
        TrainConfig(estimators=("grpo",), arm_lr=(("gdpo", 1e-4),))


@pytest.mark.parametrize("report", sorted(DOCS.glob("*/report.md")), ids=lambda p: p.parent.name)
def test_every_committed_report_table_has_as_many_delimiter_cells_as_header_cells(report: Path) -> None:
    lines = report.read_text().splitlines()
    for head, rule in itertools.pairwise(lines):
        if rule.startswith("|---") and head.startswith("|"):
            assert rule.count("|---") == head.count("|") - 1, head


def test_the_published_studies_multiplicity_table_is_the_referees() -> None:
    rows = st.published_tests([DOCS / "scales", DOCS / "tool_calling"])
    assert len(rows) == 16
    by = {(r["task"], r["estimator"], r["metric"]): r for r in rows}
    scales = by["scales", "corrgrpo", "auc"]
    assert (round(scales["mean"], 3), scales["up"], scales["down"]) == (-0.041, 0, 7)
    assert scales["p_t"] == pytest.approx(0.022, abs=5e-4)
    assert scales["holm_t"] == pytest.approx(0.131, abs=2e-3)  # not significant after Holm
    assert scales["mde80"] == pytest.approx(0.046, abs=2e-3)
    assert min(r["p_flip"] for r in rows) == pytest.approx(2 / 256)  # above Holm's first threshold
    assert sum(r["holm_t"] < 0.05 for r in rows) == 9
