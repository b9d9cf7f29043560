"""Create one virtual environment per test suite and run every suite.

Each folder ``ci/envs/NAME/`` describes one environment:

* ``install.sh`` installs it; it runs with ``VENV`` (the venv folder), ``PY`` (its python) and
  ``ROOT`` (the repository root) set, from the repository root.
* ``*.args`` files each hold pytest arguments (test paths, ``-m`` expressions); several issues can
  add their own file to the same environment without touching each other's.

Usage: ``python3 tools/run_suites.py [NAME ...] [--reuse]``. Environments are installed in parallel
(installs wait on the network, tests on the CPU), then the suites run one after another. The run
fails when any suite fails, errors, or collects no test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "ci" / "envs"
VENVS = ROOT / ".venvs"


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
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    log = venv / "install.log"
    environ = dict(os.environ, VENV=str(venv), PY=str(venv / "bin" / "python"), ROOT=str(ROOT),
                   PIP_CONSTRAINT=str(ROOT / "ci" / "constraints.txt"))
    with log.open("w") as handle:
        proc = subprocess.run(["bash", "-euo", "pipefail", str(env / "install.sh")], cwd=ROOT,
                              env=environ, stdout=handle, stderr=subprocess.STDOUT, check=False)
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


def _run(name: str) -> tuple[int, dict[str, int], float]:
    venv = VENVS / name
    junit = venv / "junit.xml"
    junit.unlink(missing_ok=True)
    environ = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1",
                   HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "ci"),
                   PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [str(venv / "bin" / "python"), "-m", "pytest", *_pytest_args(name),
           f"--junitxml={junit}", "-p", "no:cacheprovider"]
    print(f"\n=== suite {name}: {shlex.join(cmd[1:])}", flush=True)
    start = time.monotonic()
    code = subprocess.run(cmd, cwd=ROOT, env=environ, check=False).returncode
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if junit.is_file():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, "0"))
    return code, counts, time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="environments to run (default: all)")
    parser.add_argument("--reuse", action="store_true", help="keep an environment whose spec is unchanged")
    opts = parser.parse_args()
    names = opts.envs or sorted(p.name for p in ENVS.iterdir() if (p / "install.sh").is_file())
    unknown = [n for n in names if not (ENVS / n / "install.sh").is_file()]
    if unknown:
        parser.error(f"unknown environment(s) {unknown}; known: {sorted(p.name for p in ENVS.iterdir())}")
    VENVS.mkdir(exist_ok=True)

    failed_installs: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        for name, code, secs, tail in pool.map(lambda n: _install(n, reuse=opts.reuse), names):
            print(f"install {name}: {'ok' if code == 0 else f'FAILED ({code})'} in {secs:.0f} s", flush=True)
            if code:
                print(tail, flush=True)
                failed_installs.append(name)

    rows, passed, failed = [], 0, 0
    for name in names:
        if name in failed_installs:
            rows.append((name, "install failed", 0.0))
            failed += 1
            continue
        code, c, secs = _run(name)
        ok = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
        passed += ok
        failed += c["failures"] + c["errors"]
        status = f"{ok} passed, {c['failures'] + c['errors']} failed, {c['skipped']} skipped"
        if code != 0 or c["tests"] == 0:
            failed += 0 if c["failures"] + c["errors"] else 1
            status += f" (pytest exit {code}{', no test ran' if c['tests'] == 0 else ''})"
        rows.append((name, status, secs))

    print("\n=== summary")
    for name, status, secs in rows:
        print(f"{name:>12}: {status} [{secs:.0f} s]")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
