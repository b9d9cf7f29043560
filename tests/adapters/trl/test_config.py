"""CorrGRPOConfig validation, CLI parsing, and the construction-time TRL compatibility check."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trl
from trl import GRPOConfig, GRPOTrainer, TrlParser

import corrgrpo_core as cc
from corrgrpo_adapters.trl import (
    CorrGRPOConfig,
    CorrGRPOTrainer,
    UnsupportedTRLError,
    check_trl_compatibility,
)

CPU = {"output_dir": "unused", "bf16": False, "use_cpu": True, "report_to": "none"}


def test_defaults_pass_only_the_nan_policy() -> None:
    args = CorrGRPOConfig(**CPU)
    assert args.advantage_estimator == "corrgrpo"
    assert args.advantage_options() == {"nan_policy": "ignore"}


def test_named_fields_and_kwargs_become_core_options() -> None:
    args = CorrGRPOConfig(**CPU, advantage_estimator="dara", advantage_eps=1e-4,
                          advantage_min_correlation_sum=0.1, advantage_kwargs='{"variant": "sym"}')
    assert args.advantage_options() == {"eps": 1e-4, "min_correlation_sum": 0.1, "nan_policy": "ignore",
                                        "variant": "sym"}


def test_cli_parsing() -> None:
    (args,) = TrlParser((CorrGRPOConfig,)).parse_args_into_dataclasses(
        ["--output_dir", "x", "--bf16", "false", "--use_cpu", "true", "--report_to", "none",
         "--advantage_estimator", "gdpo_corr", "--advantage_eps_placement", "outside",
         "--advantage_kwargs", json.dumps({"group_eps_placement": "inside"})])
    assert args.advantage_options() == {"eps_placement": "outside", "nan_policy": "ignore",
                                        "group_eps_placement": "inside"}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"advantage_estimator": "corr_grpo"}, "unknown estimator 'corr_grpo'; known: corrgrpo"),
    ({"advantage_estimator": "dr_grpo", "advantage_eps": 1e-4}, "advantage_eps is set, but estimator 'dr_grpo'"),
    ({"advantage_kwargs": {"weights": [1, 2]}}, "set reward_weights instead"),
    ({"advantage_kwargs": {"eps_placement": "x"}, "advantage_eps_placement": "inside"}, "its own config field"),
    ({"advantage_kwargs": {"varaint": "sym"}, "advantage_estimator": "dara"}, "takes no such option"),
    ({"scale_rewards": "none"}, "advantage_estimator='dr_grpo'"),
    ({"scale_rewards": "batch"}, "leave it at 'group'"),
    ({"multi_objective_aggregation": "normalize_then_sum"}, "advantage_estimator='gdpo'"),
])
def test_bad_configs_are_named(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorrGRPOConfig(**CPU, **kwargs)


def test_every_core_estimator_is_selectable() -> None:
    for name in cc.estimator_names():
        assert CorrGRPOConfig(**CPU, advantage_estimator=name).advantage_options() == {"nan_policy": "ignore"}


def test_bad_option_values_fail_at_construction(trainer_factory: Any) -> None:
    with pytest.raises(ValueError, match="eps_placement"):
        trainer_factory(advantage_eps_placement="middle")
    with pytest.raises(ValueError, match="min_correlation_sum"):
        trainer_factory(advantage_min_correlation_sum=-1.0)


def test_plain_grpo_config_is_refused(tiny_model: str) -> None:
    with pytest.raises(TypeError, match="CorrGRPOConfig"):
        CorrGRPOTrainer(model=tiny_model, reward_funcs=[len], args=GRPOConfig(**CPU))


def test_installed_trl_is_compatible() -> None:
    check_trl_compatibility()


def test_changed_hook_signature_is_reported(monkeypatch: pytest.MonkeyPatch, tiny_model: str) -> None:
    def renamed(self: Any, inputs: Any, prompts: Any, completions: Any) -> Any:
        raise AssertionError("never called")

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", renamed)
    with pytest.raises(UnsupportedTRLError) as info:
        CorrGRPOTrainer(model=tiny_model, reward_funcs=[len], args=CorrGRPOConfig(**CPU))
    message = str(info.value)
    assert "trl>=1.16,<1.17" in message
    assert "tested with trl==1.16.0" in message
    assert "_calculate_rewards(self, inputs, prompts, completions)" in message
    assert f"installed trl {trl.__version__}" in message


def test_missing_hook_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(GRPOTrainer, "_generate_and_score_completions")
    with pytest.raises(UnsupportedTRLError, match=r"GRPOTrainer\._generate_and_score_completions is missing"):
        check_trl_compatibility()


def test_untested_version_with_matching_hooks_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    with pytest.warns(UserWarning, match="untested"):
        check_trl_compatibility()
