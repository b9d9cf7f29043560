"""Each adapter is mypy --strict clean against the framework version its environment pins.

The core environment type-checks src/ and tasks/ with the frameworks absent (they are Any there); an
adapter's use of its framework can only be checked where that framework is installed, so this runs in
the trl, verl and openrlhf environments, on whichever of them is importable.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = [name for name in ("trl", "verl", "openrlhf") if importlib.util.find_spec(name) is not None]
# Modules outside adapters/ that subclass a framework's classes.
ALSO = {"verl": ["tasks/corrgrpo_tasks/agent_security/verl_agent_loop.py"],
        "openrlhf": ["tasks/corrgrpo_tasks/agent_security/openrlhf_agent.py"]}


@pytest.mark.parametrize("framework", INSTALLED)
def test_adapter_is_mypy_strict_clean(framework: str) -> None:
    paths = [f"adapters/corrgrpo_adapters/{framework}", *ALSO.get(framework, [])]
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *paths],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
