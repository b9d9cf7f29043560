"""The test command's report: a start and an end line per step and suite, the end of the log under a
failure, and a closing ``N passed, N failed, N skipped`` with a non-zero exit on any failure. The
environments are faked (nothing is installed), so it runs anywhere in a second."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_suites() -> Any:
    spec = importlib.util.spec_from_file_location("run_suites_under_test", ROOT / "tools" / "run_suites.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("rows", "closing", "code"),
    [
        ([("core/lint", 3, 0, 0, 1.0, ""), ("core", 10, 0, 2, 5.0, "")], "13 passed, 0 failed, 2 skipped", 0),
        (
            [("core", 10, 1, 2, 5.0, ""), ("install trl", 0, 1, 0, 1.0, "")],
            "10 passed, 2 failed, 2 skipped",
            1,
        ),
        ([("plain", 0, 1, 0, 1.0, " (pytest exit 5, no test ran)")], "0 passed, 1 failed, 0 skipped", 1),
    ],
)
def test_the_last_line_counts_passed_failed_and_skipped_and_the_exit_code_follows(
    run_suites: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rows: Any,
    closing: str,
    code: int,
) -> None:
    monkeypatch.setattr(run_suites, "_install_and_run", lambda plan, **_: rows)
    monkeypatch.setattr(sys, "argv", ["run_suites.py", "plain"])
    assert run_suites.main() == code
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == closing
    assert not any("::" in line for line in out)  # no list of test ids


def test_a_failed_suite_ends_with_the_tail_of_its_log(
    run_suites: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "suite.log"
    log.write_text("earlier step output\n")
    offset = log.stat().st_size
    log.write_text(log.read_text() + "".join(f"line {i}\n" for i in range(200)) + "FAILED tests/x.py::t\n")
    run_suites._report(("core", 5, 1, 0, 2.0, ""), log, offset)
    run_suites._report(("agents", 5, 0, 1, 2.0, ""), log, offset)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("end   core: FAILED, 5 passed, 1 failed, 0 skipped [2 s]")
    assert "    FAILED tests/x.py::t" in out
    assert "earlier step output" not in "\n".join(out)  # only what this suite printed
    assert len([line for line in out if line.startswith("    line ")]) == run_suites._FAILURE_LINES - 1
    assert out[-1].endswith("end   agents: ok, 5 passed, 0 failed, 1 skipped [2 s]")  # nothing under a pass


def test_a_free_worker_takes_the_longest_suite_ready_whichever_install_ended_first(
    run_suites: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_suites, "_SECONDS", tmp_path / "seconds.json")
    (tmp_path / "seconds.json").write_text('{"long": 300, "mid": 100, "short": 10, "tiny": 5}')
    ran: list[str] = []

    def install(name: str, reuse: bool) -> tuple[str, int, float, str]:
        time.sleep(0.2 if name == "long" else 0.0)  # the longest suite's install ends last
        return name, 0, 0.0, "reused"

    def environment(name: str, wanted: Any) -> list[Any]:
        time.sleep(0.4 if not ran else 0.0)  # every install ends while the first suite runs
        ran.append(name)
        return [(name, 1, 0, 0, 1.0, "")]

    monkeypatch.setattr(run_suites, "_install", install)
    monkeypatch.setattr(run_suites, "_environment", environment)
    plan = dict.fromkeys(["tiny", "short", "mid", "long"])
    rows = run_suites._install_and_run(plan, reuse=True, jobs=1)
    # In the order the installs ended the suites would run mid, short, tiny, long (or similar): after
    # the first, the longest ready runs first.
    assert sorted(ran) == sorted(plan)
    assert ran[1:] == sorted(ran[1:], key=lambda name: -run_suites._last_seconds(name))
    assert ran[1] == "long"
    assert [row[0] for row in rows] == list(plan)  # the rows in the plan's order
