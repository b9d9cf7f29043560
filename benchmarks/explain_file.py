"""``corrgrpo explain`` on a large reward file: wall time and peak memory against the file's size.

    python -m benchmarks.explain_file                 # 1.9M rows, 238k groups, ~50 MB CSV (issue 17)
    python -m benchmarks.explain_file --format jsonl --rows 500000 --repeats 3

The file is generated into a temporary folder (never committed), then ``corrgrpo explain`` runs in a
fresh process per repeat; the numbers are the min over repeats of its wall time and of its peak
resident memory (the child's own high-water mark, ``VmHWM``: the interpreter and its libraries
included). ``ru_maxrss`` is not used: Linux carries the parent's peak into a child across
``exec``, so a child of this (large) generating process would report the parent's memory. The
load average is printed with them because the machine is shared. A Parquet file is much smaller
than the same rows as CSV, so its peak is also given against that CSV's size.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


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
    with path.open("w") as handle:
        if fmt == "csv":
            handle.write("group,r1,r2,r3\n")
        for start in range(0, ids.size, chunk):
            part = slice(start, start + chunk)
            if fmt == "csv":
                lines = [
                    f"p{g:06d},{a},{b},{c}\n"
                    for g, a, b, c in zip(ids[part], r1[part], r2[part], r3[part], strict=False)
                ]
            else:
                lines = [
                    f'{{"group":"p{g:06d}","r1":{a},"r2":{b},"r3":{c}}}\n'
                    for g, a, b, c in zip(ids[part], r1[part], r2[part], r3[part], strict=False)
                ]
            handle.write("".join(lines))


def run_once(path: Path) -> tuple[float, int, str]:
    """Wall seconds and peak RSS bytes of one ``corrgrpo explain`` process."""
    code = (
        "import resource, sys, time; t = time.perf_counter();"
        "from corrgrpo_core.cli import main; rc = main(sys.argv[1:]); s = time.perf_counter() - t;"
        "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')];"
        "kib = hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "print(f'@@ {s:.3f} {kib}', file=sys.stderr); sys.exit(rc)"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", code, "explain", str(path), "--max-groups", "3"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"corrgrpo explain failed:\n{proc.stderr}")
    marker = next(line for line in proc.stderr.splitlines() if line.startswith("@@"))
    _, seconds, kib = marker.split()
    return float(seconds), int(kib) * 1024, proc.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_904_000)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--format", choices=("csv", "jsonl", "parquet"), default="csv")
    parser.add_argument("--repeats", type=int, default=3)
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
        as_csv = (Path(tmp) / "r.csv").stat().st_size if args.format == "parquet" else size
        print(
            f"{path.name}: {args.rows} rows, {args.rows // args.group_size} groups, {size / 1e6:.1f} MB "
            f"(written in {time.perf_counter() - start:.1f} s)"
            + (f"; the same rows as CSV: {as_csv / 1e6:.1f} MB" if as_csv != size else "")
        )
        runs = []
        for i in range(args.repeats):
            load = os.getloadavg()[0]
            seconds, peak, out = run_once(path)
            runs.append((seconds, peak))
            print(f"  run {i + 1}: {seconds:.2f} s, peak RSS {peak / 1e6:.0f} MB, load average {load:.2f}")
        best_t = min(t for t, _ in runs)
        best_m = min(m for _, m in runs)
        tiny = Path(tmp) / f"tiny.{args.format}"
        if args.format == "parquet":
            pq.write_table(pcsv.read_csv(Path(tmp) / "r.csv").slice(0, 80), tiny)
        else:
            write_file(tiny, 80, args.group_size, args.format)
        _, floor, _ = run_once(tiny)
        csv_ratio = f" ({best_m / as_csv:.2f}x the same rows as CSV)" if as_csv != size else ""
        print(
            f"min: {best_t:.2f} s, peak RSS {best_m / 1e6:.0f} MB = {best_m / size:.2f}x the file{csv_ratio}; "
            f"the same command on an 80-row file: {floor / 1e6:.0f} MB (interpreter, numpy, pyarrow, the "
            f"core), so the file itself costs {(best_m - floor) / 1e6:.0f} MB = {(best_m - floor) / size:.2f}x "
            f"(load average now {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)"
        )
        print(out.splitlines()[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
