"""Throughput of the sandboxed code reward, sandbox start-up cost, and parser cost on adversarial input.

Run from the repository root (the machine's load average is printed before and after: the figures are
only comparable between runs on an equally loaded machine, so compare implementations in one run)::

    OMP_NUM_THREADS=1 PYTHONPATH=tasks python benchmarks/code_reward_throughput.py \
        [--samples 500] [--repeats 3] [--workers 2] [--baseline /path/to/other/checkout/tasks]

``--baseline`` scores the same batch with another checkout's ``corrgrpo_tasks`` (in a subprocess),
alternating with this one, so both see the same machine; each side reports its best repeat, also as
samples scored per bare interpreter start (``python -S -B -c pass``, median of 20 measured in the same
run): the figure that stays comparable when the machine's load changes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

# This checkout's tasks/ first, whatever is installed in the environment (before anything imports it).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks"))


def _load_test_mix() -> tuple[str, dict[str, str]]:
    """The ground truth and the kinds of completion of ``tests/tasks/code/test_load.py`` (one mix)."""
    import importlib.util

    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "tasks", "code", "test_load.py"
    )
    spec = importlib.util.spec_from_file_location("_code_load_mix", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GT, dict(module.KINDS)


GT, KINDS = _load_test_mix()
HANG = "```python\nclass Solution:\n    def solve(self, n):\n        while True: pass\n```"

_BATCH = """
import json, sys, time
from corrgrpo_tasks.code import score_batch
texts, gt, workers = json.loads(sys.stdin.read())
start = time.perf_counter()
scores = score_batch(texts, [gt] * len(texts), timeout_seconds=2.0, max_workers=workers)
print(json.dumps([time.perf_counter() - start, [s["accuracy_reward"] for s in scores]]))
"""


def batch(samples: int) -> tuple[list[str], list[float]]:
    names = [list(KINDS)[i % len(KINDS)] for i in range(samples - 2)] + ["hang", "hang"]
    return [KINDS.get(n, HANG) for n in names], [float(n == "correct") for n in names]


def run_batch(tasks_dir: str, texts: list[str], workers: int) -> tuple[float, list[float]]:
    env = {**os.environ, "PYTHONPATH": tasks_dir, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _BATCH],
        input=json.dumps([texts, GT, workers]),
        text=True,
        capture_output=True,
        env=env,
        check=True,
    )
    seconds, accuracy = json.loads(done.stdout.strip().splitlines()[-1])
    return float(seconds), accuracy


def startup(repeats: int = 20) -> dict[str, float]:
    from corrgrpo_tasks.sandbox import Sandbox

    box = Sandbox()
    bare: list[float] = []
    boxed: list[float] = []
    for _ in range(repeats):  # interleaved, min of each
        start = time.perf_counter()
        subprocess.run([box.python, "-S", "-B", "-c", "pass"], check=True)
        bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        result = box.run("pass")
        boxed.append(time.perf_counter() - start)
        assert result.ok, result
    return {
        "bare_interpreter_ms": 1000 * min(bare),
        "sandbox_ms": 1000 * min(boxed),
        "bare_interpreter_median_ms": 1000 * sorted(bare)[len(bare) // 2],
        "sandbox_median_ms": 1000 * sorted(boxed)[len(boxed) // 2],
    }


def parsers() -> dict[str, float]:
    from corrgrpo_tasks.code import extract_code

    mb = 1 << 20
    shapes = {
        "blank_lines": " \n" * (mb // 2),
        "open_fences": "```\n" * (mb // 4),
        "backticks": "`" * mb,
        "fence_then_spaces": "```" + " " * mb,
        "unclosed_fence": "```python\n" + "x" * mb,
        "newlines_then_name": "\n" * mb + "Solution",
        "open_tool_calls": "<tool_call>" * (mb // 11),
        "deep_json_call": "<tool_call>" + "[" * mb + "</tool_call>",
    }
    funcs: list[tuple[str, Any]] = [("extract_code", extract_code)]
    try:
        from corrgrpo_tasks.agent_security import tool_call_format_is_valid
        from corrgrpo_tasks.tool_calling import compute_score as tool_score

        funcs += [
            ("tool_call_format_is_valid", tool_call_format_is_valid),
            (
                "tool_calling.compute_score",
                lambda t: tool_score("rlla", t, "<think>x</think>\n<response>r</response>"),
            ),
        ]
    except ImportError:  # the agent-security package needs its optional dependencies
        pass
    worst = {}
    for name, func in funcs:
        costs = []
        for text in shapes.values():
            start = time.process_time()
            func(text)
            costs.append(time.process_time() - start)
        worst[f"{name}_worst_ms_per_MB"] = 1000 * max(costs)
    return worst


_PAGES = """
import json, mmap, os, sys, time
path, mode, first, bits = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
pages = mmap.mmap(os.open(path, os.O_RDONLY), 0, prot=mmap.PROT_READ)
pages.madvise(mmap.MADV_RANDOM)  # no readahead: one page per fault
start, touches = time.perf_counter(), []
for i, bit in enumerate(bits):
    if mode == "write":
        if bit:
            pages[(first + i) * 4096]
    else:
        t = time.perf_counter_ns()
        pages[(first + i) * 4096]
        touches.append(time.perf_counter_ns() - t)
