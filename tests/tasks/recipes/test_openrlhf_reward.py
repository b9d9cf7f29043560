"""The OpenRLHF reward file: components in extra_logs, their sum as the reward. Needs torch."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

from corrgrpo_tasks.domains import get_domain
from corrgrpo_tasks.tool_calling import COMPONENTS

GT = '<think>a</think>\n<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n</tool_call>'


def test_tool_calling_reward_file_loaded_by_path() -> None:
    spec = importlib.util.spec_from_file_location(
        "reward_module", get_domain("tool_calling").reward("openrlhf")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prompt = "user: call f\nassistant: "
    out = module.reward_func(
        queries=[prompt + GT, prompt + "nope"], prompts=[prompt, prompt], labels=[GT, GT]
    )
    assert set(out["extra_logs"]) == set(COMPONENTS)
    assert out["rewards"].tolist() == [4.0, -3.0]
    assert torch.equal(out["rewards"], out["scores"])
    assert out["extra_logs"]["format_reward"].tolist() == [1.0, 0.0]
