"""``corrgrpo explain``: the paper's numbers, agreement with the core, degenerate groups, plots, errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import corrgrpo_core as cc
from corrgrpo_core.cli.explain import EXAMPLE, example_batch, explain
from corrgrpo_core.cli.io import RewardBatch, read_rewards


def test_example_prints_the_papers_numbers(run_cli):
    code, out, err = run_cli("explain", "--example")
    assert code == 0, err
    for expected in [
        "15.5520",
        "5.3902",
        "c_q = 1.6986",
        "91.1%",
        "r3 alone is 91.1% of GRPO's denominator^2",
        "0.9756",
        "0.1098",
        "-1.0954",
        "0.5477",
        "-1.8607",
        "0.9304",
        "-1.1534",
    ]:
        assert expected in out, expected
    assert re.search(r"\| degenerate groups +\| 0 \(0\.0%\)", out)
    header = next(line for line in out.splitlines() if line.startswith("| row"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "row",
        "r1",
        "r2",
        "r3",
        "grpo",
        "corrgrpo",
        "gdpo",
    ]


def test_file_and_example_give_the_same_report(run_cli, write_csv, fig2_csv):
    path = write_csv(fig2_csv)
    code, out, _ = run_cli("explain", str(path), "--group-col", "prompt", "--estimators", "corrgrpo,dr_grpo")
    assert code == 0
    assert "-1.8607" in out
    assert "-4.3200" in out


def _random_batch(seed: int) -> RewardBatch:
    rng = np.random.default_rng(seed)
    sizes = [4, 6, 1, 5]
    ids = np.repeat(np.arange(len(sizes)), sizes)
    scores = rng.normal(size=(ids.size, 3)) * np.array([0.1, 1.0, 10.0])
    scores[ids == 3, 0] = 0.25  # a component that does not vary in one group
    return RewardBatch(scores, ids.astype(np.int64), ("a", "b", "c", "d"), ("x", "y", "z"), "random")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numbers_come_from_the_core(seed):
    batch = _random_batch(seed)
    weights = np.array([2.0, 1.0, 0.5])
    ex = explain(batch, estimators=cc.estimator_names(), weights=weights)
    for name in cc.estimator_names():
        np.testing.assert_allclose(
            ex.advantages[name],
            cc.compute_advantages(batch.scores, batch.group_ids, estimator=name, weights=weights),
            rtol=1e-12,
            atol=1e-15,  # GDPO's batch mean is 0 up to rounding: a singleton's advantage is minus it
        )
    stats = cc.advantage_stats(batch.scores, batch.group_ids, weights=weights)
    for view in ex.groups:
        first = view.rows[0]
        # the display matrices must add up to exactly what the core divides by
        np.testing.assert_allclose(
            view.covariance.sum(), float(stats.covariance_sum[first]), rtol=1e-10, atol=1e-12
        )
        np.testing.assert_allclose(
            view.correlation.sum(), float(stats.correlation_sum[first]), rtol=1e-10, atol=1e-12
        )
        np.testing.assert_allclose(
            np.diag(view.covariance) / view.covariance.sum() if view.rows.size > 1 else 0.0,
            view.variance_share,
            atol=1e-12,
        )
    d = ex.groups[3]
    assert d.zero_variance == 1
    assert np.all(d.correlation[0] == 0)
    assert np.all(d.correlation[:, 0] == 0)


def test_degenerate_group_is_flagged(run_cli, write_csv):
    # values and format perfectly anti-correlated on different scales: correlation sum 0
    rows = [[1, -1.5], [0, 1.5], [1, -1.5], [0, 1.5]]
    text = "group,format,values\n" + "".join(f"q,{a},{b}\n" for a, b in rows) + "ok,1,1\nok,0,0\n"
    code, out, _ = run_cli("explain", str(write_csv(text)), "--estimators", "grpo,corrgrpo")
    assert code == 0
    assert out.count("DEGENERATE") == 1
    assert re.search(r"\| degenerate groups +\| 1 \(50\.0%\)", out)
    assert re.search(r"\| largest abs\(A\) in a degenerate group +\| 1000\.0000", out)
    assert "LARGE: corrgrpo" in out
    corr_row = next(line for line in out.splitlines() if line.startswith("| 1  "))
    assert abs(float(corr_row.split("|")[-2])) > 100  # CorrGRPO's advantage blows up ...
    assert abs(float(corr_row.split("|")[-3])) < 2  # ... GRPO's does not


def test_singleton_group_and_max_groups(run_cli, write_csv):
    text = "group,r1,r2\na,1,0\na,0,1\na,1,1\nb,1,1\n"
    code, out, _ = run_cli("explain", str(write_csv(text)), "--max-groups", "1")
    assert code == 0
    assert "1 more groups not shown" in out
    assert re.search(r"\| groups of one rollout +\| 1 ", out)
    code, out, _ = run_cli("explain", str(write_csv(text)))
    assert (
        "a group of one rollout: nothing to compare it with; every estimator here gives it advantage 0" in out
    )


def test_weights_are_applied_before_statistics(write_csv, fig2_csv):
    batch = read_rewards(write_csv(fig2_csv), group_col="prompt")
    ex = explain(batch, weights=np.array([1.0, 1.0, 0.1]))
    np.testing.assert_allclose(
        ex.advantages["corrgrpo"], cc.corr_normalized_advantage(EXAMPLE, weights=[1.0, 1.0, 0.1])
    )
    assert ex.groups[0].variance_share[2] < 0.2  # the big component no longer dominates


def test_plot_is_written(run_cli, tmp_path):
    png = tmp_path / "fig" / "fig2.png"
    code, out, _ = run_cli("explain", "--example", "--plot", str(png))
    assert code == 0
    assert f"plot written to {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 5_000 < png.stat().st_size < 200_000


def test_plot_group_by_label(run_cli, write_csv, tmp_path):
    path = write_csv("group,r1,r2\na,1,0\na,0,1\nb,1,1\nb,0,3\n")
    assert run_cli("explain", str(path), "--plot", str(tmp_path / "b.png"), "--plot-group", "b")[0] == 0
    code, _, err = run_cli("explain", str(path), "--plot", str(tmp_path / "c.png"), "--plot-group", "zz")
    assert code == 2
    assert "--plot-group 'zz' is not a group" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain"], "give a reward file or --example"),
        (["explain", "--example", "--estimators", "grpo,nope"], "unknown estimator(s) ['nope']"),
        (["explain", "--example", "--weights", "1,2"], "--weights has 2 values but there are 3"),
        (["explain", "--example", "--max-groups", "-1"], "--max-groups must be >= 0"),
    ],
)
def test_usage_errors_exit_2_with_a_message(run_cli, argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2
    assert message in err
    assert err.startswith("corrgrpo explain: error:")
    assert out == ""


def test_bad_file_error_reaches_the_user(run_cli, write_csv):
    code, _, err = run_cli("explain", str(write_csv("group,r1\ng,1\ng,oops\n")))
    assert code == 2
    assert "row 2 (line 3): column 'r1': 'oops' is not a number" in err


def test_nan_policy_ignore_passes_through(run_cli, write_csv):
    path = write_csv("group,r1,r2\ng,1,\ng,0,1\ng,1,0\n")
    assert run_cli("explain", str(path))[0] == 2
    code, out, _ = run_cli("explain", str(path), "--nan-policy", "ignore", "--estimators", "grpo")
    assert code == 0
    table = out.split("advantages:")[1].split("## batch")[0].strip().splitlines()[2:]
    grpo = [float(line.split("|")[-2]) for line in table]
    assert len(grpo) == 3
    assert np.all(np.isfinite(grpo))


def test_example_batch_is_a_copy():
    batch = example_batch()
    batch.scores[0, 0] = 99.0
    assert EXAMPLE[0, 0] == 0.10


@pytest.mark.parametrize("estimator", ["grpo", "corrgrpo", "gdpo", "rloo", "mo_grpo"])
def test_slices_of_whole_groups_give_the_same_numbers(monkeypatch, estimator):
    # the CLI hands the core slices of whole groups (bounded memory); the numbers must not change
    import corrgrpo_core.cli.explain as ex

    rng = np.random.default_rng(5)
    ids = rng.permutation(np.repeat(np.arange(40), rng.integers(1, 7, 40)))
    scores = rng.normal(size=(ids.size, 3)) * np.array([0.1, 1.0, 10.0])
    batch = RewardBatch(scores, ids.astype(np.int64), tuple(map(str, range(40))), ("x", "y", "z"), "r")
    whole = explain(batch, estimators=[estimator])
    monkeypatch.setattr(ex, "SLICE_ROWS", 7)
    sliced = explain(batch, estimators=[estimator])
    # atol: GDPO's batch mean is 0 up to rounding (1e-17), and a singleton's advantage is minus it
    np.testing.assert_allclose(
        sliced.advantages[estimator], whole.advantages[estimator], rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(
        sliced.advantages[estimator],
        cc.compute_advantages(scores, ids, estimator=estimator),
        rtol=1e-12,
        atol=1e-15,
    )
    for a, b in zip(sliced.groups, whole.groups, strict=True):
        assert a.degenerate == b.degenerate
        np.testing.assert_allclose([a.c_q, a.correlation_sum], [b.c_q, b.correlation_sum], rtol=1e-12)
        np.testing.assert_allclose(a.correlation, b.correlation)
    np.testing.assert_allclose(sliced.mean_correlation, whole.mean_correlation)
    assert sliced.summary == pytest.approx(whole.summary)


def test_group_locality_is_detected():
    from corrgrpo_core.cli.explain import is_group_local

    assert is_group_local("grpo")
    assert is_group_local("corrgrpo")
    assert not is_group_local("gdpo")  # its batch z-score couples the groups
    assert not is_group_local("grpo", {"std_scope": "batch"})


def test_group_locality_is_what_the_registry_declares():
    """A user's estimator is sliced only when its registry entry says it is group-local, whatever a
    test batch would suggest: GRPO's function registered with the default (batch) scope is not."""
    from corrgrpo_core import _registry
    from corrgrpo_core.cli.explain import is_group_local

    cc.register_estimator("grpo_batch_declared", cc.grpo_advantage, "GRPO, scope undeclared")
    cc.register_estimator("dr_grpo_local", cc.dr_grpo_advantage, "Dr.GRPO", scope="group")
    try:
        assert not is_group_local("grpo_batch_declared")
        assert is_group_local("dr_grpo_local")
    finally:
        del _registry._REGISTRY["grpo_batch_declared"], _registry._REGISTRY["dr_grpo_local"]


def test_group_labels_are_trimmed_on_the_dictionary(write_csv):
    batch = read_rewards(write_csv("group,r\n a,1\nb,2\na ,3\nb,4\n"))
    assert batch.group_labels == ("a", "b")
    np.testing.assert_array_equal(batch.group_ids, [0, 1, 0, 1])