print(json.dumps([time.perf_counter() - start, touches]))
"""


def page_cache_channel(path: str, bits: int, first_page: int, private: bool = False) -> dict[str, float]:
    """The host page cache as a channel between two sandboxed runs, with the filters in place: the first
    run touches the pages of ``path`` whose bit is 1, a later one times one touch per page (a minor fault
    against a major one). Needs pages of ``path`` from ``first_page`` on that nobody has read. ``private``:
    both runs get the judge servers' private file view (``Sandbox.start(private_files=True)``)."""
    import random

    from corrgrpo_tasks.sandbox import Limits, Sandbox

    box = Sandbox()
    rng = random.Random(7)
    message = [rng.randint(0, 1) for _ in range(bits)]
    runs = []
    for mode in ("write", "read"):
        done = box.start(
            _PAGES,
            argv=(path, mode, str(first_page), json.dumps(message)),
            limits=Limits(wall_seconds=60),
            private_files=private,
        ).wait()
        if not done.ok:
            raise SystemExit(f"the {mode} run failed: {done.stderr[-300:]}")
        runs.append(json.loads(done.stdout))
    (write_seconds, _), (read_seconds, touches) = runs
    cached = sorted(t for t, b in zip(touches, message, strict=True) if b)
    uncached = sorted(t for t, b in zip(touches, message, strict=True) if not b)
    threshold = (cached[len(cached) // 2] + uncached[len(uncached) // 2]) / 2
    errors = sum(int(t < threshold) != b for t, b in zip(touches, message, strict=True))
    return {
        "bits": bits,
        "bit_errors": errors,
        "reader_bits_per_s": round(bits / read_seconds),
        "writer_bits_per_s": round(bits / write_seconds),
        "median_touch_cached_ns": cached[len(cached) // 2],
        "median_touch_uncached_ns": uncached[len(uncached) // 2],
    }


def _load() -> list[str]:
    with open("/proc/loadavg") as handle:
        return handle.read().split()[:3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--baseline", help="another checkout's tasks/ directory, scored alternately")
    parser.add_argument(
        "--page-cache-channel",
        nargs=3,
        metavar=("FILE", "BITS", "FIRST_PAGE"),
        help="only measure the page-cache channel between two sandboxed runs (residual risk) and exit",
    )
    parser.add_argument(
        "--private-files", action="store_true", help="the channel's runs get the private file view"
    )
    args = parser.parse_args()
    if args.page_cache_channel:
        path, bits, first = args.page_cache_channel
        print("load average before:", _load())
        channel = page_cache_channel(path, int(bits), int(first), private=args.private_files)
        print("page-cache channel:", channel)
        print("load average after:", _load())
        return
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks")
    print("load average before:", _load())
    texts, expected = batch(args.samples)
    sides = {"this": here, **({"baseline": args.baseline} if args.baseline else {})}
    best: dict[str, float] = {}
    for _ in range(args.repeats if args.samples > 0 else 0):
        for side, path in sides.items():
            seconds, accuracy = run_batch(path, texts, args.workers)
            if accuracy != expected:
                raise SystemExit(f"{side}: wrong accuracies")
            best[side] = min(best.get(side, float("inf")), seconds)
            print(
                f"  {side}: {args.samples} samples in {seconds:.1f} s = {args.samples / seconds:.1f} samples/s",
                flush=True,
            )
    start = startup()
    for side, seconds in best.items():
        rate = args.samples / seconds
        # Throughput in units of the machine's own speed: samples scored in the time of one bare
        # interpreter start (median and min of 20), comparable between runs at different loads.
        relative = rate * start["bare_interpreter_median_ms"] / 1000
        fastest = rate * start["bare_interpreter_ms"] / 1000
        print(
            f"best {side}: {rate:.1f} samples/s ({args.workers} workers, {len(os.sched_getaffinity(0))} cores)"
            f" = {relative:.2f} samples per bare start (median; {fastest:.2f} per fastest start)"
        )
    print("start-up (min of 20 interleaved):", {k: round(v, 1) for k, v in start.items()})
    print(
        "parsers on 1 MB adversarial shapes (process time):", {k: round(v, 1) for k, v in parsers().items()}
    )
    print("load average after:", _load())


if __name__ == "__main__":
    main()
