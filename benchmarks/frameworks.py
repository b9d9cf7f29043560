"""Side by side with what users would otherwise run, in the frameworks' own input formats.

``python -m benchmarks.frameworks verl`` (in an environment with verl 0.9.1) and
``python -m benchmarks.frameworks trl`` (with TRL 1.16) print one markdown table each. Every figure is
the minimum over ``--repeats`` interleaved rounds (each round calls every function of a case once,
in turn), so a burst of load on the shared machine hits all of them alike; every ratio is taken
in the same process against the row's baseline. The load average before and after is printed.

verl cases: N rows in groups of 8 with uuid4 strings as ``index`` (a numpy object array, each
prompt's rows adjacent as verl lays them out, or shuffled), ``(N, L)`` float32 token rewards with
the outcome on the last response token, a right-padded int64 response mask of random lengths
(verl's own dtype), three reward components in ``non_tensor_batch``. Rows: verl's
``compute_grpo_vectorized_outcome_advantage`` (the baseline), its per-row loop
``compute_grpo_outcome_advantage``, its GDPO, the reference CorrGRPO as written
(:mod:`benchmarks._reference`), our estimators called through verl's registry end to end
(labels, statistics and the token broadcast), the memory floor (:func:`memory_floor` of the token
rewards) and the traffic floor (:func:`traffic_floor`: the least any call in verl's format does).

TRL cases: TRL's gathered ``(N, K)`` float32 reward matrix, groups of 8. Rows: TRL's own lines of
``_generate_and_score_completions`` (``sum_then_normalize``, ``scale_rewards="group"``: nansum of
the weighted rewards, group nanmean and TRL's ``nanstd`` over ``view(-1, G)``, ``repeat_interleave``,
the division, ``nan_to_num``; the baseline), our grpo and corrgrpo through the TRL adapter's
``group_advantages`` (what the trainer calls), and the memory floor (:func:`memory_floor`).

Peak memory is the rise of the process's resident set (VmHWM, reset through /proc/self/clear_refs)
during one call, above what was resident before it, measured in a subprocess whose allocator
returns freed blocks (:data:`MEMORY_ENV`); it needs Linux, and a kernel whose high-water mark sees
a block freed before it is read (a probe checks; the column reads "-" otherwise). With
``--device cuda`` the tensors live on the GPU, each call is followed by a synchronisation, and peak
memory is the caching allocator's ``max_memory_allocated`` above what was allocated before the call.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._provenance import RunRecord

GROUP = 8


@dataclass
class Result:
    suite: str
    case: str
    n: int
    size: int  # L (verl) or K (TRL)
    call: str
    min_s: float
    x_baseline: float | None = None  # min_s / the baseline's min_s
    peak_extra_mb: float | None = None
    peak_x_input: float | None = None
    max_abs_diff: float | None = None  # against the row named in ``diff_against``
    diff_against: str | None = None
    x_floor: float | None = None  # min_s / the memory floor's min_s (:data:`FLOOR`)


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        m = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    return int(m.group(1)) * 1024 if m else 0


def _hwm_rise(fn: Callable[[], Any]) -> float | None:
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current resident set
    except OSError:
        return None
    before = _status("VmRSS")
    out = fn()
    peak = _status("VmHWM")
    del out
    return float(max(peak - before, 0))


_PROBE_BYTES = 64 * 2**20
_hwm_sees_temporaries: bool | None = None


def peak_extra(fn: Callable[[], Any]) -> float | None:
    """Bytes the resident set rose by at its peak during fn(), or None where it cannot be read.

    None also where the kernel's high-water mark misses a freed temporary: some kernels update
    VmHWM only when it is read or the process exits, not before unmapping, so a block freed inside
    fn() would leave no trace. A probe (a touched 64 MiB array, freed before the reading) decides
    that once per process.
    """
    global _hwm_sees_temporaries
    if _hwm_sees_temporaries is None:
        probe = _hwm_rise(lambda: float(np.ones(_PROBE_BYTES // 8).sum()))
        _hwm_sees_temporaries = probe is not None and probe >= 0.75 * _PROBE_BYTES
    return _hwm_rise(fn) if _hwm_sees_temporaries else None


def interleaved_min(
    calls: dict[str, Callable[[], Any]], repeats: int, slow: Sequence[str] = (), slow_repeats: int = 3
) -> dict[str, float]:
    """Minimum seconds of each call over ``repeats`` rounds, every call once per round, in turn.

    Calls named in ``slow`` (Python loops over rows, seconds each) take part in the first
    ``slow_repeats`` rounds only.
    """
    for fn in calls.values():  # warm-up
        fn()
    best = dict.fromkeys(calls, float("inf"))
    for r in range(repeats):
        for name, fn in calls.items():
            if name in slow and r >= slow_repeats:
                continue
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def _diff(a: Any, b: Any) -> float:
    x = np.asarray(_first(a).detach().cpu().double().numpy())
    y = np.asarray(_first(b).detach().cpu().double().numpy())
    return float(np.max(np.abs(x - y), initial=0.0))


# --- verl -------------------------------------------------------------------------------------

KEYS = ("acc", "fmt", "quality")


def verl_batch(n: int, length: int, *, shuffled: bool, seed: int = 0, device: str = "cpu") -> dict[str, Any]:
    """verl's inputs for one advantage call (see the module docstring)."""
    import torch

    rng = np.random.default_rng(seed)
    n = n // GROUP * GROUP
    uids = [
        str(uuid.UUID(int=int(rng.integers(0, 2**62)) << 64 | int(rng.integers(0, 2**62)), version=4))
        for _ in range(n // GROUP)
    ]
    index = np.array([u for u in uids for _ in range(GROUP)], dtype=object)
    quality = rng.random(n)
    comps = {
        "acc": (rng.random(n) < quality).astype(np.float64),
        "fmt": (rng.random(n) < 0.9).astype(np.float64),
        "quality": quality + rng.normal(0.0, 0.2, n),
    }
    if shuffled:
        perm = rng.permutation(n)
        index = index[perm]
        comps = {k: v[perm] for k, v in comps.items()}
    lengths = rng.integers(1, length + 1, n)
    mask = torch.from_numpy(np.arange(length)[None, :] < lengths[:, None]).to(torch.int64)
    total = sum(comps.values())
    rewards = torch.zeros((n, length), dtype=torch.float32)
    rewards[torch.arange(n), torch.from_numpy(lengths - 1)] = torch.from_numpy(total.astype(np.float32))
    mask, rewards = mask.to(device), rewards.to(device)
    return {"index": index, "mask": mask, "rewards": rewards, "non_tensor_batch": comps}


# The least any call that returns a fresh array the size of the input does: one read of it and one
# write of the result. Every row's ``x floor`` is its time over this row's, in the same process.
FLOOR = "memory floor (empty_like + copy_ of the input)"


def memory_floor(x: Any) -> Any:
    """One read of ``x`` and one write of a fresh array of its size (torch.empty_like + copy_)."""
    import torch

    return torch.empty_like(x).copy_(x)


TOKEN_PIECE = 1 << 18  # output elements per piece of rows in :func:`traffic_floor`


def traffic_floor(rewards: Any, mask: Any) -> Any:
    """The least any advantage call in verl's format must do, with no grouping and no statistics.

    It reads the token rewards once (their sum over L, the sequence reward) and the mask once, and
    writes one fresh ``(N, L)`` output: a per-row value times the mask. Done the fastest way we know
    in torch: in cache-sized pieces of rows, the mask converted into the output piece and scaled
    there (a mixed-dtype product over the whole batch is slower), the output on numpy's memory,
    which asks for transparent huge pages (torch's allocator only does under
    ``THP_MEM_ALLOC_ENABLE=1``). A ratio to verl under this row's is out of reach for any
    implementation that returns verl's tensors.
    """
    import torch

    row = rewards.sum(-1)
    if mask.device.type != "cpu":
        return row.unsqueeze(-1) * mask
    n, length = mask.shape
    out = torch.from_numpy(np.empty((n, length), dtype=np.float32))
    rows = max(1, TOKEN_PIECE // max(length, 1))
    for a in range(0, n, rows):
        out[a : a + rows].copy_(mask[a : a + rows]).mul_(row[a : a + rows, None])
    return out


def verl_calls(batch: dict[str, Any]) -> tuple[dict[str, Callable[[], Any]], str, dict[str, str]]:
    """{name: call}, the baseline's name, and {name: the row its advantages must equal}."""
    import torch
    from omegaconf import OmegaConf
    from verl.trainer.ppo import core_algos

    import corrgrpo_adapters.verl.plugin  # noqa: F401 -- registers our estimators in verl

    from ._reference import reference_corrgrpo

    rewards, mask, index, ntb = batch["rewards"], batch["mask"], batch["index"], batch["non_tensor_batch"]
    plain = OmegaConf.create({"adv_estimator": "core_grpo", "norm_adv_by_std_in_grpo": True})
    keyed = OmegaConf.create({"adv_estimator": "corrgrpo", "reward_keys": list(KEYS)})
    gdpo_config = OmegaConf.create({"adv_estimator": "gdpo", "gdpo_reward_keys": list(KEYS)})
    gdpo_batch = {
        "prompts": torch.zeros((rewards.shape[0], 1), dtype=torch.int64, device=mask.device),
        "attention_mask": torch.cat(
            [torch.ones((rewards.shape[0], 1), dtype=torch.int64, device=mask.device), mask], 1
        ),
    }
    fn = core_algos.get_adv_estimator_fn
    verl_ntb = {k: np.asarray(v) for k, v in ntb.items()}
    calls: dict[str, Callable[[], Any]] = {
        "verl grpo_vectorized": lambda: fn("grpo_vectorized")(
            token_level_rewards=rewards, response_mask=mask, index=index, config=plain
        ),
        "ours core_grpo": lambda: fn("core_grpo")(
            token_level_rewards=rewards, response_mask=mask, index=index, config=plain
        ),
        "ours corrgrpo (K=1)": lambda: fn("corrgrpo")(
            token_level_rewards=rewards,
            response_mask=mask,
            index=index,
            config=OmegaConf.create({"adv_estimator": "corrgrpo"}),
        ),
        "ours corrgrpo (K=3)": lambda: fn("corrgrpo")(
            token_level_rewards=rewards,
            response_mask=mask,
            index=index,
            config=keyed,
            non_tensor_batch=verl_ntb,
        ),
        "reference CorrGRPO loop (K=3)": lambda: reference_corrgrpo(mask, index, verl_ntb, KEYS),
        "verl grpo (row loop)": lambda: core_algos.compute_grpo_outcome_advantage(
            token_level_rewards=rewards, response_mask=mask, index=index
        ),
        "verl gdpo (K=3)": lambda: core_algos.compute_gdpo_outcome_advantage(
            token_level_rewards=rewards,
            response_mask=mask,
            index=index,
            config=gdpo_config,
            non_tensor_batch=verl_ntb,
            batch=gdpo_batch,
        ),
        FLOOR: lambda: memory_floor(rewards),
        "traffic floor (reward sum, row x mask, fresh output)": lambda: traffic_floor(rewards, mask),
    }
    equal = {"ours core_grpo": "verl grpo_vectorized", "ours corrgrpo (K=3)": "reference CorrGRPO loop (K=3)"}
    return calls, "verl grpo_vectorized", equal


SLOW = ("verl grpo (row loop)", "verl gdpo (K=3)", "reference CorrGRPO loop (K=3)")


def run_verl(
    ns: Sequence[int], lengths: Sequence[int], layouts: Sequence[str], repeats: int, skip: Sequence[str] = ()
) -> list[Result]:
    import torch

    torch.set_num_threads(1)
    out: list[Result] = []
    for layout in layouts:
        for n in ns:
            for length in lengths:
                batch = verl_batch(n, length, shuffled=layout == "shuffled", device=DEVICE)
                calls, base, equal = verl_calls(batch)
                calls = {k: v for k, v in calls.items() if not any(s in k for s in skip)}
                out += _measure(
                    "verl",
                    layout,
                    n,
                    length,
                    calls,
                    base,
                    equal,
                    repeats,
                    input_bytes=batch["rewards"].nbytes,
                )
    return out


# --- TRL --------------------------------------------------------------------------------------


def trl_lines(rewards_per_func: Any, weights: Any, num_generations: int) -> Any:
    """TRL 1.16's advantage lines (``sum_then_normalize``, ``scale_rewards="group"``), with its nanstd."""
    import torch
    from trl.trainer.utils import nanstd

    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
    std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
    advantages = rewards - mean_grouped_rewards
    advantages = advantages / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


NUMPY_FLOOR = "numpy floor (GRPO in the fewest float64 passes)"
_FLOOR_GROUPS = 8192  # groups per piece of :func:`numpy_floor`: a piece's float64 block stays in cache


def numpy_floor(rewards: Any, num_generations: int, eps: float = 1e-4) -> Any:
    """GRPO on TRL's ``(N, 1)`` float32 rewards in the fewest passes numpy can make in float64, the
    core's working precision: what no numpy implementation of the core's arithmetic can beat.

    A piece at a time (whole groups, position-major so every statistic runs along the long axis):
    one read that converts and shifts by each group's first row, the sums and the sums of squares,
    then one centring pass and one pass that divides into the float32 result. No validation, no NaN
    handling, no overflow check, no zero-variance test: none of what the core guarantees beyond the
    arithmetic.
    """
    import torch

    n = num_generations
    x = rewards.numpy().reshape(-1, n)
    groups = x.shape[0]
    out = np.empty((groups, n), dtype=np.float32)
    buf = np.empty((n, min(groups, _FLOOR_GROUPS)))
    for a in range(0, groups, _FLOOR_GROUPS):
        b = min(groups, a + _FLOOR_GROUPS)
        block = buf[:, : b - a]
        np.subtract(x[a:b].T, x[a:b, 0], out=block, dtype=np.float64)
        total = np.add.reduce(block, axis=0)
        squares = np.einsum("ij,ij->j", block, block)
        mean = total / n
        squares -= total * mean
        den = np.sqrt(np.maximum(squares, 0.0) / (n - 1)) + eps
        block -= mean
        np.divide(block, den, out=out[a:b].T, casting="same_kind")
    return torch.from_numpy(out.reshape(-1))  # (no copy: TRL's type, as the other rows)


def run_trl(ns: Sequence[int], ks: Sequence[int], repeats: int) -> list[Result]:
    import torch

    from corrgrpo_adapters.trl import group_advantages

    torch.set_num_threads(1)
    out: list[Result] = []
    for n in ns:
        for k in ks:
            rng = np.random.default_rng(0)
            x = torch.from_numpy(rng.random((n, k)).astype(np.float32)).to(DEVICE)
            x[:, 1::2] = (x[:, 1::2] < 0.5).float()  # binary components, as pass/fail rewards
            w = torch.ones(k, device=DEVICE)
            calls: dict[str, Callable[[], Any]] = {
                "TRL lines (grpo)": lambda x=x, w=w: trl_lines(x, w, GROUP),
                "ours grpo": lambda x=x: group_advantages(x, GROUP, estimator="grpo", options={"eps": 1e-4}),
            }
            if k > 1:
                calls["ours corrgrpo"] = lambda x=x: group_advantages(x, GROUP, estimator="corrgrpo")
            if k == 1:  # (with several components, the core's own route beats a numpy program this plain)
                calls[NUMPY_FLOOR] = lambda x=x: numpy_floor(x, GROUP)
            calls[FLOOR] = lambda x=x: memory_floor(x)
            out += _measure(
                "trl",
                "groups of 8",
                n,
                k,
                calls,
                "TRL lines (grpo)",
                {"ours grpo": "TRL lines (grpo)", NUMPY_FLOOR: "TRL lines (grpo)"},
                repeats,
                input_bytes=x.nbytes,
            )
    return out


# --- common -----------------------------------------------------------------------------------


# glibc settings of the memory pass: every block from 64 KiB up is its own mapping, returned to the
# system when freed, so the resident set follows what is live (in-process, freed blocks stay resident
# and a second call shows no rise at all).
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
MEMORY_ONLY = False
DEVICE = "cpu"  # --device: "cuda" times with a synchronisation after each call


def _synced(calls: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """On CUDA, each call followed by a device synchronisation, so that its time includes its kernels."""
    if DEVICE == "cpu":
        return calls
    import torch

    def synced(fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            out = fn()
            torch.cuda.synchronize()
            return out

        return call

    return {name: synced(fn) for name, fn in calls.items()}


def _cuda_peak(fn: Callable[[], Any]) -> float:
    import torch

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    del out
    return float(torch.cuda.max_memory_allocated() - before)


def _measure(
    suite: str,
    case: str,
    n: int,
    size: int,
    calls: dict[str, Callable[[], Any]],
    base: str,
    equal: dict[str, str],
    repeats: int,
    *,
    input_bytes: int,
) -> list[Result]:
    calls = _synced(calls)
    if MEMORY_ONLY:
        rows = []
        for name, fn in calls.items():
            fn()  # warm-up: imports, caches
            peak = peak_extra(fn) if DEVICE == "cpu" else _cuda_peak(fn)
            rows.append(
                Result(
                    suite,
                    case,
                    n,
                    size,
                    name,
                    float("nan"),
                    peak_extra_mb=None if peak is None else peak / 2**20,
                    peak_x_input=None if peak is None else peak / input_bytes,
                )
            )
        return rows
    best = interleaved_min(calls, repeats, slow=SLOW)
    rows = []
    outputs = {name: calls[name]() for name in {*equal, *equal.values()} if name in calls}
    for name, t in best.items():
        r = Result(suite, case, n, size, name, t, x_baseline=t / best[base] if base in best else None)
        r.x_floor = t / best[FLOOR] if FLOOR in best else None
        if DEVICE != "cpu":  # the caching allocator's own statistics, in this process
            peak = _cuda_peak(calls[name])
            r.peak_extra_mb, r.peak_x_input = peak / 2**20, peak / input_bytes
        if name in equal and equal[name] in outputs:
            r.max_abs_diff, r.diff_against = _diff(outputs[name], outputs[equal[name]]), equal[name]
        rows.append(r)
        print(markdown([r]).splitlines()[-1], file=sys.stderr, flush=True)
    return rows


def _add_memory(rows: list[Result], argv: list[str]) -> None:
    """Peak memory of every call, from a subprocess under :data:`MEMORY_ENV` (one call each)."""
    import subprocess

    keep: list[str] = []
    skip_value = False
    for a in argv:  # drop the output files: the subprocess prints JSON
        if skip_value:
            skip_value = False
            continue
        if a in ("--json", "--markdown"):
            skip_value = True
            continue
        keep.append(a)
    env = {**os.environ, **MEMORY_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.frameworks", *keep, "--memory-only"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    peaks = {(m["case"], m["n"], m["size"], m["call"]): m for m in json.loads(done.stdout.splitlines()[-1])}
    for r in rows:
        m = peaks.get((r.case, r.n, r.size, r.call))
        if m is not None:
            r.peak_extra_mb, r.peak_x_input = m["peak_extra_mb"], m["peak_x_input"]


def markdown(rows: Sequence[Result]) -> str:
    head = (
        "| suite | case | N | L or K | call | min ms | x baseline | x floor | peak extra MB | peak / input "
        "| max abs diff |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        cells = [
            r.suite,
            r.case,
            f"{r.n:,}",
            str(r.size),
            r.call,
            f"{r.min_s * 1e3:.3f}",
            "-" if r.x_baseline is None else f"{r.x_baseline:.3f}",
            "-" if r.x_floor is None else f"{r.x_floor:.2f}",
            "-" if r.peak_extra_mb is None else f"{r.peak_extra_mb:.1f}",
            "-" if r.peak_x_input is None else f"{r.peak_x_input:.2f}",
            "-" if r.max_abs_diff is None else f"{r.max_abs_diff:.1e}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _count(text: str) -> int:
    return int(float(text))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.frameworks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("suite", choices=["verl", "trl"])
    p.add_argument("--n", type=_count, nargs="+", help="rows (verl: 65536; trl: 64 4096 65536 1048576)")
    p.add_argument("--length", type=int, nargs="+", default=[1, 1024], help="verl: response lengths L")
    p.add_argument(
        "--layout", nargs="+", default=["runs"], choices=["runs", "shuffled"], help="verl: uid order"
    )
    p.add_argument("--k", type=int, nargs="+", default=[1, 3], help="trl: reward components")
    p.add_argument("--repeats", type=int, default=7, help="interleaved rounds (the row loops take part in 3)")
    p.add_argument("--skip", nargs="*", default=[], help="verl: leave out calls whose name contains this")
    p.add_argument("--device", default="cpu", help="torch device of the tensors (cuda: synchronised timing)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory pass (a subprocess)")
    p.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    global MEMORY_ONLY, DEVICE
    MEMORY_ONLY = args.memory_only
    DEVICE = args.device
    record = RunRecord.start()
    if args.suite == "verl":
        rows = run_verl(args.n or [65_536], args.length, args.layout, args.repeats, args.skip)
    else:
        rows = run_trl(args.n or [64, 4_096, 65_536, 1_048_576], args.k, args.repeats)
    if MEMORY_ONLY:
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    record.finish()
    if not args.no_memory and DEVICE == "cpu":
        _add_memory(rows, [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-memory"])
    table = markdown(rows)
    # Settings that change what a row measures without showing in argv (torch's huge pages).
    env = {k: os.environ[k] for k in ("THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS") if k in os.environ}
    settings = "".join(f"; {k}={v}" for k, v in env.items())
    note = (
        f"\n{record.footer()}; min of {args.repeats} interleaved rounds; "
        f"python {sys.version.split()[0]}{settings}\n"
    )
    print(table + note)
    if args.json:
        meta = {
            "argv": list(argv or sys.argv[1:]),
            **record.meta(),
            "env": env,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        }
        args.json.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1))
    if args.markdown:
        args.markdown.write_text(table + note)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
