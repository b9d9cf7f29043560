"""The CI layout (ci/envs/*/): every test file runs in exactly one environment, and every path named exists.

Read statically from the ``*.args`` files (nothing is collected), so it runs in a second anywhere.
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / "ci" / "envs"
OLDEST = "-oldest"


def _selected() -> tuple[dict[str, list[str]], list[str]]:
    """test file -> the ``env/args`` files that select it; paths named that do not exist."""
    where: dict[str, list[str]] = defaultdict(list)
    missing: list[str] = []
    for args in sorted(ENVS.glob("*/*.args")):
        for line in args.read_text().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            for word in shlex.split(line):
                if word.startswith("-"):
                    continue
                path = ROOT / word.split("::")[0]
                if not path.exists():
                    missing.append(f"{args.relative_to(ROOT)}: {word}")
                    continue
                if path.is_relative_to(ROOT / "tests"):
                    files = [path] if path.is_file() else sorted(path.rglob("test_*.py"))
                    for file in files:
                        where[file.relative_to(ROOT).as_posix()].append(f"{args.parent.name}/{args.stem}")
    return where, missing


def test_every_path_in_the_args_files_exists() -> None:
    assert _selected()[1] == []


def test_every_test_file_runs_in_exactly_one_environment() -> None:
    """``NAME-oldest`` environments are the exception: they run again, at the oldest release of a
    framework's supported range, test files that ``NAME`` runs at the newest."""
    where, _ = _selected()
    tests = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
    never = [t for t in tests if t not in where]
    twice = {t: envs for t, envs in where.items() if len([e for e in envs if OLDEST not in e]) > 1}
    again = {t: envs for t, envs in where.items() if any(OLDEST in e for e in envs)}
    # each NAME-oldest that runs a file pairs with NAME running it
    unpaired = {
        t: envs
        for t, envs in again.items()
        if {e.split("/")[0] for e in envs if OLDEST in e}
        - {e.split("/")[0] + OLDEST for e in envs if OLDEST not in e}
    }
    assert unpaired == {}, f"a NAME-oldest environment runs a file NAME does not: {unpaired}"
    assert never == [], f"test files no environment runs (add them to a ci/envs/*/*.args file): {never}"
    assert twice == {}, f"test files run more than once (each belongs to one environment): {twice}"


def test_each_environment_has_an_install_script() -> None:
    for env in ENVS.iterdir():
        if env.is_dir():
            assert (env / "install.sh").is_file(), env
