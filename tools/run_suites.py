"""Create one virtual environment per test suite and run every suite.

Each folder ``ci/envs/NAME/`` describes one environment:

* ``install.sh`` installs it; it runs with ``VENV`` (the venv folder), ``PY`` (its python), ``ROOT``
  (the repository root) and ``INSTALL`` (the install command for that venv: ``uv pip install --python
  $PY`` where uv is available, else ``$PY -m pip install``) set, from the repository root.
* ``*.args`` files each hold pytest arguments (test paths, ``-m`` expressions); several issues can
  add their own file to the same environment without touching each other's.
* ``*.cmd`` files each make one step that is not a test suite (lint: ``ruff``, ``mypy``): one command
  a line, run without a shell from the repository root with the environment's ``bin/`` first on
  ``PATH``. Every line runs; the step fails when any of them exits non-zero.

Usage: ``python3 tools/run_suites.py [NAME | NAME/STEP ...] [--reuse] [--jobs N]``: ``core`` runs that
environment's steps and its suite, ``core/lint`` only the step ``ci/envs/core/lint.cmd``.
Environments are installed in parallel with uv (installs wait on the network, tests on the CPU; uv
installs an environment several times faster than pip), then the environments' steps and suites run,
``--jobs`` environments at a time (default: two, or one on a single core; the longest of the last run
first). With more than one job, each environment's output is printed whole when it finishes. The run fails when any step fails, or any
suite fails, errors, or collects no test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "ci" / "envs"
VENVS = ROOT / ".venvs"


@functools.cache
def _uv() -> str | None:
    """The uv executable: on PATH, or installed once into ``.venvs/.uv`` with pip; None if neither works."""
    found = shutil.which("uv")
    if found:
        return found
    tool = VENVS / ".uv"
    uv = tool / "bin" / "uv"
    if not uv.is_file():
        try:
            subprocess.run(
                [sys.executable, "-m", "venv", "--clear", str(tool)], check=True, capture_output=True
            )
            subprocess.run(
                [str(tool / "bin" / "python"), "-m", "pip", "install", "-q", "uv"],
                check=True,
                capture_output=True,
                timeout=600,
            )
        except (subprocess.SubprocessError, OSError):
            return None
    return str(uv) if uv.is_file() else None


def _stamp(env: Path) -> str:
    digest = hashlib.sha256()
    for path in [ROOT / "pyproject.toml", ROOT / "ci" / "constraints.txt", *sorted(env.glob("*"))]:
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _install(name: str, *, reuse: bool) -> tuple[str, int, float, str]:
    env, venv = ENVS / name, VENVS / name
    stamp_file = venv / ".corrgrpo-stamp"
    start = time.monotonic()
    if reuse and stamp_file.is_file() and stamp_file.read_text() == _stamp(env):
        return name, 0, 0.0, "reused"
    uv, python = _uv(), venv / "bin" / "python"
    constraints = str(ROOT / "ci" / "constraints.txt")
    environ = dict(os.environ, VENV=str(venv), PY=str(python), ROOT=str(ROOT), PIP_CONSTRAINT=constraints)
    if uv is not None:
        subprocess.run([uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(venv)], check=True)
        environ.update(INSTALL=f"{uv} pip install --python {python}", UV_CONSTRAINT=constraints)
        if os.environ.get("PIP_FIND_LINKS"):  # where this machine keeps its local wheels (the CPU torch)
            environ.setdefault("UV_FIND_LINKS", os.environ["PIP_FIND_LINKS"])
    else:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        environ.update(INSTALL=f"{python} -m pip install")
    log = venv / "install.log"
    with log.open("w") as handle:
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", str(env / "install.sh")],
            cwd=ROOT,
            env=environ,
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if proc.returncode == 0:
        stamp_file.write_text(_stamp(env))
    tail = "" if proc.returncode == 0 else "".join(log.read_text().splitlines(True)[-40:])
    return name, proc.returncode, time.monotonic() - start, tail


def _pytest_args(name: str) -> list[str]:
    args: list[str] = []
    for file in sorted((ENVS / name).glob("*.args")):
        for line in file.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                args += shlex.split(line)
    return args


def _run(name: str, out: TextIO) -> tuple[int, dict[str, int], float]:
    venv = VENVS / name
    junit = venv / "junit.xml"
    junit.unlink(missing_ok=True)
    environ = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "ci"),
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    cmd = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        *_pytest_args(name),
        f"--junitxml={junit}",
        "-p",
        "no:cacheprovider",
    ]
    print(f"\n=== suite {name}: {shlex.join(cmd[1:])}", file=out, flush=True)
    start = time.monotonic()
    code = subprocess.run(
        cmd, cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT, check=False
    ).returncode
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if junit.is_file():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, "0"))
    return code, counts, time.monotonic() - start


def _commands(file: Path) -> list[list[str]]:
    lines = (line.strip() for line in file.read_text().splitlines())
    return [shlex.split(line) for line in lines if line and not line.startswith("#")]


def _step(name: str, file: Path, out: TextIO) -> tuple[list[str], list[str], float]:
    """Run the commands of one ``*.cmd`` file in the environment ``name``: (passed, failed) commands."""
    venv = VENVS / name
    # Caches per environment: mypy's results depend on which packages are installed.
    environ = dict(
        os.environ,
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        MYPY_CACHE_DIR=str(venv / ".mypy_cache"),
        RUFF_CACHE_DIR=str(venv / ".ruff_cache"),
    )
    passed: list[str] = []
    failed: list[str] = []
    start = time.monotonic()
    for cmd in _commands(file):
        print(f"\n=== step {name}/{file.stem}: {shlex.join(cmd)}", file=out, flush=True)
        code = subprocess.run(
            cmd, cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
        (passed if code == 0 else failed).append(shlex.join(cmd))
    return passed, failed, time.monotonic() - start


# Seconds each environment's steps and suite took on the 2-core machine: the order of a first run (the
# longest first, so two jobs finish together); later runs use what the last run measured.
_TYPICAL_SECONDS = {"verl": 300, "trl": 270, "core": 265, "tasks": 140, "openrlhf": 95, "agents": 30}
_SECONDS = VENVS / ".seconds.json"
_SECONDS_LOCK = threading.Lock()


def _last_seconds(name: str) -> float:
    """How long the environment's steps and suite took last time: the longest run first."""
    try:
        return float(json.loads(_SECONDS.read_text())[name])
    except (OSError, ValueError, KeyError, TypeError):
        return float(_TYPICAL_SECONDS.get(name, 0))


