"""TRL adapter tests: warnings filters for the framework, and the tiny local model as a fixture.

Everything runs TRL's real GRPOTrainer on CPU; no hub access (HF_HUB_OFFLINE=1). The shared builders
live in ``trl_fixtures.py`` so the torchrun worker script can import them too."""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if find_spec("trl") is not None:  # else tests/conftest.py skips this folder without importing it
    import trl_fixtures

    from corrgrpo_adapters.trl.testing import make_tiny_model

# transformers 5.24 renames gradient_checkpointing and warns from inside TRL's own calls.
_FRAMEWORK_WARNINGS = (
    "ignore:`gradient_checkpointing` is deprecated:FutureWarning",
    "ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning",
    "ignore:`gradient_checkpointing_disable` is deprecated:FutureWarning",
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            for spec in _FRAMEWORK_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture
def trainer_factory(tiny_model: str, tmp_path: Path) -> Any:
    def build(**kwargs: Any) -> trl_fixtures.RecordingTrainer:
        return trl_fixtures.make_trainer(tiny_model, tmp_path / "out", **kwargs)

    return build
