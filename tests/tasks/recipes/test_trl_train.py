"""The TRL recipe runs two real GRPO steps on CPU: tiny random model, real tool-calling reward, fixture data.

Needs trl (listed in ci/envs/trl/recipes.args).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corrgrpo_tasks.recipes import build_recipe
from corrgrpo_tasks.recipes.__main__ import main
from corrgrpo_tasks.recipes.trl_train import _adapter_classes, build_trainer, resolve_trainer
from corrgrpo_tasks.tool_calling import COMPONENTS, RANGES

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)


TINY = (
    "val_files=",
    "train_batch_size=2",
    "group_size=4",
    "mini_batch_size=2",
    "per_device_batch_size=4",
    "max_steps=2",
    "max_response_length=2",
    "use_vllm=false",
    "bf16=false",
    "gradient_checkpointing=false",
    "test_freq=0",
    "save_freq=1000",
    "lr=1e-3",
)


def tiny_recipe(estimator: str, model: Path, data: Path, out: Path, generation: str):  # type: ignore[no-untyped-def]
    """The paper's tool-calling recipe shrunk to 2 prompts x 4 rollouts, 2 tokens, 2 steps, CPU."""
    return build_recipe(
        "tool_calling",
        "trl",
        estimator=estimator,
        overrides=[f"model={model}", f"train_files={data}", f"output_dir={out}", *TINY],
        extra=["use_cpu=true", generation],
    )


ESTIMATORS = ["grpo", "gdpo", "corrgrpo"]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_two_real_training_steps_with_the_tool_calling_reward(
    estimator: str,
    tiny_model_dir: Path,
    tool_parquet: Path,
    tmp_path: Path,
    piece_generation: str,
    train_two_steps: Any,
) -> None:
    if estimator not in ("grpo", "gdpo") and _adapter_classes() is None:
        pytest.skip("corrgrpo needs corrgrpo_adapters.trl, which is not installed here")
    recipe = tiny_recipe(estimator, tiny_model_dir, tool_parquet, tmp_path / "out", piece_generation)
    assert recipe.config["grpo_config"]["gradient_accumulation_steps"] == 2
    logged = train_two_steps(build_trainer(recipe.config))
    for entry in logged:
        for component in COMPONENTS:
            low, high = RANGES[component]
            assert low <= entry[f"rewards/{component}/mean"] <= high
    # The sampled completions differ in reward, so the steps move the policy.
    assert any(
        entry["corrgrpo/zero_signal_groups"] < 1.0 for entry in logged
    )  # the adapter's one zero-signal metric
    assert any(entry["grad_norm"] > 0.0 for entry in logged)


def test_the_cli_launches_the_training_command(
    tiny_model_dir: Path,
    tool_parquet: Path,
    tmp_path: Path,
    piece_generation: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recipe = tiny_recipe("grpo", tiny_model_dir, tool_parquet, tmp_path / "out", piece_generation)
    for name, value in (("HF_HUB_OFFLINE", "1"), ("OMP_NUM_THREADS", "1"), ("PYTHONWARNINGS", "ignore")):
        monkeypatch.setenv(name, value)
    hparams = [f"{k}={v}" for k, v in (("model", tiny_model_dir), ("train_files", tool_parquet))]
    overrides = [o for o in TINY if not o.startswith(("model=", "train_files=", "output_dir="))]
    code = main(
        [
            "tool_calling",
            "trl",
            "--estimator",
            "grpo",
            *hparams,
            *overrides,
            f"output_dir={tmp_path / 'out'}",
            "--",
            "use_cpu=true",
            piece_generation,
        ]
    )
    assert code == 0
    assert (tmp_path / "out" / "tool_calling-grpo" / "model.safetensors").is_file()
    assert recipe.argv[2] == "corrgrpo_tasks.recipes.trl_train"


def test_plain_trl_needs_the_adapter_for_other_estimators() -> None:
    with pytest.raises(RuntimeError, match=r"corrgrpo_adapters\.trl"):
        resolve_trainer("rloo", use_adapter=False)
    trainer_cls, _, selection = resolve_trainer("gdpo", use_adapter=False)
    assert trainer_cls.__name__ == "GRPOTrainer"
    assert selection == {"multi_objective_aggregation": "normalize_then_sum"}
