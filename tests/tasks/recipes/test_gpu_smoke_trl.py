"""The GPU smoke script's TRL path also runs on CPU (one step), so it is known to work before a GPU is lent."""

from __future__ import annotations

from pathlib import Path

import pytest

from corrgrpo_tasks.gpu_smoke import smoke_trl
from corrgrpo_tasks.gpu_smoke.__main__ import main

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)


def test_tool_calling_smoke_step_on_cpu(tmp_path: Path) -> None:
    summary = smoke_trl("tool_calling", device="cpu", steps=1, out=tmp_path)
    assert summary["steps"] == 1
    assert summary["framework"] == "trl"
    assert -3.0 <= summary["rewards"]["reward"] <= 4.0
    assert "rewards/format_reward/mean" in summary["rewards"]


def test_cli_reports_unknown_domains(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["vision"])
    assert "unknown domain" in capsys.readouterr().err


def test_code_smoke_step_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("corrgrpo_tasks.code")
    summary = smoke_trl("code", device="cpu", steps=1, out=tmp_path)
    assert summary["steps"] == 1
    assert "rewards/accuracy_reward/mean" in summary["rewards"]


def test_agent_security_smoke_step_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("agentdojo")
    summary = smoke_trl("agent_security", device="cpu", steps=1, out=tmp_path)
    assert summary["steps"] == 1
    assert "rewards/utility_reward/mean" in summary["rewards"]
    assert "tools/call_frequency" in summary["rewards"]
