"""Real GRPOTrainer training on CPU with advantages from the core."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch
import trl_fixtures
from transformers import TrainerCallback
from trl import GRPOConfig

import corrgrpo_core as cc
from corrgrpo_adapters.trl import CorrGRPOConfig

COMPONENTS = [f.__name__ for f in trl_fixtures.REWARD_FUNCS]
DIAGNOSTICS = [
    "corrgrpo/c_q/mean",
    "corrgrpo/correlation_sum/mean",
    "corrgrpo/degenerate_groups",
    "corrgrpo/zero_signal_groups",
    "corrgrpo/degenerate/max_abs_advantage",
    "corrgrpo/degenerate/c_q_max",
    "corrgrpo/max_abs_advantage",
    *(f"corrgrpo/denominator_share/{n}" for n in COMPONENTS),
    *(f"corrgrpo/advantage_contribution/{n}" for n in COMPONENTS),
]


class LogCapture(TrainerCallback):
    """What TRL hands to its reporters (wandb, tensorboard, ...): every on_log call's dict."""

    def __init__(self) -> None:
        self.logs: list[dict[str, float]] = []

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **_: Any
    ) -> None:
        self.logs.append(dict(logs or {}))


def train_and_check(trainer: trl_fixtures.RecordingTrainer, *, steps: int) -> None:
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == steps
    assert trl_fixtures.check_core_advantages_used(trainer) >= 1
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "no parameter changed in training"


@pytest.mark.parametrize(
    ("estimator", "loss_type"),
    [
        ("corrgrpo", "dapo"),
        ("corrgrpo", "grpo"),
        ("corrgrpo", "dr_grpo"),
        ("corrgrpo", "cispo"),
        ("gdpo_corr", "dapo"),
        ("dara", "dapo"),
        ("mo_grpo", "grpo"),
        ("rloo", "dr_grpo"),
        ("dr_grpo", "cispo"),
    ],
)
def test_training_uses_core_advantages_and_logs_diagnostics(
    trainer_factory: Any, estimator: str, loss_type: str
) -> None:
    logs = LogCapture()
    extra: dict[str, Any] = {"epsilon_high": 5.0} if loss_type == "cispo" else {}
    if loss_type == "grpo":
        extra["beta"] = 0.04  # a KL term: TRL loads a reference model from the saved tiny model's path
    trainer = trainer_factory(advantage_estimator=estimator, loss_type=loss_type, callbacks=[logs], **extra)
    train_and_check(trainer, steps=3)
    step_logs = [entry for entry in logs.logs if "loss" in entry]
    assert len(step_logs) == 3
    assert all(("kl" in entry) == ("beta" in extra) for entry in step_logs)
    for entry in step_logs:
        missing = [k for k in DIAGNOSTICS if k not in entry]
        assert not missing, f"diagnostics missing from the reported logs: {missing}"
        shares = [entry[f"corrgrpo/denominator_share/{n}"] for n in COMPONENTS]
        assert all(s >= 0.0 for s in shares)  # above 1 when components are anti-correlated
        assert entry["corrgrpo/groups"] == 2.0


def sometimes_missing(completions: list[str], **_: Any) -> list[float | None]:
    """A fourth reward that returns None for some completions (TRL's "not applicable")."""
    return [None if len(c) % 3 == 0 else float(c.count("1")) for c in completions]


def all_missing_for_odd(fn: Any) -> Any:
    """``fn``, returning None where the answer is odd, so that some completions have no reward at all."""

    def wrapped(completions: list[str], answer: list[str], **kw: Any) -> list[float | None]:
        values = fn(completions=completions, answer=answer, **kw)
        return [None if int(a) % 2 else v for v, a in zip(values, answer, strict=True)]

    wrapped.__name__ = fn.__name__
    return wrapped


MATRIX_FUNCS = [
    trl_fixtures.length_bonus,
    all_missing_for_odd(trl_fixtures.vowel_count),
    all_missing_for_odd(trl_fixtures.answer_digit),
    all_missing_for_odd(sometimes_missing),
]

