"""Create one virtual environment per test suite and run every suite.

Each folder ``ci/envs/NAME/`` describes one environment:

* ``install.sh`` installs it; it runs with ``VENV`` (the venv folder), ``PY`` (its python), ``ROOT``
  (the repository root) and ``INSTALL`` (the install command for that venv: ``uv pip install --python
  $PY`` where uv is available, else ``$PY -m pip install``) set, and ``UV`` (the uv executable) where
  uv is available, from the repository root.
* ``*.args`` files each hold pytest arguments (test paths, ``-m`` expressions); several issues can
  add their own file to the same environment without touching each other's.
* ``*.cmd`` files each make one step that is not a test suite (lint: ``ruff``, ``mypy``): one command
  a line, run without a shell from the repository root with the environment's ``bin/`` first on
  ``PATH``. Every line runs; the step fails when any of them exits non-zero.

Usage: ``python3 tools/run_suites.py [NAME | NAME/STEP ...] [--reuse] [--jobs N]``: ``core`` runs that
environment's steps and its suite, ``core/lint`` only the step ``ci/envs/core/lint.cmd``.
Environments are installed three at a time with uv (several times faster than pip), the longest
suite's first, and each environment's steps and suite are ready to run as soon as its install ends,
``--jobs`` environments at a time (default: two, or one on a single core), the longest of those ready
first: installs wait on the network, tests on the CPU, so the two overlap. What a step or suite prints
goes to ``.venvs/NAME/suite.log`` (an install's to ``.venvs/NAME/install.log``); stdout gets one line
as each install, step and suite starts and one as it ends, with its counts and seconds, the end of the
log under one that failed, a summary, and last ``N passed, N failed, N skipped`` (tests, plus one per
step command). The run exits 1 when any install or step command fails, or any suite fails, errors, or
collects no test.
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
_T0 = time.monotonic()
_SAY_LOCK = threading.Lock()
#: Lines of a failed step's or suite's log printed under its end line (the whole log stays on disk).
_FAILURE_LINES = 80


def _say(message: str) -> None:
    """One progress line on stdout, as it happens: minutes:seconds since the start, then the message."""
    minutes, seconds = divmod(int(time.monotonic() - _T0), 60)
    with _SAY_LOCK:
        print(f"[{minutes:02d}:{seconds:02d}] {message}", flush=True)


def _log_tail(log: Path, offset: int) -> str:
    """The last lines of ``log`` written after byte ``offset``: what a failed step or suite printed."""
    with log.open("rb") as handle:
        handle.seek(offset)
        lines = handle.read().decode(errors="replace").splitlines()
    return "\n".join(["    " + line for line in lines[-_FAILURE_LINES:]])


_UV_LOCK = threading.Lock()


def _uv() -> str | None:
    """The uv executable: on PATH, or installed once into ``.venvs/.uv`` with pip; None if neither works.

    The install threads all ask at once: the lock makes the first one install it and the others wait
    (without it, one thread's ``venv --clear`` ran under another's half-written binary)."""
    with _UV_LOCK:
        return _find_uv()


@functools.cache
def _find_uv() -> str | None:
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


#: Environments installed on every run, --reuse or not: ``wheel`` builds the package from the source
#: tree, which the stamp does not cover.
_ALWAYS_INSTALLED = {"wheel"}
#: An environment ``NAME-oldest`` runs ``NAME``'s install script at a framework range's oldest release.
OLDEST = "-oldest"


def _stamp(env: Path) -> str:
    digest = hashlib.sha256()
    folders = [env, ENVS / env.name.removesuffix(OLDEST)] if env.name.endswith(OLDEST) else [env]
    files = [path for folder in folders for path in sorted(folder.glob("*"))]
    for path in [ROOT / "pyproject.toml", ROOT / "ci" / "constraints.txt", *files]:
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _install(name: str, *, reuse: bool) -> tuple[str, int, float, str]:
    env, venv = ENVS / name, VENVS / name
    stamp_file = venv / ".corrgrpo-stamp"
    start = time.monotonic()
    if (
        reuse
        and name not in _ALWAYS_INSTALLED
        and stamp_file.is_file()
        and stamp_file.read_text() == _stamp(env)
    ):
        return name, 0, 0.0, "reused"
    uv, python = _uv(), venv / "bin" / "python"
    constraints = str(ROOT / "ci" / "constraints.txt")
    environ = dict(os.environ, VENV=str(venv), PY=str(python), ROOT=str(ROOT), PIP_CONSTRAINT=constraints)
    if uv is not None:
        subprocess.run([uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(venv)], check=True)
        environ.update(INSTALL=f"{uv} pip install --python {python}", UV_CONSTRAINT=constraints, UV=uv)
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
        "--durations=15",  # the slowest tests, in the suite's log: where the time goes
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
    # Caches per environment (mypy's results depend on which packages are installed), beside the venv
    # rather than in it, so that reinstalling it (``uv venv --clear``, every run without --reuse) keeps
    # them: `run_suites.py verl/lint` (no --reuse) took 70 s, then 3 s (load 7). mypy checks each cached
    # module against its source, so a changed package is read again.
    environ = dict(
        os.environ,
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        MYPY_CACHE_DIR=str(VENVS / ".mypy_cache" / name),
        RUFF_CACHE_DIR=str(VENVS / ".ruff_cache" / name),
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
# longest first, so two jobs finish together); later runs use what the last run measured. Two jobs at a
# time and the study running (load about 7): main's last full run (8 Dec); verl and verl-oldest after
# issue 36.7's changes (verl: 477 s with a warm mypy cache, plus the 70 s of a cold one).
_TYPICAL_SECONDS = {
    "trl": 1130,
    "verl": 550,
    "tasks": 481,
    "openrlhf-oldest": 463,
    "openrlhf": 446,
    "core": 434,
    "verl-oldest": 426,
    "trl-oldest": 236,
    "agents": 214,
    "wheel": 110,
    "plain": 37,
}
_SECONDS = VENVS / ".seconds.json"
_SECONDS_LOCK = threading.Lock()


def _last_seconds(name: str) -> float:
    """How long the environment's steps and suite took last time: the longest run first."""
    try:
        return float(json.loads(_SECONDS.read_text())[name])
    except (OSError, ValueError, KeyError, TypeError):
        return float(_TYPICAL_SECONDS.get(name, 0))


