"""Fixed cost of one advantage call in TRL's layout: a small ``(N, K)`` torch float32 batch.

``python -m benchmarks.fixed_cost [--n 64] [--group 8] [--markdown FILE]`` (TRL installed, for its
adapter) prints, for ``grpo`` (K = 1 and 3) and ``corrgrpo`` (K = 3) through
``corrgrpo_adapters.trl``'s ``group_advantages``, with the load average, date and tree:

- *tight loop*: the 10th percentile of 500 back-to-back calls, the minimum over 20 rounds (robust
  to other processes on the machine: a call is far shorter than a scheduler slice);
- *after torch*: the minimum over 300 rounds of one call made right after TRL's own advantage
  lines (torch ops), which is what ``python -m benchmarks.frameworks trl`` measures for the call
  that follows them: numpy's code paths are then cold;
- *x TRL*: the tight loop over TRL's own lines' tight loop, in the same run.

and then every registered estimator called directly on a ``(B, n, K)`` batch (K = 3) as a numpy
float64 array and as a torch float32 CPU tensor, in the tight loop.

``--instructions`` counts instead the CPU instructions that one numpy float64 call of each estimator
executes (valgrind's callgrind, only the loop of calls collected, the mean over 200 calls after 20
warm-up calls; not torch, whose import alone takes minutes under valgrind): a figure that does not
move with the load of the machine (times on a shared 2-core machine move by tens of percent), for
comparing two trees (``PYTHONPATH`` set to the other tree's ``src`` and ``adapters``). About 20 s a row.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._provenance import RunRecord


def _tight(fn: Callable[[], Any], rounds: int = 20, calls: int = 500) -> float:
    best = float("inf")
    for _ in range(rounds):
        times = []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - t0)
        times.sort()
        best = min(best, times[len(times) // 10] / 1e3)
    return best


def _after(fn: Callable[[], Any], before: Callable[[], Any], rounds: int = 300) -> float:
    best = float("inf")
    for _ in range(rounds):
        before()
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - t0) / 1e3)
    return best


def _direct(n: int, group: int, k: int = 3) -> list[str]:
    """Every registered estimator called directly on a ``(n / group, group, k)`` batch: numpy float64
    and torch float32 on the CPU, tight loop."""
    import numpy as np
    import torch

    import corrgrpo_core as cc

    rng = np.random.default_rng(0)
    x = rng.random((n // group, group, k))
    x[..., 1::2] = x[..., 1::2] < 0.5
    batches = {"numpy": x, "torch": torch.from_numpy(x.astype(np.float32))}
    lines = ["", "| estimator | numpy float64 us | torch float32 us |", "|---|---|---|"]
    print("\n".join(lines))
    for name in cc.estimator_names():
        fn = cc.get_estimator(name).fn
        us = [_tight(lambda fn=fn, b=b: fn(b), rounds=10, calls=300) for b in batches.values()]
        lines.append(f"| {name} | {us[0]:.1f} | {us[1]:.1f} |")
        print(lines[-1])
    return lines


def profile(name: str, k: int, n: int = 64, group: int = 8, calls: int = 3000) -> list[str]:
    """Where a call's time goes: cProfile's own time per module (and per numpy/torch builtin) over
    ``calls`` numpy float64 calls of estimator ``name`` on ``(n / group, group, k)``, as shares."""
    import cProfile
    import pstats
    from collections import Counter

    import numpy as np

    import corrgrpo_core as cc

    rng = np.random.default_rng(0)
    x = rng.random((n // group, group, k))
    fn = cc.get_estimator(name).fn
    for _ in range(100):
        fn(x)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn(x)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    own: Counter[str] = Counter()
    ncalls = 0
    for (file, _, _), (_, nc, tt, _, _) in stats.items():
        where = (
            file.split("/src/")[-1]
            if "corrgrpo_core" in file
            else ("numpy / builtins" if file == "~" else "python: " + file.rsplit("/", 1)[-1])
        )
        own[where] += tt
        ncalls += nc
    total = sum(own.values())
    lines = [
        "",
        f"profile of {name} (K = {k}, numpy float64, {n} rows): {ncalls / calls:.0f} function calls per call",
        "| where | share of the time |",
        "|---|---|",
    ]
    lines += [f"| {w} | {t / total:.0%} |" for w, t in own.most_common(12)]
    print("\n".join(lines))
    return lines


# The loop callgrind counts: the calls run through itertools.starmap, whose C function ``starmap_next``
# toggles collection on and off around each call (nothing before or after the loop is counted).
_LOOP = """
import itertools, sys, numpy as np
import corrgrpo_core as cc
name, calls = sys.argv[1], int(sys.argv[2])
x = np.random.default_rng(0).random((8, 8, 3))
x[..., 1::2] = x[..., 1::2] < 0.5
fn = cc.get_estimator(name).fn
for _ in range(20):
    fn(x)
