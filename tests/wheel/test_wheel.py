"""The wheel a user installs: built from this tree, installed with ``[cli,torch]`` into a fresh venv
(ci/envs/wheel/install.sh), imported from there, without a CUDA torch, and ``corrgrpo demo`` runs.

Only ``ci/envs/wheel`` can run this (anywhere else the package comes from the clone): elsewhere the
file is one skip."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

if Path(sys.prefix).resolve() != ROOT / ".venvs" / "wheel":
    pytest.skip(
        "runs in ci/envs/wheel, where the package comes from the built wheel", allow_module_level=True
    )


def test_the_packages_come_from_the_installed_wheel() -> None:
    import corrgrpo_adapters
    import corrgrpo_core
    import corrgrpo_tasks

    for module in (corrgrpo_core, corrgrpo_adapters, corrgrpo_tasks):
        assert Path(sys.prefix) in Path(module.__file__ or "").resolve().parents, module
    direct_url = [d.read_text("direct_url.json") or "" for d in distributions() if d.name == "corrgrpo-core"]
    assert len(direct_url) == 1
    assert ".whl" in direct_url[0]
    assert '"editable": true' not in direct_url[0]


def test_no_cuda_torch_was_pulled() -> None:
    import torch

    assert torch.__version__.endswith("+cpu")
    assert torch.version.cuda is None
    assert sorted(d.name for d in distributions() if d.name.lower().startswith("nvidia")) == []


def test_corrgrpo_demo_runs_from_the_wheel(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    run = subprocess.run(
        [str(Path(sys.prefix) / "bin" / "corrgrpo"), "demo", "--out", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert (out / "explain_fig2.png").stat().st_size > 0
    assert (out / "simulate" / "report.md").is_file()
    assert run.stdout.startswith("# The paper's Figure 2")  # the Figure 2 numbers come first
    assert f"Files in {out}/" in run.stdout