# TRL's option matrix: (config class, estimator, scale_rewards, multi_objective_aggregation, TRL's names)
TRL_MATRIX = [
    *[
        (GRPOConfig, None, scale, agg, ({True: "group", False: "none"}.get(scale, scale), agg))
        for scale, agg in [
            ("group", "sum_then_normalize"),
            (True, "sum_then_normalize"),
            ("batch", "sum_then_normalize"),
            ("none", "sum_then_normalize"),
            (False, "sum_then_normalize"),
            ("group", "normalize_then_sum"),
            ("none", "normalize_then_sum"),
        ]
    ],
    (CorrGRPOConfig, "grpo", "group", "sum_then_normalize", ("group", "sum_then_normalize")),
    (CorrGRPOConfig, "grpo", "batch", "sum_then_normalize", ("batch", "sum_then_normalize")),
    (CorrGRPOConfig, "grpo", False, "sum_then_normalize", ("none", "sum_then_normalize")),
    (CorrGRPOConfig, "dr_grpo", "group", "sum_then_normalize", ("none", "sum_then_normalize")),
    (CorrGRPOConfig, "gdpo", "group", "sum_then_normalize", ("group", "normalize_then_sum")),
    (CorrGRPOConfig, "gdpo", "batch", "normalize_then_sum", ("batch", "normalize_then_sum")),
]


@pytest.mark.parametrize(
    ("config_cls", "estimator", "scale", "aggregation", "names"),
    TRL_MATRIX,
    ids=[f"{c.__name__}-{e}-{s}-{a}" for c, e, s, a, _ in TRL_MATRIX],
)
def test_trl_options_reproduce_trl_own_advantages(
    trainer_factory: Any,
    config_cls: type,
    estimator: str | None,
    scale: Any,
    aggregation: str,
    names: tuple[str, str],
) -> None:
    # TRL's own advantage block runs inside the same step on the same gathered rewards (the recording
    # trainer keeps what it returned): ours must equal it, whatever TRL option selected it.
    logs = LogCapture()
    extra = {} if estimator is None else {"advantage_estimator": estimator}
    trainer = trainer_factory(
        config_cls=config_cls,
        scale_rewards=scale,
        multi_objective_aggregation=aggregation,
        reward_funcs=MATRIX_FUNCS,
        max_steps=2,
        callbacks=[logs],
        **extra,
    )
    assert (trainer.scale_rewards, trainer.multi_objective_aggregation) == names
    train_and_check(trainer, steps=2)
    assert (trainer.scale_rewards, trainer.multi_objective_aggregation) == names
    for rewards, ours, theirs in zip(
        trainer.record["rewards"], trainer.record["advantages"], trainer.record["trl_advantages"], strict=True
    ):
        assert ours.abs().max() > 0.1
        assert torch.isnan(rewards).any()  # missing rewards exercised
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    # TRL's mixed zero-std column is gone; the one zero-signal metric is there for every TRL option
    step_logs = [entry for entry in logs.logs if "loss" in entry]
    assert step_logs
    assert all("frac_reward_zero_std" not in e and "corrgrpo/zero_signal_groups" in e for e in step_logs)


@pytest.mark.parametrize("estimator", ["corrgrpo", "mo_grpo", "rloo", "gdpo", "grpo"])
def test_attributes_and_zero_signal_metric_describe_the_advantages_used(
    trainer_factory: Any, estimator: str
) -> None:
    logs = LogCapture()
    trainer = trainer_factory(advantage_estimator=estimator, max_steps=3, callbacks=[logs])
    assert trainer.advantage_estimator == estimator
    if estimator not in ("gdpo", "grpo"):  # TRL has no name for these: its switches do not pretend to
        assert trainer.scale_rewards is None
        assert trainer.multi_objective_aggregation is None
    train_and_check(trainer, steps=3)
    step_logs = [entry for entry in logs.logs if "loss" in entry]
    assert len(step_logs) == len(trainer.record["advantages"]) == 3
    for entry, rewards, adv in zip(
        step_logs, trainer.record["rewards"], trainer.record["advantages"], strict=True
    ):
        # the share of groups where no reward varies, the same computation for every estimator
        groups = rewards.reshape(-1, 4, rewards.shape[-1])
        no_signal = (groups.amax(dim=1) == groups.amin(dim=1)).all(dim=-1)
        assert "frac_reward_zero_std" not in entry
        assert entry["corrgrpo/zero_signal_groups"] == pytest.approx(no_signal.float().mean().item())
        assert (adv.reshape(-1, 4)[no_signal] == 0).all()  # no estimator gives those groups a signal


def test_the_zero_signal_metric_stays_with_the_diagnostics_off(trainer_factory: Any) -> None:
    logs = LogCapture()
    trainer = trainer_factory(log_advantage_diagnostics=False, max_steps=1, callbacks=[logs])
    train_and_check(trainer, steps=1)
    step_logs = [entry for entry in logs.logs if "loss" in entry]
    assert [sorted(k for k in e if k.startswith("corrgrpo/")) for e in step_logs] == [
        ["corrgrpo/zero_signal_groups"]
    ]


