"""Each framework's supported range is declared once (corrgrpo_adapters.RANGES) and matched by its
extra in pyproject.toml, by the newest and oldest CI environments, and by the adapter's page; the
range check itself, on version strings. Imports no framework, so it runs anywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corrgrpo_adapters import RANGES, warn_outside_range

ROOT = Path(__file__).resolve().parents[2]

FRAMEWORKS = sorted(RANGES)


def _extras() -> dict[str, list[str]]:
    import tomllib

    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return extras


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_extra_declares_the_adapters_range(framework: str) -> None:
    assert _extras()[framework] == [RANGES[framework].requirement]


def _pinned(framework: str, env: str) -> list[str]:
    """The releases of ``framework`` an environment's install script pins: ``trl==1.4.0``, or the
    default of ``"verl==${VERL:-0.9.1}"``, or an oldest script's ``VERL=0.9.0 source ...``."""
    script = (ROOT / "ci" / "envs" / env / "install.sh").read_text()
    default = rf"(?<![\w-]){framework}==(?:\$\{{{framework.upper()}:-)?([\d][\w.]*)"
    assigned = rf"\b{framework.upper()}=([\d][\w.]*)"
    return re.findall(default, script) + re.findall(assigned, script)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_ci_installs_each_end_of_the_range(framework: str) -> None:
    supported = RANGES[framework]
    assert _pinned(framework, framework) == [supported.newest]
    if supported.oldest != supported.newest:  # a range of one release needs no second environment
        assert _pinned(framework, f"{framework}-oldest") == [supported.oldest]
    else:
        assert not (ROOT / "ci" / "envs" / f"{framework}-oldest").exists()


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if RANGES[f].oldest != RANGES[f].newest])
def test_the_oldest_environment_runs_only_the_adapters_tests(framework: str) -> None:
    # The framework's own suites and the recipes run once, at the newest (CI time).
    env = ROOT / "ci" / "envs" / f"{framework}-oldest"
    args = [
        line.strip()
        for file in sorted(env.glob("*.args"))
        for line in file.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert args == [f"tests/adapters/{framework}"]
    assert not list(env.glob("*.cmd"))  # the lint runs at the newest only


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_adapters_page_states_the_range(framework: str) -> None:
    assert RANGES[framework].requirement in (ROOT / "docs" / "adapters" / f"{framework}.md").read_text()


@pytest.mark.parametrize(
    ("framework", "version", "inside"),
    [
        ("trl", "1.4.0", True),
        ("trl", "1.16.0", True),
        ("trl", "1.16.9", True),
        ("trl", "1.10.0+local", True),
        ("trl", "1.17.0", False),
        ("trl", "1.17.0.dev0", False),
        ("trl", "1.3.9", False),
        ("trl", "2.0", False),
        ("trl", "0.29.1", False),
        ("openrlhf", "0.10.3", True),
        ("openrlhf", "0.11.0", True),
        ("openrlhf", "0.11.2", True),
        ("openrlhf", "0.10.2", False),
        ("openrlhf", "0.10.1.post2", False),
        ("openrlhf", "0.12.0", False),
        ("verl", "0.9.0", True),
        ("verl", "0.9.1", True),
        ("verl", "0.9.5", True),
        ("verl", "0.8.0", False),
        ("verl", "0.10.0", False),
        ("verl", "0.10.0.dev0", False),
    ],
)
def test_a_version_outside_the_range_warns_naming_the_range(
    framework: str, version: str, inside: bool
) -> None:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn_outside_range(framework, version) is inside
    messages = [str(w.message) for w in caught]
    if inside:
        assert messages == []
    else:
        assert len(messages) == 1
        assert f"supports {RANGES[framework].requirement}" in messages[0]
        assert f"{framework} {version} is outside" in messages[0]
