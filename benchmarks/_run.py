"""Timing, memory and ratios for one grid of cases."""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import corrgrpo_core as cc

from ._data import Case, make_case
from ._loop import LOOPS

ESTIMATORS = ("grpo", "corrgrpo", "gdpo", "gdpo_corr")
BACKENDS = ("numpy", "torch", "torch-cuda", "jax")


@dataclass
class Row:
    backend: str
    layout: str
    k: int
    n: int
    estimator: str
    dtype: str
    median_s: float
    rows_per_s: float
    ns_per_row: float
    peak_extra_bytes: float | None  # None where the backend has no allocator statistics
    peak_extra_x_input: float | None
    floor_s: float  # one copy of the input on the same backend
    x_floor: float  # median_s / floor_s
    loop_s: float | None = None  # the reference's loop: per-group torch ops on the CPU
    x_loop: float | None = None  # loop_s / median_s (speed-up)
    loop_numpy_s: float | None = None  # the same loop with per-group numpy ops (cheaper calls)
    x_loop_numpy: float | None = None
    max_abs_diff_vs_numpy: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend:
    """Moves a case to one backend and times calls there."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cuda = name == "torch-cuda"
        if name.startswith("torch"):
            import torch

            if self.cuda and not torch.cuda.is_available():
                raise RuntimeError("torch-cuda: no CUDA device")
            self.torch = torch
        elif name == "jax":
            import jax

            jax.config.update("jax_enable_x64", True)
            self.jax = jax
        elif name != "numpy":
            raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")

    def put(self, a: np.ndarray | None) -> Any:
        if a is None:
            return None
        if self.name.startswith("torch"):
            t = self.torch.from_numpy(np.ascontiguousarray(a))
            return t.cuda() if self.cuda else t
        if self.name == "jax":
            return self.jax.device_put(a)
        return a

    def block(self, out: Any) -> None:
        if self.name == "jax":
            self.jax.block_until_ready(out)

    def copy(self, x: Any) -> Any:
        if self.name.startswith("torch"):
            return x.clone()
        if self.name == "jax":
            return self.jax.numpy.array(x, copy=True)
        return x.copy()

    def time(self, fn: Callable[[], Any], *, min_repeat: int, budget_s: float) -> float:
        """Median seconds of fn() after one warm-up call (CUDA: events, one sync per call, after it)."""
        self.block(fn())
        times: list[float] = []
        spent = 0.0
        while len(times) < min_repeat or (spent < budget_s and len(times) < 50):
            if self.cuda:
                start = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                t = start.elapsed_time(end) / 1e3
            else:
                t0 = time.perf_counter()
                self.block(fn())
                t = time.perf_counter() - t0
            times.append(t)
            spent += t
        return statistics.median(times)

    def peak_extra(self, fn: Callable[[], Any]) -> float | None:
        """Bytes allocated at the peak of fn() beyond what was live before (numpy, CUDA)."""
        gc.collect()
        if self.name == "numpy":
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                out = fn()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            del out
            return float(peak - before)
        if self.cuda:
            self.torch.cuda.synchronize()
            before = self.torch.cuda.memory_allocated()
            self.torch.cuda.reset_peak_memory_stats()
            out = fn()
            self.torch.cuda.synchronize()
            del out
            return float(self.torch.cuda.max_memory_allocated() - before)
        return None


def estimator_call(estimator: str, case: Case, backend: Backend) -> Callable[[], Any]:
    scores, ids = backend.put(case.scores), backend.put(case.ids)
    fn = cc.get_estimator(estimator).fn
    if backend.name == "jax":
        import jax

        jitted = jax.jit(lambda s, i: fn(s, i)) if ids is not None else jax.jit(lambda s: fn(s))
        return (lambda: jitted(scores, ids)) if ids is not None else (lambda: jitted(scores))
    return (lambda: fn(scores, ids)) if ids is not None else (lambda: fn(scores))


def _time_loop(estimator: str, lib: str, case: Case, repeats: int = 3) -> float | None:
    """Least seconds of ``repeats`` calls of the loop baseline on the CPU (after a warm-up call)."""
    x: Any = case.flat
    if lib == "torch":
        try:
            import torch
        except ImportError:
            return None
        x = torch.from_numpy(np.ascontiguousarray(x))
    loop = LOOPS[estimator]
    loop(x, case.flat_ids)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        loop(x, case.flat_ids)
        best = min(best, time.perf_counter() - t0)
    return best


def _to_numpy(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy().reshape(-1)
    return np.asarray(a).reshape(-1)


def warm_allocator() -> None:
    """Allocate and free a 16 MiB block, as any process that has held a large array has done.

    glibc then serves blocks up to that size from its heap and keeps freed pages, instead of
    mapping fresh zeroed pages on every call: in this VM each fresh 4 KiB page costs about 5 us,
    more than the arithmetic on it, and a short benchmark would otherwise time the kernel's page
    faults (a long-running trainer has raised these thresholds long before). ``--cold-malloc``
    skips this.
    """
    block = np.ones(2**21)
    del block


def run(
    *,
    ns: Iterable[int],
    ks: Iterable[int],
    layouts: Iterable[str],
    estimators: Iterable[str] = ESTIMATORS,
    backends: Iterable[str] = ("numpy",),
    dtype: str = "float64",
    loop_max: int = 131_072,
    min_repeat: int = 3,
    budget_s: float = 0.3,
    memory: bool = True,
    cold_malloc: bool = False,
    log: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Measure every (backend, layout, K, N, estimator); ratios come from the same process and run."""
    rows: list[Row] = []
    if not cold_malloc:
        warm_allocator()
    live = [Backend(b) for b in backends]
    for layout in layouts:
        for k in ks:
            for n in ns:
                case = make_case(layout, n, k, dtype=dtype)
                reference: dict[str, np.ndarray] = {}
                loops: dict[tuple[str, str], float | None] = {}
                for backend in live:
                    x = backend.put(case.scores)
                    floor = backend.time(
                        lambda x=x, b=backend: b.copy(x), min_repeat=min_repeat, budget_s=budget_s
                    )
                    for est in estimators:
                        call = estimator_call(est, case, backend)
                        t = backend.time(call, min_repeat=min_repeat, budget_s=budget_s)
                        peak = backend.peak_extra(call) if memory else None
                        size = case.scores.nbytes
                        row = Row(
                            backend=backend.name,
                            layout=layout,
                            k=k,
                            n=case.rows,
                            estimator=est,
                            dtype=dtype,
                            median_s=t,
                            rows_per_s=case.rows / t,
                            ns_per_row=t / case.rows * 1e9,
                            peak_extra_bytes=peak,
                            peak_extra_x_input=None if peak is None else peak / size,
                            floor_s=floor,
                            x_floor=t / floor,
                        )
                        out = _to_numpy(call())
                        if backend.name == "numpy":
                            reference[est] = out
                        elif est in reference:
                            row.max_abs_diff_vs_numpy = float(
                                np.max(np.abs(out - reference[est]), initial=0.0)
                            )
                        if case.rows <= loop_max:
                            for lib in ("torch", "numpy"):
                                if (est, lib) not in loops:
                                    loops[(est, lib)] = _time_loop(est, lib, case)
                            row.loop_s, row.loop_numpy_s = loops[(est, "torch")], loops[(est, "numpy")]
                            row.x_loop = None if row.loop_s is None else row.loop_s / t
                            row.x_loop_numpy = None if row.loop_numpy_s is None else row.loop_numpy_s / t
                        rows.append(row)
                        if log is not None:
                            log(row)
    return rows