def test_diagnostics_use_the_options_of_the_advantages(trainer_factory: Any) -> None:
    # With a floor on the correlation sum, the logged c_q is the floored one the advantages used.
    floor = 50.0
    trainer = trainer_factory(
        advantage_estimator="corrgrpo", advantage_min_correlation_sum=floor, max_steps=2
    )
    train_and_check(trainer, steps=2)
    rewards = trainer.record["rewards"][0]
    options = trainer.advantage_plan.diagnostic_options()
    assert options["min_correlation_sum"] == floor
    stats = cc.advantage_stats(rewards.double().reshape(-1, 4, rewards.shape[1]), **options)
    grpo = cc.grpo_advantage(
        rewards.double().reshape(-1, 4, rewards.shape[1]), eps_placement="inside", nan_policy="ignore"
    ).reshape(-1)
    ours = trainer.record["advantages"][0].double()
    # A_corr = c_q * A_grpo, with the floored c_q the logs report
    torch.testing.assert_close(ours, stats.c_q.reshape(-1) * grpo, rtol=1e-4, atol=1e-5)
    logged = [e["corrgrpo/c_q/max"] for e in trainer.state.log_history if "corrgrpo/c_q/max" in e]
    assert logged[0] <= (1.0 / floor) ** 0.5 * float(stats.covariance_sum.max()) ** 0.5 + 1e-6


def test_num_iterations_gradient_accumulation_and_eval(trainer_factory: Any) -> None:
    eval_rows = trl_fixtures.dataset(8)
    trainer = trainer_factory(
        num_iterations=2,
        gradient_accumulation_steps=2,
        per_device_train_batch_size=4,
        max_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        per_device_eval_batch_size=4,
        num_generations_eval=2,
        eval_dataset=eval_rows,
    )
    train_and_check(trainer, steps=2)
    modes = trainer.record["mode"]
    assert modes.count("train") == 1  # 2 steps x 2 micro-steps = one generation reused twice
    assert modes.count("eval") == 4  # 8 eval prompts x 2 generations, in batches of 4 completions
    assert any(k.startswith("eval_corrgrpo/c_q") for entry in trainer.state.log_history for k in entry)


def test_rows_without_any_reward_get_zero_advantage(trainer_factory: Any) -> None:
    def sometimes(completions: list[str], **_: Any) -> list[float | None]:
        return [None if len(c) % 2 else 1.0 for c in completions]  # missing for some scored rows too

    # every function returns None for the prompts whose answer is odd
    funcs = [all_missing_for_odd(f) for f in [*trl_fixtures.REWARD_FUNCS, sometimes]]
    trainer = trainer_factory(reward_funcs=funcs, max_steps=2)
    train_and_check(trainer, steps=2)
    saw_unscored = saw_partial = False
    for rewards, adv in zip(trainer.record["rewards"], trainer.record["advantages"], strict=True):
        unscorable = torch.isnan(rewards).all(dim=1)
        saw_unscored |= bool(unscorable.any())
        saw_partial |= bool((torch.isnan(rewards).any(dim=1) & ~unscorable).any())
        assert (adv[unscorable] == 0).all()
        assert (adv[~unscorable] != 0).any()
    assert saw_unscored
    assert saw_partial


def test_estimator_runs_on_the_dense_and_ragged_paths_alike() -> None:
    from corrgrpo_adapters.trl import group_advantages

    figure2 = torch.tensor([[0.1, 0.18, 0.8], [0.18, 0.1, 7.28], [0.82, 0.9, 8], [0.9, 0.82, 1.52]])
    rewards = torch.cat([figure2, figure2[[2, 0, 3, 1]] * 2.0])
    adv = group_advantages(rewards, 4, estimator="corrgrpo")
    torch.testing.assert_close(adv[:4], torch.tensor([-1.8607, 0.9304, 1.8607, -0.9304]), atol=1e-4, rtol=0)
    ragged = cc.compute_advantages(rewards, torch.arange(8) // 4, estimator="corrgrpo")
    torch.testing.assert_close(adv, ragged)
    with pytest.raises(ValueError, match="num_generations=3"):
        group_advantages(rewards, 3)


def test_quickstart_example_trains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).resolve().parents[3] / "examples" / "trl_quickstart.py"
    spec = importlib.util.spec_from_file_location("trl_quickstart", path)
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(["--steps", "2", "--output-dir", str(tmp_path)])
    assert "corrgrpo/c_q/mean" in capsys.readouterr().out
