"""The ``scales`` task: string reversal scored on very different scales, the situation of the paper's
Figure 2 (small, correlated components carry the signal; a large one is mostly noise). No TRL needed."""

from __future__ import annotations

import random
import statistics

import pytest

from corrgrpo_tasks.training._scales import (
    COMPONENTS,
    RANGES,
    make_scales_examples,
    scales_reward_functions,
    score_reversal,
)


def _near_misses(target: str, rng: random.Random, n: int) -> list[str]:
    """A group of answers a partly trained policy might give: the target with 0-3 letters changed."""
    group = []
    for _ in range(n):
        letters = list(target)
        for i in rng.sample(range(len(letters)), rng.randint(0, min(3, len(letters)))):
            letters[i] = rng.choice("abcdefgh")
        group.append("".join(letters))
    return group


def test_targets_earn_the_small_components_maxima_and_every_value_is_in_range() -> None:
    train, held = make_scales_examples(200, 50, seed=2)
    assert not {e.prompt[0]["content"] for e in held} & {e.prompt[0]["content"] for e in train}
    rng = random.Random(0)
    for example in (*train, *held):
        best = score_reversal(example.completion, example.ground_truth)
        assert (best["match_reward"], best["prefix_reward"]) == pytest.approx((0.9, 0.9))
        assert best["exact_match"] == 1.0
        for answer in [
            "",
            "zzzzzzzzzz",
            example.ground_truth[:2],
            *_near_misses(example.ground_truth, rng, 3),
        ]:
            row = score_reversal(answer, example.ground_truth)
            for name in (*COMPONENTS, "exact_match"):
                low, high = RANGES[name]
                assert low <= row[name] <= high + 1e-12
            assert row["score"] == pytest.approx(sum(row[c] for c in COMPONENTS))


def test_the_reward_is_a_pure_function_of_the_answer_and_the_judge_noise_varies() -> None:
    first = score_reversal("abcd", "abce")
    assert score_reversal("abcd", "abce") == first
    judged = {score_reversal(a, "abce")["judge_reward"] for a in ("abcd", "abcf", "abcg", "abch", "abca")}
    assert len(judged) == 5  # same small components, different noise


def test_trl_functions_score_chat_completions_per_component() -> None:
    functions = scales_reward_functions()
    assert [f.__name__ for f in functions] == list(COMPONENTS)
    completions = [[{"role": "assistant", "content": "dcba"}], [{"role": "assistant", "content": "dcbb"}]]
    rows = [f(completions, ground_truth=["dcba", "dcba"]) for f in functions]
    assert rows[0] == pytest.approx([0.9, 0.1 + 0.8 * 0.75])
    assert rows[1] == pytest.approx([0.9, 0.1 + 0.8 * 0.75])


def test_groups_look_like_figure_2_the_large_noisy_component_dominates_the_covariance_sum() -> None:
    rng = random.Random(1)
    train, _ = make_scales_examples(300, 1, seed=0)
    shares, small, cross = [], [], []
    for example in train:
        group = [score_reversal(a, example.ground_truth) for a in _near_misses(example.ground_truth, rng, 8)]
        columns = [[row[c] for row in group] for c in COMPONENTS]
        if min(statistics.pvariance(c) for c in columns) == 0:
            continue
        total = [sum(values) for values in zip(*columns, strict=True)]
        shares.append(statistics.variance(columns[2]) / statistics.variance(total))
        small.append(statistics.correlation(columns[0], columns[1]))
        cross.append(statistics.correlation(columns[0], columns[2]))
    assert len(shares) > 100
    assert statistics.mean(shares) > 0.85  # Figure 2: 91% of the covariance sum is r3's variance
    assert statistics.mean(small) > 0.6  # r1 and r2 move together (0.98 in Figure 2)
    assert abs(statistics.mean(cross)) < 0.3  # r3 is only weakly tied to them (0.11 in Figure 2)
