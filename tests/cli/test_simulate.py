"""``corrgrpo simulate``: deterministic, driven only by the core's advantages, reports what it claims."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import corrgrpo_core as cc
from corrgrpo_core.cli import simulate as sim

TINY = sim.SimulationConfig(
    steps=12, seeds=2, n_prompts=8, n_candidates=6, n_features=4, batch_prompts=4, eval_every=4
)


@pytest.mark.parametrize("name", list(sim.SCENARIOS))
def test_scenarios_sample_what_they_expect(name):
    # ``expected`` must be the mean of ``sample``: the curves are computed from it
    scenario = sim.SCENARIOS[name]
    env = scenario.build(np.random.default_rng(0), TINY)
    assert env.expected.shape == (TINY.n_prompts, TINY.n_candidates, len(scenario.components))
    p = np.repeat(np.arange(2), 20_000)
    m = p.copy()
    draws = env.sample(np.random.default_rng(1), p, m)
    np.testing.assert_allclose(draws[p == 0].mean(axis=0), env.expected[0, 0], atol=0.05)
    np.testing.assert_allclose(draws[p == 1].mean(axis=0), env.expected[1, 1], atol=0.05)


def test_code_chain_stages_are_nested():
    env = sim.SCENARIOS["code_chain"].build(np.random.default_rng(0), TINY)
    draws = env.sample(np.random.default_rng(1), np.zeros(500, dtype=np.int64), np.arange(500) % 6)
    stages = draws[:, :5]
    assert np.all(np.diff(stages, axis=1) <= 0)  # no stage passes unless the previous one did
    assert np.all(draws[stages[:, 4] == 0, 6] == 0)  # no efficiency without passing the tests


def test_deterministic_for_a_seed():
    scenario = sim.SCENARIOS["utility_security"]
    a = sim.train_once(scenario, "corrgrpo", TINY, seed=3)
    b = sim.train_once(scenario, "corrgrpo", TINY, seed=3)
    c = sim.train_once(scenario, "corrgrpo", TINY, seed=4)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.max_abs_advantage == b.max_abs_advantage
    assert not np.array_equal(a.values, c.values)


def test_advantages_are_the_cores(monkeypatch):
    calls = []
    real = cc.compute_advantages

    def recording(scores, group_ids=None, *, estimator="corrgrpo", **options):
        out = real(scores, group_ids, estimator=estimator, **options)
        calls.append((scores.copy(), group_ids, estimator, options, np.array(out)))
        return out

    monkeypatch.setattr(cc, "compute_advantages", recording)
    scenario = sim.SCENARIOS["code_chain"]
    sim.train_once(scenario, "gdpo", TINY, seed=0)
    assert len(calls) == TINY.steps
    for scores, ids, estimator, options, out in calls:
        assert estimator == "gdpo"
        assert ids is None  # one dense (prompts, rollouts, K) block per step
        assert scores.shape == (TINY.batch_prompts, scenario.group_size, len(scenario.components))
        np.testing.assert_array_equal(options["weights"], scenario.weights)
        # the same numbers as the ragged call an adapter would make
        ragged_ids = np.repeat(np.arange(TINY.batch_prompts), scenario.group_size)
        flat = scores.reshape(-1, scores.shape[-1])
        np.testing.assert_allclose(
            out.reshape(-1), cc.gdpo_advantage(flat, ragged_ids, weights=scenario.weights)
        )


def test_learning_is_driven_only_by_the_advantages(monkeypatch):
    # zero advantages from the core must leave the policy (and so every curve) where it started
    monkeypatch.setattr(
        cc, "compute_advantages", lambda scores, group_ids=None, **kw: np.zeros(scores.shape[:-1])
    )
    run = sim.train_once(sim.SCENARIOS["duplicated"], "corrgrpo", TINY, seed=0)
    np.testing.assert_array_equal(run.values, np.broadcast_to(run.values[0], run.values.shape))


def test_policy_improves_the_weighted_total():
    cfg = sim.SimulationConfig(
        steps=60, seeds=1, n_prompts=16, n_candidates=8, batch_prompts=8, eval_every=20
    )
    for name in ("grpo", "corrgrpo"):
        run = sim.train_once(sim.SCENARIOS["dominant_scale"], name, cfg, seed=0)
        assert run.values[-1, -1] > run.values[0, -1] + 1.0  # total starts near 6 of ~10


def test_anticorrelated_scenario_exposes_the_degenerate_denominator():
    result = sim.run_scenario(sim.SCENARIOS["anticorrelated"], ["grpo", "corrgrpo"], TINY)
    assert result.max_abs_advantage["corrgrpo"] > 100  # correlation sum ~0 -> 1/sqrt(eps) amplification
    assert result.max_abs_advantage["grpo"] < 2


def test_result_statistics():
    result = sim.run_scenario(sim.SCENARIOS["duplicated"], ["grpo", "corrgrpo"], TINY)
    assert result.columns == ("correct", "correct_copy", "style", "total")
    np.testing.assert_array_equal(result.steps, [0, 4, 8, 12])
    curves = result.curves["grpo"]
    assert curves.shape == (2, 4, 4)
    np.testing.assert_allclose(curves[..., 3], curves[..., :3] @ np.ones(3))
    mean, half = result.final("grpo")
    np.testing.assert_allclose(mean, curves[:, -1].mean(axis=0))
    np.testing.assert_allclose(half, 1.96 * curves[:, -1].std(axis=0, ddof=1) / np.sqrt(2))
    diff, _ = result.paired_difference("corrgrpo", "grpo")
    np.testing.assert_allclose(diff, result.final("corrgrpo")[0] - mean)
    assert np.all(result.oracle >= result.initial)


def test_steps_to_threshold_median_counts_unreached_seeds_as_slowest():
    result = sim.run_scenario(sim.SCENARIOS["duplicated"], ["grpo"], TINY)
    curves = np.zeros((3, 4, 4))
    curves[0, 1:] = 10.0  # reached at step 4
    curves[1, 2:] = 10.0  # reached at step 8
    forced = sim.ScenarioResult(
        result.scenario, result.steps, {"x": curves}, {"x": 0.0}, np.zeros(4), np.ones(4), 0.5
    )
    median, reached = forced.steps_to_threshold("x")
    np.testing.assert_array_equal(median, [8.0] * 4)
    np.testing.assert_array_equal(reached, [2] * 4)
    curves[1] = 0.0
    median, reached = forced.steps_to_threshold("x")
    assert np.all(np.isinf(median))
    assert np.all(reached == 1)


def test_config_validation():
    with pytest.raises(ValueError, match="batch_prompts"):
        sim.SimulationConfig(n_prompts=4, batch_prompts=8)
    with pytest.raises(ValueError, match="threshold"):
        sim.SimulationConfig(threshold=0.0)
    with pytest.raises(ValueError, match="steps"):
        sim.SimulationConfig(steps=0)
    assert sim.SimulationConfig(steps=12, eval_every=5).eval_steps.tolist() == [0, 5, 10, 12]


def test_simulate_command_writes_report_table_and_plots(run_cli, tmp_path):
    out_dir = tmp_path / "sim"
    code, out, err = run_cli(
        "simulate",
        "--scenarios",
        "duplicated,anticorrelated",
        "--estimators",
        "grpo,corrgrpo,gdpo",
        "--steps",
        "10",
        "--seeds",
        "2",
        "--eval-every",
        "5",
        "--out",
        str(out_dir),
        "--no-progress",
    )
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("| scenario"))
    assert [c.strip() for c in header.strip("|").split("|")] == list(sim.COMPARISON_HEADERS)
    assert out.count("| duplicated ") == 4
    assert out.count("| anticorrelated ") == 3
    assert "## anticorrelated" in out
    assert "steps to threshold" in out
    assert (out_dir / "report.md").read_text().strip() in out
    for name in (
        "duplicated.png",
        "anticorrelated.png",
        "duplicated_vs_grpo.png",
        "anticorrelated_vs_grpo.png",
    ):
        assert (out_dir / name).read_bytes()[:4] == b"\x89PNG"
    with (out_dir / "summary.csv").open() as handle:
        records = list(csv.DictReader(handle))
    assert len(records) == (4 + 3) * 3
    assert set(records[0]) == {
        "scenario",
        "estimator",
        "component",
        "final_mean",
        "final_ci95",
        "steps_to_threshold_median",
        "seeds_reached",
        "initial",
        "oracle",
        "max_abs_advantage",
    }


def test_simulate_numbers_match_a_direct_run(run_cli, tmp_path):
    run_cli(
        "simulate",
        "--scenarios",
        "utility_security",
        "--estimators",
        "grpo,corrgrpo",
        "--steps",
        "10",
        "--seeds",
        "2",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    cfg = sim.SimulationConfig(steps=10, seeds=2)
    direct = sim.run_scenario(sim.SCENARIOS["utility_security"], ["grpo", "corrgrpo"], cfg)
    with (tmp_path / "summary.csv").open() as handle:
        rows = {(r["estimator"], r["component"]): float(r["final_mean"]) for r in csv.DictReader(handle)}
    for name in ("grpo", "corrgrpo"):
        mean, _ = direct.final(name)
        for j, column in enumerate(direct.columns):
            assert rows[(name, column)] == pytest.approx(mean[j], rel=1e-12)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scenarios", "nope"], "unknown scenario(s) ['nope']"),
        (["--estimators", "grpo,bogus"], "unknown estimator(s) ['bogus']"),
        (["--seeds", "0"], "seeds must be >= 1"),
        (["--threshold", "2"], "threshold must be in (0, 1]"),
    ],
)
def test_simulate_errors(run_cli, argv, message):
    code, _, err = run_cli("simulate", "--no-progress", *argv)
    assert code == 2
    assert message in err


def test_progress_bar_goes_to_stderr(run_cli):
    code, out, _ = run_cli(
        "simulate", "--scenarios", "duplicated", "--estimators", "grpo", "--steps", "4", "--seeds", "1"
    )
    assert code == 0
    assert "## duplicated" in out
    assert "simulating" not in out


def test_docs_show_the_default_run():
    # docs/simulation.md quotes the default run; re-run its cheapest scenario and compare the rows
    docs = (Path(__file__).resolve().parents[2] / "docs" / "simulation.md").read_text()
    result = sim.run_scenario(sim.SCENARIOS["anticorrelated"], cc.estimator_names(), sim.SimulationConfig())
    for row in sim.comparison_rows(result):
        cells = [c.strip() for c in row]
        line = next(
            (ln for ln in docs.splitlines() if ln.startswith(f"| {cells[0]} ") and f"| {cells[1]} " in ln), ""
        )
        assert [c.strip() for c in line.strip("|").split("|")] == cells
