"""``corrgrpo pipeline tool_calling --framework trl`` end to end on CPU: the recipe trains a tiny random
Qwen2 for two real GRPO steps (TRL, the RLLA reward), the saved model is evaluated on RLLA's test rows
and API-Bank (``corrgrpo evaluate`` in its own process), and one table is written; a rerun skips
training and resumes the evaluations. Needs trl (ci/envs/trl)."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")

from corrgrpo_tasks.pipeline.cli import COMMAND

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)
TOOLS = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "tool_calling" / "fixtures"
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


def run(argv: list[str]) -> str:
    parser = argparse.ArgumentParser(prog="corrgrpo")
    COMMAND.attach(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    assert COMMAND.run(parser.parse_args(["pipeline", *argv]), out) == 0
    return out.getvalue()


def test_trl_pipeline_trains_evaluates_and_tabulates(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    from corrgrpo_tasks.gpu_smoke._run import tool_calling_pieces
    from corrgrpo_tasks.gpu_smoke._tiny import piece_only_generation, write_tiny_checkpoint
    from corrgrpo_tasks.tool_calling import read_records, to_rows

    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    model = write_tiny_checkpoint(tmp_path / "tiny", tool_calling_pieces(), hidden_size=32)
    records = read_records(TOOLS / "rlla_tiny.json")
    datasets.Dataset.from_list(to_rows(records, split="train")).to_parquet(str(tmp_path / "train.parquet"))
    (tmp_path / "rlla").mkdir()
    datasets.Dataset.from_list(to_rows(records, split="test")).to_parquet(
        str(tmp_path / "rlla" / "test.parquet")
    )
    (tmp_path / "api").mkdir()
    shutil.copy(TOOLS / "api_bank_tiny.json", tmp_path / "api" / "level-1-api.json")
    generation = piece_only_generation()
    argv = [
        "tool_calling",
        "--framework",
        "trl",
        "--estimator",
        "grpo",
        "--out",
        str(tmp_path / "pipe"),
        "--data",
        f"rlla-test={tmp_path / 'rlla'}",
        "--data",
        f"api-bank={tmp_path / 'api'}",
        "--max-new-tokens",
        "2",
        "--generation-kwargs",
        generation.partition("=")[2],
        "--no-progress",
        "--set",
        f"model={model}",
        f"train_files={tmp_path / 'train.parquet'}",
        *TINY,
        "use_cpu=true",
        generation,
    ]
    table = run(argv)
    trained = tmp_path / "pipe" / "checkpoints" / "tool_calling-grpo"
    assert (trained / "model.safetensors").is_file()
    assert (tmp_path / "pipe" / "steps" / "train.done").is_file()
    metrics = json.loads((tmp_path / "pipe" / "eval" / "rlla-test" / "metrics.json").read_text())
    assert metrics["config"]["model"] == str(trained)
    assert metrics["config"]["n_selected"] == metrics["config"]["n_total"]
    assert "| rlla-test | all_exact |" in table
    assert "| api-bank | average |" in table
    assert "| rlla-test | Qwen2.5-7B-Instruct (7B) | all-exact | 63.38 | 67.61 |" in table
    assert table.startswith((tmp_path / "pipe" / "results.md").read_text())
    capfd.readouterr()
    assert run(argv) == table  # resumed: nothing trained or generated again
    err = capfd.readouterr().err
    assert "step train: skipped (done)" in err
    assert (
        f"resuming {tmp_path / 'pipe' / 'eval' / 'rlla-test'}: 14 of 14 cases already scored, 0 to go" in err
    )