def _environment(
    name: str, wanted: set[str] | None, out: TextIO
) -> tuple[list[tuple[str, str, float]], int, int]:
    """Run an environment's steps (those in ``wanted``; all when None) and, when None, its suite."""
    rows: list[tuple[str, str, float]] = []
    passed = failed = 0
    start = time.monotonic()
    for file in sorted((ENVS / name).glob("*.cmd")):
        if wanted is not None and file.stem not in wanted:
            continue
        ok_cmds, bad_cmds, secs = _step(name, file, out)
        passed += len(ok_cmds)
        failed += len(bad_cmds)
        status = f"{len(ok_cmds)} of {len(ok_cmds) + len(bad_cmds)} commands passed"
        if bad_cmds:
            status += f"; FAILED: {', '.join(bad_cmds)}"
        rows.append((f"{name}/{file.stem}", status, secs))
    if wanted is None:
        code, c, secs = _run(name, out)
        ok = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
        passed += ok
        failed += c["failures"] + c["errors"]
        status = f"{ok} passed, {c['failures'] + c['errors']} failed, {c['skipped']} skipped"
        if code != 0 or c["tests"] == 0:
            failed += 0 if c["failures"] + c["errors"] else 1
            status += f" (pytest exit {code}{', no test ran' if c['tests'] == 0 else ''})"
        rows.append((name, status, secs))
        with _SECONDS_LOCK:
            try:
                seen = json.loads(_SECONDS.read_text())
            except (OSError, ValueError):
                seen = {}
            _SECONDS.write_text(json.dumps({**seen, name: round(time.monotonic() - start)}))
    return rows, passed, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="environments (NAME) or steps (NAME/STEP); default: all")
    parser.add_argument("--reuse", action="store_true", help="keep an environment whose spec is unchanged")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, len(os.sched_getaffinity(0))),
        help="environments whose suites run at the same time [2, or 1 on a single core]",
    )
    opts = parser.parse_args()
    known = sorted(p.name for p in ENVS.iterdir() if (p / "install.sh").is_file())
    # environment -> the steps asked for (None: all its steps and its suite)
    plan: dict[str, set[str] | None] = {}
    for entry in opts.envs or known:
        name, _, step = entry.partition("/")
        if name not in known:
            parser.error(f"unknown environment {name!r}; known: {known}")
        if step and not (ENVS / name / f"{step}.cmd").is_file():
            steps = sorted(f.stem for f in (ENVS / name).glob("*.cmd"))
            parser.error(f"environment {name!r} has no step {step!r}; its steps: {steps}")
        steps_so_far = plan.get(name, set())
        plan[name] = None if not step or steps_so_far is None else {*steps_so_far, step}
    names = list(plan)
    VENVS.mkdir(exist_ok=True)

    failed_installs: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        for name, code, secs, tail in pool.map(lambda n: _install(n, reuse=opts.reuse), names):
            print(f"install {name}: {'ok' if code == 0 else f'FAILED ({code})'} in {secs:.0f} s", flush=True)
            if code:
                print(tail, flush=True)
                failed_installs.append(name)

    jobs = max(1, opts.jobs)
    order = sorted((n for n in names if n not in failed_installs), key=_last_seconds, reverse=True)
    lock = threading.Lock()

    def work(name: str) -> tuple[list[tuple[str, str, float]], int, int]:
        if jobs == 1:
            return _environment(name, plan[name], sys.stdout)
        log = VENVS / name / "suite.log"
        with log.open("w") as handle:
            result = _environment(name, plan[name], handle)
        with lock:
            print(log.read_text(), end="", flush=True)
        return result

    results: dict[str, tuple[list[tuple[str, str, float]], int, int]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, result in zip(order, pool.map(work, order), strict=True):
            results[name] = result
    rows: list[tuple[str, str, float]] = []
    passed = failed = 0
    for name in names:
        if name in failed_installs:
            rows.append((name, "install failed", 0.0))
            failed += 1
            continue
        env_rows, env_passed, env_failed = results[name]
        rows += env_rows
        passed += env_passed
        failed += env_failed

    print("\n=== summary")
    for name, status, secs in rows:
        print(f"{name:>14}: {status} [{secs:.0f} s]")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
