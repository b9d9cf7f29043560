"""The ``corrgrpo`` command stands alone: the task commands arrive through entry points, loaded only when
they run, and a missing plugin package is a one-line error that says how to install it."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from corrgrpo_core.cli import main, plugin

# Runs the CLI in a fresh interpreter where the task package (and the adapters) cannot be imported.
_WITHOUT_TASKS = """
import sys
sys.modules["corrgrpo_tasks"] = None
sys.modules["corrgrpo_adapters"] = None
from corrgrpo_core.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.startswith(("corrgrpo_tasks", "corrgrpo_adapters")) and sys.modules[m])
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


def _without_tasks(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_TASKS, *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_explain_runs_with_the_tasks_unimportable() -> None:
    proc = _without_tasks("explain", "--example")
    assert proc.returncode == 0, proc.stderr
    assert "c_q = 1.6986" in proc.stdout  # the paper's c_q
    assert "LOADED []" in proc.stderr


def test_a_task_command_without_its_package_is_a_one_line_install_hint() -> None:
    proc = _without_tasks("train", "--out", "unused")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("LOADED")]
    assert len(lines) == 1, proc.stderr
    assert "corrgrpo train: error:" in lines[0]
    assert "pip install" in lines[0]


def test_help_lists_the_task_commands_even_when_they_cannot_load() -> None:
    proc = _without_tasks("--help")
    assert proc.returncode == 0
    for name in ("explain", "simulate", "train", "evaluate"):
        assert name in proc.stdout
    assert "not available" in proc.stdout


def test_explain_in_process_loads_no_task_module(capsys: pytest.CaptureFixture[str]) -> None:
    before = {m for m in sys.modules if m.startswith("corrgrpo_tasks")}
    assert main(["explain", "--example"]) == 0
    capsys.readouterr()
    after = {m for m in sys.modules if m.startswith("corrgrpo_tasks")}
    assert after == before


def test_the_task_commands_are_registered_entry_points() -> None:
    found = plugin.entry_points()
    for name in ("train", "evaluate"):
        assert name in found, f"{name} is not in the {plugin.GROUP!r} entry points: reinstall the package"
        assert found[name].value.startswith("corrgrpo_tasks.")
        assert name in plugin.INSTALL_HINTS


def test_an_entry_point_that_is_not_a_command_is_a_one_line_error() -> None:
    entry = metadata.EntryPoint(name="odd", value="corrgrpo_core:__version__", group=plugin.GROUP)
    with pytest.raises(plugin.CliError, match=r"is not a corrgrpo_core\.cli\.plugin\.Command"):
        plugin.load("odd", entry)


def test_an_unknown_command_is_argparses_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_output_cut_short_by_its_reader_is_not_an_error() -> None:
    # `corrgrpo explain --example | head -1`: the reader leaves after one line.
    proc = subprocess.run(
        f"{sys.executable} -m corrgrpo_core.cli explain --example | head -1",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        executable="/bin/bash",
    )
    assert proc.stderr == ""
    pipe = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"{sys.executable} -m corrgrpo_core.cli explain --example | head -c 10",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert pipe.returncode == 0, pipe.stderr
