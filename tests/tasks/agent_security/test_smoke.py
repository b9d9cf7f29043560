"""The agent-security GPU smoke loop runs on CPU: real episodes, real reward, core advantages, updates."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("agentdojo")

from corrgrpo_tasks.gpu_smoke import smoke_agent_security


@pytest.mark.parametrize("estimator", ["corrgrpo", "grpo"])
def test_policy_gradient_steps_on_agentdojo_episodes(estimator: str) -> None:
    summary = smoke_agent_security(device="cpu", steps=2, estimator=estimator, group_size=3, n_cases=2)
    assert summary["steps"] == 2
    assert len(summary["history"]) == 2
    for step in summary["history"]:
        assert math.isfinite(step["loss"])
        assert step["n_clean"] + step["n_security"] == 2 * 3
        assert 0.0 <= step["invalid_rate"] <= 1.0
