"""Shared fixtures for the recipe tests; framework imports stay inside the fixtures that need them."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TOOL_FIXTURE = (
    Path(__file__).resolve().parents[3]
    / "tasks"
    / "corrgrpo_tasks"
    / "tool_calling"
    / "fixtures"
    / "rlla_tiny.json"
)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Qwen2 whose vocabulary holds the completion pieces (see ``gpu_smoke._tiny``)."""
    from corrgrpo_tasks.gpu_smoke._run import tool_calling_pieces
    from corrgrpo_tasks.gpu_smoke._tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-qwen2"), tool_calling_pieces(), hidden_size=32)


@pytest.fixture(scope="session")
def piece_generation() -> str:
    from corrgrpo_tasks.gpu_smoke._tiny import piece_only_generation

    return piece_only_generation()


@pytest.fixture
def tool_parquet(tmp_path: Path) -> Path:
    """The tool-calling fixture records as verl/TRL rows in a parquet file."""
    import datasets

    from corrgrpo_tasks.tool_calling import read_records, to_rows

    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list(to_rows(read_records(TOOL_FIXTURE), split="train")).to_parquet(str(path))
    return path


@pytest.fixture
def train_two_steps() -> Callable[[Any], list[dict[str, Any]]]:
    """Train a recipe's trainer (max_steps=2); check both steps logged a finite loss; return those logs."""

    def run(trainer: Any) -> list[dict[str, Any]]:
        trainer.train()
        assert trainer.state.global_step == 2
        logged = [entry for entry in trainer.state.log_history if "loss" in entry]
        assert len(logged) == 2
        assert all(math.isfinite(entry["loss"]) for entry in logged)
        return logged

    return run
