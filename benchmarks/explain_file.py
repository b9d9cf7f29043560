"""``corrgrpo explain`` on a large reward file against pyarrow's own reader of the same file.

    python -m benchmarks.explain_file                 # 1.9M rows, 238k groups, ~47 MB CSV (issue 28)
    python -m benchmarks.explain_file --format jsonl --rows 500000 --repeats 3

The file is generated into a temporary folder (never committed). Each repeat runs, in fresh
processes one after the other, pyarrow's reader alone (``pyarrow.csv.read_csv``, ``read_json`` or
``pyarrow.parquet.read_table`` of the whole file: what a user would otherwise run) and
``corrgrpo explain FILE --max-groups 3`` (``main()`` reading ``sys.argv``, as the console script
calls it), in two environments (``--threads``): ``default``, no thread count set, as a user runs
them (pyarrow reads with a thread per core; the command sets numpy's OpenBLAS to one thread
itself), and ``omp1``, ``OMP_NUM_THREADS=1`` (which pyarrow's thread pool honours too: both read
on one thread). Each process times itself from before its first import
to the end (``import pyarrow`` and the read for the baseline; the CLI's imports, the read and every
number for ``explain``); each also times its call alone, after its imports (``read_csv`` /
``corrgrpo explain``'s ``main``). The figures are the min over repeats, the ratios (process against
process, call against call) taken within this one run and environment, since the machine is shared
(the load average is printed beside each repeat); peak memory is the largest over repeats. The CPU
seconds of each process (user + system, every thread, from ``getrusage``) move less with the load
than its wall time. Python modules
are imported from bytecode, as from an installed package: the processes share a bytecode cache
in the temporary folder (``PYTHONPYCACHEPREFIX``), filled by one untimed run of each before the
first repeat (``--cold``: no cache, every import compiles its sources, which is what a process
under ``PYTHONDONTWRITEBYTECODE=1`` with sources never compiled pays). Peak memory is the
process's own high-water mark
(``VmHWM``: the interpreter and its libraries included); ``ru_maxrss`` is not used, since Linux
carries the parent's peak into a child across ``exec``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

_PEAK = (
    "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')];"
    "import resource; kib = hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
)
_EXPLAIN = (  # as the console script runs it: main() reads sys.argv
    "import sys, time; t = time.perf_counter();"
    "from corrgrpo_core.cli import main; c = time.perf_counter(); rc = main(); e = time.perf_counter();"
    + _PEAK
    + "print(f'@@ {e - t:.3f} {e - c:.3f} {kib}', file=sys.stderr); sys.exit(rc)"
)
_READ = {
    "csv": "import pyarrow.csv as r; read = r.read_csv",
    "tsv": "import pyarrow.csv as r; read = lambda p: r.read_csv(p, parse_options=r.ParseOptions(delimiter='\\t'))",
    "jsonl": "import pyarrow.json as r; read = r.read_json",
    "parquet": "import pyarrow.parquet as r; read = r.read_table",
}
_BASELINE = (
    "import sys, time; t = time.perf_counter(); {imports}; c = time.perf_counter();"
    "table = read(sys.argv[1]); e = time.perf_counter();"
    + _PEAK
    + "print(f'@@ {{e - t:.3f}} {{e - c:.3f}} {{kib}}', file=sys.stderr)"
)


def write_file(path: Path, rows: int, group_size: int, fmt: str, seed: int = 0) -> None:
    """Groups of ``group_size`` rows (``rows // group_size`` groups), three components: a float,
    a pass/fail and a float on another scale; rows of a group are shuffled through the file."""
    rng = np.random.default_rng(seed)
    groups = rows // group_size
    ids = rng.permutation(np.repeat(np.arange(groups), group_size))
    r1 = rng.random(ids.size).round(5)
    r2 = (rng.random(ids.size) < 0.5).astype(int)
    r3 = (rng.random(ids.size) * 10).round(4)
    chunk = 200_000
    sep = "\t" if fmt == "tsv" else ","
    with path.open("w") as handle:
        if fmt != "jsonl":
            handle.write(sep.join(["group", "r1", "r2", "r3"]) + "\n")
        for start in range(0, ids.size, chunk):
            part = slice(start, start + chunk)
            values = zip(ids[part], r1[part], r2[part], r3[part], strict=False)
            if fmt == "jsonl":
                lines = [f'{{"group":"p{g:06d}","r1":{a},"r2":{b},"r3":{c}}}\n' for g, a, b, c in values]
            else:
                lines = [f"p{g:06d}{sep}{a}{sep}{b}{sep}{c}\n" for g, a, b, c in values]
            handle.write("".join(lines))


# thread counts in the environment: "default" runs without them, as a user runs the command (pyarrow
# reads with a thread per core; explain sets numpy's OpenBLAS to one thread itself), "omp1" with
# OMP_NUM_THREADS=1, which pyarrow's thread pool honours too (both then read on one thread)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS")
ENVS = ("default", "omp1")


def child_env(cache: Path | None, threads: str = "default") -> dict[str, str]:
    """The processes' environment: thread counts as ``threads`` says (:data:`ENVS`); bytecode
    from ``cache`` (None: compiled anew)."""
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    if threads == "omp1":
        env["OMP_NUM_THREADS"] = "1"
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "explain-file-no-cache")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


Run = tuple[float, float, int, float, str]  # (wall s, the call's wall s, peak bytes, CPU s, stdout)

_STAGES = (  # the command's CPU seconds by stage, in one process (``--stages``)
    "import sys, time; t = time.process_time(); from corrgrpo_core.cli import main;"
    "imports = time.process_time() - t; from benchmarks.explain_file import stage_times;"
    "stage_times(main, imports, sys.argv[1:])"
)


def stage_times(main: Callable[[list[str]], int], imports: float, argv: list[str]) -> None:
    """Run ``main(argv)`` with its stages timed (CPU seconds of the process: pyarrow's threads
    too), printed one per line after ``@@``: the reader's parts, ``group_stats`` and its parts
    (the core's calls, each with the little around it)."""
    import contextlib
    import io as text

    import corrgrpo_core as cc
    import corrgrpo_core._group_stats as gs
    import corrgrpo_core.cli.io as cio

    spent = {"imports": imports}
    # (patched before the command imports cli.explain, which takes read_rewards by name)

    def timed(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - start

        setattr(owner, name, run)

    stages = (
        (cio, "read_rewards", "reading, all"),
        (cio, "read_columns", "  the read (pyarrow)"),
        (cio, "numeric_column", "  the numbers"),
        (cio, "label_groups", "  the group labels and order"),
        (cc, "group_stats", "group_stats, all"),
        (gs, "advantage_stats", "  advantage_stats (the core)"),
        (gs, "prepare", "  prepare (the core; within the next four too)"),
        (gs._Prepared, "advantages", "  group-local estimators (with their output)"),
        (gs._Prepared, "add_sums", "  the passes' batch sums"),
        (gs._Prepared, "rows", "  the passes' row values (with their copy)"),
        (gs, "_finish", "  the passes' batch-level rest"),
        (gs, "_matrices", "  display matrices"),
    )
    for owner, name, label in stages:
        timed(owner, name, label)
    start = time.process_time()
    with contextlib.redirect_stdout(text.StringIO()):
        main(argv)
    spent["the command (main), all"] = time.process_time() - start
    for label in ["imports", *(label for *_, label in stages), "the command (main), all"]:
        print(f"@@ {label}\t{spent.get(label, 0.0):.3f}", file=sys.stderr)


def run_stages(path: Path, env: dict[str, str], repeats: int) -> None:
    """:func:`stage_times` in ``repeats`` fresh processes: the min of each stage."""
    found: dict[str, list[float]] = {}
    for _ in range(repeats):
        proc = subprocess.run(
            [sys.executable, "-c", _STAGES, "explain", str(path), "--max-groups", "3"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        for line in proc.stderr.splitlines():
            if line.startswith("@@ "):
                label, seconds = line[3:].split("\t")
                found.setdefault(label, []).append(float(seconds))
    print(f"CPU seconds by stage, min of {repeats} processes (load average {os.getloadavg()[0]:.2f}):")
    for label, values in found.items():
        print(f"  {label:40s} {min(values):.3f}")


def run_once(code: str, *argv: str, env: dict[str, str]) -> Run:
    """Wall seconds (from the first import, and of the read alone), peak RSS bytes and CPU seconds
    (user + system, every thread) of a process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed:\n{proc.stderr}")
    marker = next(line for line in proc.stderr.splitlines() if line.startswith("@@"))
    _, seconds, call, kib = marker.split()
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return float(seconds), float(call), int(kib) * 1024, cpu, proc.stdout


def summarise(name: str, reads: list[Run], explains: list[Run], size: int) -> None:
    """The min over repeats of each figure, and the ratios within this run."""
    read_t, read_call = min(r[0] for r in reads), min(r[1] for r in reads)
    read_m = min(r[2] for r in reads)
    best_t, best_call = min(e[0] for e in explains), min(e[1] for e in explains)
    best_m = max(e[2] for e in explains)
    paired = sorted(e[0] / r[0] for r, e in zip(reads, explains, strict=True))
    calls = sorted(e[1] / r[1] for r, e in zip(reads, explains, strict=True))
    print(
        f"min, {name}: explain's process {best_t:.2f} s = {best_t / read_t:.1f}x pyarrow's ({read_t:.2f} s), "
        f"per repeat {', '.join(f'{p:.1f}x' for p in paired)}; explain's call {best_call:.2f} s = "
        f"{best_call / read_call:.1f}x the read call ({read_call:.2f} s), per repeat "
        f"{', '.join(f'{p:.1f}x' for p in calls)}; peak RSS (largest) {best_m / 1e6:.0f} MB = "
        f"{best_m / size:.2f}x the file (pyarrow's process {read_m / 1e6:.0f} MB = {read_m / size:.2f}x); "
        f"load average now {os.getloadavg()[0]:.2f}"
    )
    read_cpu, explain_cpu = min(r[3] for r in reads), min(e[3] for e in explains)
    print(f"min CPU seconds, {name}: explain {explain_cpu:.2f}, pyarrow's process {read_cpu:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_904_000)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--format", choices=tuple(_READ), default="csv")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="no bytecode cache: every import compiles")
    parser.add_argument(
        "--threads",
        choices=(*ENVS, "both"),
        default="both",
        help="thread counts in the environment: none (default, as a user runs it), OMP_NUM_THREADS=1, or both",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="then the command's CPU seconds by stage (one process each repeat)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"rewards.{args.format}"
        start = time.perf_counter()
        if args.format == "parquet":
            import pyarrow.csv as pcsv
            import pyarrow.parquet as pq

            write_file(Path(tmp) / "r.csv", args.rows, args.group_size, "csv")
            pq.write_table(pcsv.read_csv(Path(tmp) / "r.csv"), path)
        else:
            write_file(path, args.rows, args.group_size, args.format)
        size = path.stat().st_size
        print(
            f"{path.name}: {args.rows} rows, {args.rows // args.group_size} groups, {size / 1e6:.1f} MB "
            f"(written in {time.perf_counter() - start:.1f} s); {os.cpu_count()} CPUs; "
            + ("no bytecode cache" if args.cold else "bytecode cached")
        )
        baseline = _BASELINE.format(imports=_READ[args.format])
        explain = ("explain", str(path), "--max-groups", "3")
        cache = None if args.cold else Path(tmp) / "pycache"
        envs = {name: child_env(cache, name) for name in (ENVS if args.threads == "both" else [args.threads])}
        if not args.cold:  # one untimed run of each fills the bytecode cache
            run_once(baseline, str(path), env=envs[next(iter(envs))])
            run_once(_EXPLAIN, *explain, env=envs[next(iter(envs))])
        runs: dict[str, tuple[list[Run], list[Run]]] = {name: ([], []) for name in envs}
        for i in range(args.repeats):
            for name, env in envs.items():
                load = os.getloadavg()[0]
                reads, explains = runs[name]
                reads.append(run_once(baseline, str(path), env=env))
                explains.append(run_once(_EXPLAIN, *explain, env=env))
                (r, rc, rm, rcpu, _), (e, ec, em, ecpu, _) = reads[-1], explains[-1]
                print(
                    f"  repeat {i + 1}, {name} (load average {load:.2f}): pyarrow {r:.2f} s (the read call "
                    f"{rc:.2f} s, CPU {rcpu:.2f} s), peak {rm / 1e6:.0f} MB; explain {e:.2f} s (the call "
                    f"{ec:.2f} s, CPU {ecpu:.2f} s), peak {em / 1e6:.0f} MB"
                )
        for name, (reads, explains) in runs.items():
            summarise(name, reads, explains, size)
        print(explains[-1][4].splitlines()[0])
        if args.stages:
            run_stages(path, envs[next(iter(envs))], args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
