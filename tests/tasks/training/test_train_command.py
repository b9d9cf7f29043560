"""``corrgrpo train`` end to end in seconds: a tiny warm start, two real GRPO steps per estimator through
TRL and the project's adapter, the RLLA reward, the outputs. Needs trl (ci/envs/trl/training.args)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

from corrgrpo_core.cli import main
from corrgrpo_tasks.tool_calling import COMPONENTS, RANGES
from corrgrpo_tasks.training._tasks import get_task

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)

WEIGHTS = get_task("tool_calling").weights
TINY = (
    "--steps",
    "2",
    "--eval-every",
    "1",
    "--eval-size",
    "4",
    "--train-size",
    "40",
    "--warm-steps",
    "3",
    "--hidden-size",
    "32",
    "--layers",
    "1",
    "--prompts-per-step",
    "2",
    "--generations",
    "4",
    "--no-progress",
)


@pytest.fixture
def train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str, Path]]:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run(*argv: str) -> tuple[int, str, str, Path]:
        out = tmp_path / "out"
        code = main(["train", *TINY, "--out", str(out), "--cache-dir", str(tmp_path / "cache"), *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err, out

    return run


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_two_estimators_train_evaluate_and_write_every_output(
    train: Callable[..., tuple[int, str, str, Path]],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    before = (torch.get_num_threads(), hf_logging.get_verbosity())
    code, text, _, out = train("--estimators", "grpo,corrgrpo")
    assert code == 0
    assert (torch.get_num_threads(), hf_logging.get_verbosity()) == before  # library settings restored
    # The chat template and tokenizer pieces keep the prompt's tokens a prefix of prompt + completion.
    assert "not a prefix" not in caplog.text
    for name in ("evals.csv", "steps.csv", "rewards.png", "accuracy.png", "report.md"):
        assert (out / name).stat().st_size > 0
    evals = _rows(out / "evals.csv")
    assert [(r["estimator"], r["step"]) for r in evals] == [
        (e, s) for e in ("grpo", "corrgrpo") for s in ("0", "1", "2")
    ]
    for row in evals:
        for name in (*COMPONENTS, "exact_match"):
            low, high = RANGES[name]
            assert low <= float(row[name]) <= high
    # Step 0 is the shared warm start: identical for both estimators.
    assert evals[0] | {"estimator": ""} == evals[3] | {"estimator": ""}
    steps = _rows(out / "steps.csv")
    assert len(steps) == 4
    for row in steps:
        assert float(row["max_abs_advantage"]) >= 0.0
        assert "rewards/values_reward/mean" in row
        assert "corrgrpo/c_q/mean" in row
    report = (out / "report.md").read_text()
    assert "| corrgrpo |" in report
    assert "Paired differences against grpo" in report
    assert "warm start" in text

    # Every RL completion is logged per run (step, group, components, score) for `corrgrpo explain RUN`.
    rollouts = _rows(out / "rollouts" / "corrgrpo-seed0.csv")
    assert len(rollouts) == 2 * 2 * 4  # steps x prompts x generations
    assert [r["step"] for r in rollouts] == ["1"] * 8 + ["2"] * 8
    assert len({r["group"] for r in rollouts}) == 4
    for row in rollouts:
        total = sum(w * float(row[name]) for name, w in zip(COMPONENTS, WEIGHTS, strict=True))
        assert float(row["score"]) == pytest.approx(total)
    assert main(["explain", str(out / "rollouts" / "corrgrpo-seed0.csv"), "--run-estimator", "corrgrpo"]) == 0
    assert "step" in capsys.readouterr().out


def test_the_warm_start_is_cached_and_reused(train: Callable[..., tuple[int, str, str, Path]]) -> None:
    code, first, _, _ = train("--estimators", "dr_grpo")
    assert code == 0
    assert "supervised steps" in first
    code, second, _, out = train("--estimators", "gdpo")
    assert code == 0
    assert "cached checkpoint" in second
    assert "supervised steps" not in second
    assert {r["estimator"] for r in _rows(out / "evals.csv")} == {"gdpo"}


def test_a_bad_option_value_is_a_one_line_error(train: Callable[..., tuple[int, str, str, Path]]) -> None:
    code, _, err, _ = train("--generations", "1")
    assert code == 2
    assert "num_generations must be >= 2" in err
    assert err.count("\n") == 1


def test_the_code_task_trains_against_the_sandboxed_seven_component_reward(
    train: Callable[..., tuple[int, str, str, Path]], caplog: pytest.LogCaptureFixture
) -> None:
    from corrgrpo_tasks.code import COMPONENTS as CODE_COMPONENTS

    code, _, _, out = train("--task", "code", "--estimators", "corrgrpo", "--eval-size", "2")
    assert code == 0
    assert "not a prefix" not in caplog.text
    evals = _rows(out / "evals.csv")
    assert [r["step"] for r in evals] == ["0", "1", "2"]
    for row in evals:
        for name in (*CODE_COMPONENTS, "passed"):
            assert 0.0 <= float(row[name]) <= 1.0
    steps = _rows(out / "steps.csv")
    assert all(int(float(r["reward_samples"])) == 8 for r in steps)  # 2 prompts x 4 completions, scored once
    assert "Audit of the scored RL samples" in (out / "report.md").read_text()
    assert (out / "audit.json").is_file()


def test_runs_over_different_seeds_merge_into_one_study(
    train: Callable[..., tuple[int, str, str, Path]], tmp_path: Path
) -> None:
    code, _, _, first = train("--estimators", "grpo", "--steps", "1")
    assert code == 0
    second = tmp_path / "second"
    first.rename(second)
    code, _, _, first = train("--estimators", "grpo", "--steps", "1", "--first-seed", "1")
    assert code == 0
    merged = tmp_path / "merged"
    assert main(["train", "--merge", f"{second},{first}", "--out", str(merged), "--no-progress"]) == 0
    assert [(r["seed"], r["step"]) for r in _rows(merged / "evals.csv")] == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]
    assert "mean ± 95% interval over seeds" in (merged / "report.md").read_text()


def test_zero_warm_steps_take_no_supervised_step(
    train: Callable[..., tuple[int, str, str, Path]], tmp_path: Path
) -> None:
    import json

    import torch
    from safetensors.torch import load_file

    from corrgrpo_tasks.training._model import _build_tiny
    from corrgrpo_tasks.training._tasks import TOOL_SYSTEM_PROMPT

    code, text, _, out = train("--estimators", "grpo", "--warm-steps", "0", "--steps", "1")
    assert code == 0
    assert "0 supervised steps" in text
    warm = json.loads((out / "run.json").read_text())["warm"]
    assert warm["sft_steps"] == 0
    assert warm["sft_seconds"] == 0.0
    # The warm start is the random initialisation itself, not one step away from it.
    fresh = tmp_path / "fresh"
    pieces = [*get_task("tool_calling").pieces(), TOOL_SYSTEM_PROMPT]
    _build_tiny(fresh, pieces, hidden_size=32, layers=1, seed=0)
    cached = load_file(Path(warm["checkpoint"]) / "model.safetensors")
    for name, tensor in load_file(fresh / "model.safetensors").items():
        assert torch.equal(cached[name], tensor), name


def test_a_checkpoint_converted_from_gguf_trains_as_it_is(
    train: Callable[..., tuple[int, str, str, Path]], tmp_path: Path, tiny_gguf: Path
) -> None:
    # The layout of the documented SmolLM2 run: GGUF -> convert_gguf -> --model PATH --warm-steps 0.
    import json

    from corrgrpo_tasks.training.convert_gguf import main as convert_main

    model = tmp_path / "model"
    assert convert_main([str(tiny_gguf), "--out", str(model)]) == 0
    before = (model / "model.safetensors").read_bytes()
    code, text, _, out = train(
        "--estimators",
        "corrgrpo",
        "--model",
        str(model),
        "--warm-steps",
        "0",
        "--steps",
        "1",
        "--micro-batch",
        "2",
    )
    assert code == 0
    assert "0 supervised steps" in text
    run = json.loads((out / "run.json").read_text())
    assert run["warm"]["checkpoint"] == str(model.resolve())  # used in place, not copied or trained
    assert (model / "model.safetensors").read_bytes() == before
    assert run["config"]["system_prompt"].startswith("Call one of the listed tools")
    # The completion budget comes from the checkpoint's own tokenizer: byte-level here, so long.
    assert run["config"]["max_completion_length"] > 80
    assert len(_rows(out / "steps.csv")) == 1


def test_the_scales_task_trains_and_the_system_prompt_and_lengths_are_options(
    train: Callable[..., tuple[int, str, str, Path]],
) -> None:
    import json

    code, _, _, out = train(
        "--task",
        "scales",
        "--estimators",
        "gdpo",
        "--system-prompt",
        "",
        "--completion-length",
        "9",
        "--warm-lr",
        "3e-3",
    )
    assert code == 0
    run = json.loads((out / "run.json").read_text())
    assert (run["config"]["system_prompt"], run["config"]["max_completion_length"]) == ("", 9)
    assert run["warm"]["spec"]["warm_lr"] == 3e-3
    steps = _rows(out / "steps.csv")
    assert len(steps) == 2
    assert all(float(r["completions/max_length"]) <= 9 for r in steps)
    assert "judge_reward" in (out / "report.md").read_text()


def test_the_reward_profile_and_the_demonstrations_are_options_and_part_of_the_cache_key(
    train: Callable[..., tuple[int, str, str, Path]],
) -> None:
    import json

    code, first, _, out = train("--estimators", "grpo", "--profile", "hardened", "--warm-normalise", "0.5")
    assert code == 0, first
    config = json.loads((out / "run.json").read_text())["config"]
    assert (config["profile"], config["warm_normalise"]) == ("hardened", 0.5)
    # Other demonstrations are another warm start; the same ones are the cached one.
    code, second, _, _ = train("--estimators", "grpo", "--warm-normalise", "1")
    assert code == 0
    assert "supervised steps" in second
    assert "cached checkpoint" not in second
    code, third, _, _ = train("--estimators", "grpo", "--warm-normalise", "1")
    assert code == 0
    assert "cached checkpoint" in third
    code, _, err, _ = train("--task", "scales", "--warm-normalise", "0.5")
    assert code == 2
    assert "normalise applies to the tool_calling task only" in err
    assert err.count("\n") == 1
    code, _, err, _ = train("--task", "scales", "--profile", "hardened")
    assert code == 2
    assert "one reward definition" in err


def test_shots_and_gradient_checkpointing_are_options(
    train: Callable[..., tuple[int, str, str, Path]],
) -> None:
    import json

    code, out, _, folder = train("--estimators", "grpo", "--shots", "2", "--gradient-checkpointing")
    assert code == 0, out
    config = json.loads((folder / "run.json").read_text())["config"]
    assert (config["shots"], config["gradient_checkpointing"]) == (2, True)
    assert {r["step"] for r in _rows(folder / "evals.csv")} == {"0", "1", "2"}
    code, _, err, _ = train("--shots", "40")
    assert code == 2
    assert "shots must be >= 0 and fewer than the training prompts" in err
