"""``corrgrpo train`` without TRL: the help works and running it is a one-line error (core env)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from corrgrpo_core.cli import main
from corrgrpo_core.cli import train as train_cli


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
