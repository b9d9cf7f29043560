"""CorrGRPOConfig validation, CLI parsing, and the construction-time TRL compatibility check."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest
import trl
from trl import GRPOConfig, GRPOTrainer, TrlParser

import corrgrpo_core as cc
from corrgrpo_adapters import RANGES
from corrgrpo_adapters.trl import (
    CorrGRPOConfig,
    CorrGRPOTrainer,
    UnsupportedTRLError,
    check_trl_compatibility,
)
from corrgrpo_adapters.trl._config import advantage_plan

CPU = {"output_dir": "unused", "bf16": False, "use_cpu": True, "report_to": "none"}


def test_defaults_pass_only_the_nan_policy() -> None:
    args = CorrGRPOConfig(**CPU)
    assert args.advantage_estimator == "corrgrpo"
    assert args.advantage_options() == {"nan_policy": "ignore"}
    assert args.advantage_plan().options == {"nan_policy": "ignore"}


def test_named_fields_and_kwargs_become_core_options() -> None:
    args = CorrGRPOConfig(
        **CPU,
        advantage_estimator="dara",
        advantage_eps=1e-4,
        advantage_min_correlation_sum=0.1,
        advantage_kwargs='{"variant": "sym"}',
    )
    assert args.advantage_options() == {
        "eps": 1e-4,
        "min_correlation_sum": 0.1,
        "nan_policy": "ignore",
        "variant": "sym",
    }


def test_cli_parsing() -> None:
    (args,) = TrlParser((CorrGRPOConfig,)).parse_args_into_dataclasses(
        [
            "--output_dir",
            "x",
            "--bf16",
            "false",
            "--use_cpu",
            "true",
            "--report_to",
            "none",
            "--advantage_estimator",
            "gdpo_corr",
            "--advantage_eps_placement",
            "outside",
            "--advantage_kwargs",
            json.dumps({"group_eps_placement": "inside"}),
        ]
    )
    assert args.advantage_options() == {
        "eps_placement": "outside",
        "nan_policy": "ignore",
        "group_eps_placement": "inside",
    }


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"advantage_estimator": "corr_grpo"}, "unknown estimator 'corr_grpo'; known: corrgrpo"),
        (
            {"advantage_estimator": "dr_grpo", "advantage_eps": 1e-4},
            "advantage_eps is set, but estimator 'dr_grpo'",
        ),
        ({"advantage_kwargs": {"weights": [1, 2]}}, "set reward_weights instead"),
        (
            {"advantage_kwargs": {"eps_placement": "x"}, "advantage_eps_placement": "inside"},
            "its own config field",
        ),
        ({"advantage_kwargs": {"varaint": "sym"}, "advantage_estimator": "dara"}, "takes no such option"),
        (
            {"advantage_kwargs": {"std_scope": "batch"}, "advantage_estimator": "grpo"},
            "set scale_rewards='batch'",
        ),
    ],
)
def test_bad_configs_are_named(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorrGRPOConfig(**CPU, **kwargs)


def test_every_core_estimator_is_selectable() -> None:
    for name in cc.estimator_names():
        plan = CorrGRPOConfig(**CPU, advantage_estimator=name).advantage_plan()
        assert plan.estimator == name
        # TRL's eps for TRL's two estimators (so "grpo" and "gdpo" reproduce TRL), the core's elsewhere
        assert plan.options == {"nan_policy": "ignore", **({"eps": 1e-4} if name in ("grpo", "gdpo") else {})}


# (advantage_estimator, scale_rewards, multi_objective_aggregation) -> core estimator, extra option, TRL's names
MAPPED = [
    ("grpo", "group", "sum_then_normalize", "grpo", {}, ("group", "sum_then_normalize")),
    ("grpo", True, "sum_then_normalize", "grpo", {}, ("group", "sum_then_normalize")),
    ("grpo", "batch", "sum_then_normalize", "grpo", {"std_scope": "batch"}, ("batch", "sum_then_normalize")),
    ("grpo", "none", "sum_then_normalize", "dr_grpo", {}, ("none", "sum_then_normalize")),
    ("grpo", False, "sum_then_normalize", "dr_grpo", {}, ("none", "sum_then_normalize")),
    ("corrgrpo", "none", "sum_then_normalize", "dr_grpo", {}, ("none", "sum_then_normalize")),
    ("dr_grpo", "none", "sum_then_normalize", "dr_grpo", {}, ("none", "sum_then_normalize")),
    ("dr_grpo", "group", "sum_then_normalize", "dr_grpo", {}, ("none", "sum_then_normalize")),
    ("rloo", "none", "sum_then_normalize", "rloo", {}, (None, None)),
    ("gdpo", "group", "normalize_then_sum", "gdpo", {}, ("group", "normalize_then_sum")),
    ("gdpo", "none", "normalize_then_sum", "gdpo", {}, ("none", "normalize_then_sum")),  # TRL ignores it too
    ("gdpo", "group", "sum_then_normalize", "gdpo", {}, ("group", "normalize_then_sum")),
    (
        "gdpo",
        "batch",
        "sum_then_normalize",
        "gdpo",
        {},
        ("batch", "normalize_then_sum"),
    ),  # TRL's GDPO ignores it
    ("corrgrpo", "group", "sum_then_normalize", "corrgrpo", {}, (None, None)),
    ("mo_grpo", "group", "sum_then_normalize", "mo_grpo", {}, (None, None)),
]


@pytest.mark.parametrize(("name", "scale", "aggregation", "core", "extra", "trl_names"), MAPPED)
def test_trl_switches_map_onto_the_estimator(
    name: str, scale: Any, aggregation: str, core: str, extra: dict[str, Any], trl_names: tuple[Any, Any]
) -> None:
    plan = CorrGRPOConfig(
        **CPU, advantage_estimator=name, scale_rewards=scale, multi_objective_aggregation=aggregation
    ).advantage_plan()
    assert plan.estimator == core
    assert {k: plan.options[k] for k in extra} == extra
    assert (plan.scale_rewards, plan.multi_objective_aggregation) == trl_names


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"multi_objective_aggregation": "normalize_then_sum"},
            ("conflicts with advantage_estimator='corrgrpo'; set advantage_estimator='gdpo'"),
        ),
        (
            {"advantage_estimator": "grpo", "multi_objective_aggregation": "normalize_then_sum"},
            "set advantage_estimator='gdpo'",
        ),
        (
            {"scale_rewards": "batch"},
            (
                "conflicts with advantage_estimator='corrgrpo'; for TRL's batch scaling set "
                "advantage_estimator='grpo'"
            ),
        ),
        ({"advantage_estimator": "dr_grpo", "scale_rewards": "batch"}, "set advantage_estimator='grpo'"),
        ({"advantage_estimator": "mo_grpo", "scale_rewards": "none"}, "set advantage_estimator='dr_grpo'"),
        ({"advantage_estimator": "gdpo_corr", "scale_rewards": False}, "set advantage_estimator='dr_grpo'"),
        (
            {"scale_rewards": "none", "advantage_eps": 1e-4},
            "estimator 'dr_grpo' takes no 'eps'.*scale_rewards='none' turns advantage_estimator='corrgrpo' into 'dr_grpo'",
        ),
    ],
)
def test_conflicting_trl_switches_name_the_equivalent(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorrGRPOConfig(**CPU, **kwargs)


@pytest.mark.parametrize(
    ("scale", "aggregation", "core", "extra"),
    [
        ("group", "sum_then_normalize", "grpo", {"eps": 1e-4}),
        (True, "sum_then_normalize", "grpo", {"eps": 1e-4}),
        ("batch", "sum_then_normalize", "grpo", {"eps": 1e-4, "std_scope": "batch"}),
        ("none", "sum_then_normalize", "dr_grpo", {}),
        (False, "sum_then_normalize", "dr_grpo", {}),
        ("group", "normalize_then_sum", "gdpo", {"eps": 1e-4}),
        ("batch", "normalize_then_sum", "gdpo", {"eps": 1e-4}),
    ],
)
def test_trl_grpo_config_maps_onto_the_core(
    scale: Any, aggregation: str, core: str, extra: dict[str, Any]
) -> None:
    plan = advantage_plan(GRPOConfig(**CPU, scale_rewards=scale, multi_objective_aggregation=aggregation))
    assert plan.estimator == core
    assert dict(plan.options) == {"nan_policy": "ignore", **extra}
    assert plan.multi_objective_aggregation == aggregation


def test_bad_option_values_fail_at_construction(trainer_factory: Any) -> None:
    with pytest.raises(ValueError, match="eps_placement"):
        trainer_factory(advantage_eps_placement="middle")
    with pytest.raises(ValueError, match="min_correlation_sum"):
        trainer_factory(advantage_min_correlation_sum=-1.0)


def test_other_args_are_refused(tiny_model: str) -> None:
    from transformers import TrainingArguments

    with pytest.raises(TypeError, match=r"GRPOConfig\(...\) or CorrGRPOConfig"):
        CorrGRPOTrainer(model=tiny_model, reward_funcs=[len], args=TrainingArguments(**CPU))


def test_installed_trl_is_compatible() -> None:
    check_trl_compatibility()


def test_changed_hook_signature_is_reported(monkeypatch: pytest.MonkeyPatch, tiny_model: str) -> None:
    def renamed(self: Any, inputs: Any, prompts: Any, completions: Any) -> Any:
        raise AssertionError("never called")

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", renamed)
    with pytest.raises(UnsupportedTRLError) as info:
        CorrGRPOTrainer(model=tiny_model, reward_funcs=[len], args=CorrGRPOConfig(**CPU))
    message = str(info.value)
    assert f"supports {RANGES['trl'].describe()}" in message
    assert "_calculate_rewards(self, inputs, prompts, completions)" in message
    assert f"installed trl {trl.__version__}" in message


def test_missing_hook_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(GRPOTrainer, "_generate_and_score_completions")
    with pytest.raises(UnsupportedTRLError, match=r"GRPOTrainer\._generate_and_score_completions is missing"):
        check_trl_compatibility()


@pytest.mark.parametrize("outside", ["1.17.0", "1.17.0.dev0", "2.0.0", "1.3.9", "0.29.1"])
def test_a_version_outside_the_range_with_matching_hooks_warns_naming_it(
    monkeypatch: pytest.MonkeyPatch, outside: str
) -> None:
    monkeypatch.setattr(trl, "__version__", outside)
    with pytest.warns(UserWarning, match=re.escape(f"supports {RANGES['trl'].requirement}")) as record:
        check_trl_compatibility()
    assert f"trl {outside} is outside that range" in str(record[0].message)


@pytest.mark.parametrize("inside", [RANGES["trl"].oldest, RANGES["trl"].newest, "1.16.1", "1.9.2"])
def test_a_version_inside_the_range_is_silent(monkeypatch: pytest.MonkeyPatch, inside: str) -> None:
    monkeypatch.setattr(trl, "__version__", inside)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_trl_compatibility()


def test_a_registered_estimator_gets_its_declared_facts_in_trl() -> None:
    """An estimator registered once with the core is used by TRL's adapter as its spec declares:
    its unnormalised form under scale_rewards='none', its diagnostic options, its config options."""
    from corrgrpo_core import _registry

    def half_grpo(scores: Any, group_ids: Any = None, *, eps: float = 1e-6, nan_policy: str = "raise") -> Any:
        return 0.5 * cc.grpo_advantage(scores, group_ids, eps=eps, nan_policy=nan_policy)

    cc.register_estimator(
        "half_grpo",
        half_grpo,
        "half GRPO",
        scope="group",
        numerator="total",
        centred=True,
        unnormalised="dr_grpo",
    )
    try:
        plan = CorrGRPOConfig(**CPU, advantage_estimator="half_grpo", advantage_eps=1e-4).advantage_plan()
        assert plan.estimator == "half_grpo"
        assert plan.options == {"eps": 1e-4, "nan_policy": "ignore"}
        assert plan.diagnostic_options() == {"nan_policy": "ignore"}  # eps is not shared with the diagnostics
        unscaled = CorrGRPOConfig(
            **CPU, advantage_estimator="half_grpo", scale_rewards="none"
        ).advantage_plan()
        assert (unscaled.estimator, unscaled.scale_rewards) == ("dr_grpo", "none")
        with pytest.raises(ValueError, match=r"takes no such option \(its options: eps, nan_policy\)"):
            CorrGRPOConfig(**CPU, advantage_estimator="half_grpo", advantage_kwargs={"ddof": 0})
    finally:
        del _registry._REGISTRY["half_grpo"]
    from corrgrpo_core.objectives import filter_criterion_for

    with pytest.raises(ValueError, match="unknown estimator 'half_grpo'"):
        filter_criterion_for("half_grpo")