#: One result row: (step or suite, passed, failed, skipped, seconds, note).
Row = tuple[str, int, int, int, float, str]


def _report(row: Row, log: Path, offset: int) -> None:
    """The end line of a step or suite; under a failed one, the end of what it printed."""
    label, passed, failed, skipped, secs, note = row
    verdict = "FAILED" if failed else "ok"
    _say(
        f"end   {label}: {verdict}, {passed} passed, {failed} failed, {skipped} skipped{note} [{secs:.0f} s]"
    )
    if failed:
        with _SAY_LOCK:
            shown = log.relative_to(ROOT) if log.is_relative_to(ROOT) else log
            print(f"{_log_tail(log, offset)}\n    (whole log: {shown})", flush=True)


def _steps(name: str, wanted: set[str] | None, out: TextIO, log: Path) -> list[Row]:
    rows: list[Row] = []
    for file in sorted((ENVS / name).glob("*.cmd")):
        if wanted is not None and file.stem not in wanted:
            continue
        label = f"{name}/{file.stem}"
        _say(f"start {label} (step, {len(_commands(file))} commands)")
        offset = log.stat().st_size
        ok_cmds, bad_cmds, secs = _step(name, file, out)
        note = f"; FAILED: {', '.join(bad_cmds)}" if bad_cmds else ""
        rows.append((label, len(ok_cmds), len(bad_cmds), 0, secs, note))
        _report(rows[-1], log, offset)
    return rows


def _suite(name: str, out: TextIO, log: Path) -> Row:
    _say(f"start {name} (suite)")
    offset = log.stat().st_size
    code, c, secs = _run(name, out)
    failed = c["failures"] + c["errors"]
    ok = c["tests"] - failed - c["skipped"]
    note = ""
    if code != 0 or c["tests"] == 0:
        note = f" (pytest exit {code}{', no test ran' if c['tests'] == 0 else ''})"
        failed = max(failed, 1)
    row: Row = (name, ok, failed, c["skipped"], secs, note)
    _report(row, log, offset)
    return row


