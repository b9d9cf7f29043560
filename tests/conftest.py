"""Shared by every suite: hypothesis profiles, and which optional packages each test folder or file needs.

``pip install -e ".[test]"`` is enough to run ``pytest tests``: the core and objectives suites pass,
and a folder or file whose packages are missing (a framework, an extra) is reported as one skip that
names them, without importing its conftest or its modules. ``ci/envs/*`` install what each suite
needs; a package that is installed but broken is an error, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# ``ci`` (what CI runs, and the default) is derandomised, so a run is reproducible; ``dev`` explores
# more examples with fresh randomness: ``HYPOTHESIS_PROFILE=dev pytest tests/core``.
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS
)
settings.register_profile(
    "dev", max_examples=300, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TESTS = Path(__file__).resolve().parent

# Test folder or file (relative to tests/) -> the packages it needs beyond `.[test]`, and the extra
# that installs them. A single test that needs a package calls ``pytest.importorskip`` instead.
REQUIRES: dict[str, tuple[tuple[str, ...], str]] = {
    "adapters/openrlhf": (("torch", "openrlhf"), "ci/envs/openrlhf/install.sh"),
    "adapters/trl": (("torch", "trl"), "trl"),
    "adapters/verl": (("torch", "verl"), "verl"),
    "adapters/verl/test_agentdojo_agent_loop.py": (("agentdojo", "datasets"), "agent-security,tasks"),
    "benchmarks/test_frameworks_trl.py": (("torch", "trl"), "trl"),
    "benchmarks/test_frameworks_verl.py": (("torch", "verl"), "verl"),
    "benchmarks/test_token_passes.py": (("torch", "verl"), "verl"),
    "cli": (("matplotlib", "pyarrow", "rich"), "cli"),
    "examples/test_trl_quickstart.py": (("torch", "trl"), "trl"),
    "tasks/code/test_adapters_data.py": (("datasets", "torch"), "tasks,torch"),
    "tasks/recipes/test_gpu_smoke_trl.py": (("datasets", "torch", "trl"), "tasks,trl"),
    "tasks/recipes/test_openrlhf_launch.py": (("openrlhf",), "ci/envs/openrlhf/install.sh"),
    "tasks/recipes/test_trl_agent_security.py": (("agentdojo", "torch", "trl"), "agent-security,trl"),
    "tasks/recipes/test_trl_train.py": (("torch", "trl"), "trl"),
    "tasks/recipes/test_verl_compose.py": (("hydra", "verl"), "verl"),
    "tasks/tool_calling/test_data.py": (("datasets",), "tasks"),
    "tasks/training/test_train_command.py": (("torch", "trl"), "trl"),
}


def missing_packages(path: Path) -> tuple[list[str], list[str]]:
    """The packages ``path`` needs that are not installed, and the extras (or scripts) that install them."""
    try:
        rel = path.resolve().relative_to(TESTS).as_posix()
    except ValueError:  # outside tests/ (a doctest module under src/)
        return [], []
    missing: list[str] = []
    extras: list[str] = []
    for key, (packages, extra) in REQUIRES.items():
        if rel == key or rel.startswith(key + "/"):
            absent = [p for p in packages if p not in missing and find_spec(p) is None]
            if absent:
                missing += absent
                extras.append(extra)
    return missing, extras


class Unavailable(pytest.Collector):
    """A test folder or file whose packages are not installed: collected as one skip, nothing imported."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        pytest.skip(self.reason)


def _unavailable(path: Path, parent: pytest.Collector) -> Unavailable | None:
    missing, extras = missing_packages(path)
    if not missing:
        return None
    how = " or ".join(f"see {e}" if e.endswith(".sh") else f'pip install -e ".[test,{e}]"' for e in extras)
    reason = f"{path.resolve().relative_to(TESTS.parent).as_posix()} needs {', '.join(missing)} (not installed): {how}"
    node: Unavailable = Unavailable.from_parent(parent, name=path.name, path=path, reason=reason)
    return node


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # Not a Directory collector: pytest loads a folder's conftest.py only for those, so a framework
    # suite's conftest (which imports the framework) is never imported where the framework is absent.
    # A file named on the command line inside the folder is skipped by the module hook instead.
    config = parent.config
    targets = (Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args)
    if any(path.resolve() in target.parents for target in targets):
        return None
    return _unavailable(path, parent)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return _unavailable(module_path, parent)


def pytest_configure(config: pytest.Config) -> None:
    stale = [key for key in REQUIRES if not (TESTS / key).exists()]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py REQUIRES names paths that do not exist: {stale}")