for _ in itertools.starmap(fn, itertools.repeat((x,), calls)):
    pass
"""


def instructions(name: str, calls: int = 200) -> float:
    """CPU instructions per call of estimator ``name`` on an ``(8, 8, 3)`` numpy float64 batch.
    (numpy only: torch's import alone takes minutes under valgrind.)"""
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=starmap_next"]
    cmd += ["--callgrind-out-file=/dev/null", sys.executable, "-c", _LOOP, name, str(calls)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
    found = re.search(r"Collected : (\d+)", out)
    if found is None:
        raise RuntimeError(f"callgrind reported no count: {out[-500:]}")
    return int(found.group(1)) / calls


def instruction_table() -> list[str]:
    """:func:`instructions` of every registered estimator."""
    import corrgrpo_core as cc

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    lines = ["| estimator | instructions per call, numpy float64 (8, 8, 3) |", "|---|---|"]
    print("\n".join(lines))
    for name in cc.estimator_names():
        lines.append(f"| {name} | {instructions(name) / 1e3:.0f}k |")
        print(lines[-1])
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=64, help="rows (default 64)")
    p.add_argument("--group", type=int, default=8, help="group size (default 8)")
    p.add_argument("--markdown", type=Path, help="also write the table, with load, date and tree, here")
    p.add_argument("--profile", action="store_true", help="only profile a 64-row grpo and corrgrpo call")
    p.add_argument(
        "--instructions", action="store_true", help="count instructions per call (valgrind) instead of timing"
    )
    args = p.parse_args(argv)
    if args.instructions:
        record = RunRecord.start()
        lines = instruction_table()
        record.finish()
        tail = f"\nCPU instructions per call (callgrind, mean of 200 calls); {record.footer()}"
        print(tail)
        if args.markdown is not None:
            args.markdown.write_text("\n".join(lines) + "\n" + tail + "\n")
        return 0
    if args.profile:
        profile("grpo", 1, args.n, args.group)
        profile("corrgrpo", 3, args.n, args.group)
        return 0

    import numpy as np
    import torch

    from benchmarks.frameworks import trl_lines
    from corrgrpo_adapters.trl import group_advantages

    torch.set_num_threads(1)
    record = RunRecord.start()
    lines = ["| call | K | tight loop us | right after TRL's lines us | x TRL |", "|---|---|---|---|---|"]
    print("\n".join(lines))
    for name, k, options in (("grpo", 1, {"eps": 1e-4}), ("grpo", 3, {"eps": 1e-4}), ("corrgrpo", 3, {})):
        rng = np.random.default_rng(0)
        x = torch.from_numpy(rng.random((args.n, k)).astype(np.float32))
        x[:, 1::2] = (x[:, 1::2] < 0.5).float()  # binary components, as pass/fail rewards
        w = torch.ones(k)

        def call(x: Any = x, name: str = name, options: dict[str, float] = options) -> Any:
            return group_advantages(x, args.group, estimator=name, options=options)

        def trl(x: Any = x, w: Any = w) -> Any:
            return trl_lines(x, w, args.group)

        call()
        ours, theirs = _tight(call), _tight(trl)
        lines.append(f"| {name} | {k} | {ours:.1f} | {_after(call, trl):.1f} | {ours / theirs:.2f} |")
        print(lines[-1])
    lines += _direct(args.n, args.group)
    record.finish()
    tail = (
        f"\nN = {args.n}, groups of {args.group}, torch float32 on the CPU, through "
        f"corrgrpo_adapters.trl.group_advantages; {record.footer()}"
    )
    print(tail)
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines) + "\n" + tail + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