def _environment(name: str, wanted: set[str] | None) -> list[Row]:
    """Run an environment's steps (those in ``wanted``; all when None) and, when None, its suite; their
    output goes to ``.venvs/NAME/suite.log``, a start and an end line per step and suite to stdout."""
    start = time.monotonic()
    log = VENVS / name / "suite.log"
    with log.open("w") as out:
        rows = _steps(name, wanted, out, log)
        if wanted is None:
            rows.append(_suite(name, out, log))
    if wanted is None:
        with _SECONDS_LOCK:
            try:
                seen = json.loads(_SECONDS.read_text())
            except (OSError, ValueError):
                seen = {}
            _SECONDS.write_text(json.dumps({**seen, name: round(time.monotonic() - start)}))
    return rows


def _plan(parser: argparse.ArgumentParser, entries: list[str]) -> dict[str, set[str] | None]:
    """environment -> the steps asked for (None: all its steps and its suite)."""
    known = sorted(p.name for p in ENVS.iterdir() if (p / "install.sh").is_file())
    plan: dict[str, set[str] | None] = {}
    for entry in entries or known:
        name, _, step = entry.partition("/")
        if name not in known:
            parser.error(f"unknown environment {name!r}; known: {known}")
        if step and not (ENVS / name / f"{step}.cmd").is_file():
            steps = sorted(f.stem for f in (ENVS / name).glob("*.cmd"))
            parser.error(f"environment {name!r} has no step {step!r}; its steps: {steps}")
        steps_so_far = plan.get(name, set())
        plan[name] = None if not step or steps_so_far is None else {*steps_so_far, step}
    return plan


def _install_and_run(plan: dict[str, set[str] | None], *, reuse: bool, jobs: int) -> list[Row]:
    """Install the environments three at a time, the longest suite's first; as each install ends, its
    steps and suite are ready, and ``jobs`` environments at a time run them, the longest ready one first
    (installs end in no set order: a short suite whose install ended first must not take a worker from
    a long one ready by the time it is free). Installs wait on the network, suites on the CPU, so they
    overlap. The rows come back in ``plan``'s order."""
    order = sorted(plan, key=_last_seconds, reverse=True)
    results: dict[str, list[Row]] = {}
    ready: list[str] = []
    ready_lock = threading.Lock()

    def longest_ready() -> tuple[str, list[Row]]:
        # Submitted once per install that ends; run when a worker is free, it takes the longest
        # environment ready then, which need not be the one whose install submitted it.
        with ready_lock:
            name = max(ready, key=_last_seconds)
            ready.remove(name)
        return name, _environment(name, plan[name])

    with (
        concurrent.futures.ThreadPoolExecutor(max_workers=3) as installs,
        concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as suites,
    ):
        for name in order:
            _say(f"start install {name}")
        pending = [installs.submit(_install, name, reuse=reuse) for name in order]
        running: list[concurrent.futures.Future[tuple[str, list[Row]]]] = []
        for future in concurrent.futures.as_completed(pending):
            name, code, secs, tail = future.result()
            if code == 0:
                _say(f"end   install {name}: {'reused' if tail == 'reused' else 'ok'} [{secs:.0f} s]")
                with ready_lock:
                    ready.append(name)
                running.append(suites.submit(longest_ready))
                continue
            _say(f"end   install {name}: FAILED (exit {code}) [{secs:.0f} s]")
            with _SAY_LOCK:
                print(tail, flush=True)
            results[name] = [(f"install {name}", 0, 1, 0, secs, "")]
        for suite in running:
            name, rows = suite.result()
            results[name] = rows
    return [row for name in plan for row in results[name]]


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
    plan = _plan(parser, opts.envs)
    VENVS.mkdir(exist_ok=True)
    rows = _install_and_run(plan, reuse=opts.reuse, jobs=opts.jobs)

    print("\n=== summary (logs: .venvs/NAME/install.log, .venvs/NAME/suite.log)")
    for label, passed, failed, skipped, secs, note in rows:
        print(f"{label:>16}: {passed} passed, {failed} failed, {skipped} skipped{note} [{secs:.0f} s]")
    passed, failed, skipped = (sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows))
    print(f"{passed} passed, {failed} failed, {skipped} skipped", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
