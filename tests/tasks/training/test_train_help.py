"""``corrgrpo train`` without TRL: the help works and running it is a one-line error (any environment)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from corrgrpo_core.cli import main
from corrgrpo_tasks.training import cli as train_cli


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``run_cli("train", ...)`` -> (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_help_explains_the_options_without_trl(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--estimators",
        "--seeds",
        "--steps",
        "--model",
        "--task",
        "--out",
        "evals.csv",
        "report.md",
    ):
        assert option in text


def test_missing_trl_is_a_one_line_error(
    run_cli: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = train_cli.importlib.util.find_spec
    monkeypatch.setattr(
        train_cli.importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a)
    )
    code, out, err = run_cli("train", "--out", "unused")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "needs trl" in err
    assert "pip install" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--estimators", "grpo,nope"], "unknown estimator"),
        (["--model", "/no/such/checkpoint"], "not a local checkpoint"),
    ],
)
def test_bad_options_are_one_line_errors(
    argv: list[str],
    message: str,
    run_cli: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(train_cli.importlib.util, "find_spec", lambda name, *a: object())
    code, _, err = run_cli("train", *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


def test_the_committed_study_redraws_without_trl(tmp_path: Path) -> None:
    # --report-only needs only the CSVs and matplotlib; the committed code-task results re-render.
    pytest.importorskip("matplotlib")
    import shutil

    source = Path(__file__).resolve().parents[3] / "docs" / "experiments" / "code"
    shutil.copytree(source, tmp_path / "code")
    (tmp_path / "code" / "report.md").unlink()
    assert main(["train", "--report-only", "--out", str(tmp_path / "code")]) == 0
    assert (tmp_path / "code" / "report.md").read_text() == (source / "report.md").read_text()
