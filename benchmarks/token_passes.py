"""Where the time of a verl advantage call goes at long responses: each memory pass alone, against its bytes.

``python -m benchmarks.token_passes --n 65536 --length 1024`` (in the verl environment; run it once with
and once without ``THP_MEM_ALLOC_ENABLE=1``) times, on the inputs of ``python -m benchmarks.frameworks
verl`` (ids in runs), every pass that a call in verl's format makes over ``(N, L)`` data: the sum of the
float32 token rewards, one read of the int64 mask, a write into a reused output, faulting in a fresh
huge-page output (the kernel zeroes every page it hands out), a write into a fresh output, our token
broadcast (read the mask, write a fresh output) and the same product as one mixed-dtype ``torch.mul``
per piece, verl's broadcast line ``scalars.unsqueeze(-1) *
response_mask``, and the two calls end to end. Each row gives the bytes it must move (read + written,
the kernel's zeroing not counted) and the rate that makes; the minimum of ``--repeats`` interleaved
rounds, load average before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._provenance import RunRecord
from .frameworks import interleaved_min, verl_batch, verl_calls

PIECE = 1 << 18  # output elements per piece of the piecewise passes (as the token broadcast)


def _pieces(n: int, length: int) -> list[slice]:
    rows = max(1, PIECE // max(length, 1))
    return [slice(a, a + rows) for a in range(0, n, rows)]


def passes(batch: dict[str, Any]) -> dict[str, tuple[Callable[[], Any], int, int]]:
    """{name: (call, bytes read, bytes written)} over one verl batch."""
    import torch

    import corrgrpo_core as cc

    rewards, mask = batch["rewards"], batch["mask"]
    n, length = rewards.shape
    out4, mask8 = 4 * n * length, mask.element_size() * n * length
    reused = torch.empty((n, length), dtype=torch.float32)
    row = torch.randn(n, dtype=torch.float32)
    cuts = _pieces(n, length)

    def fault_fresh() -> Any:  # one store per 4 KiB: the pages come in, zeroed by the kernel
        out = np.zeros((n, length), dtype=np.float32)
        out.reshape(-1)[::1024] = 1.0
        return out

    def read_and_write_fresh() -> Any:  # the bytes of a broadcast with no arithmetic on them
        out = torch.from_numpy(np.empty((n, length), dtype=np.float32))
        for s in cuts:
            mask[s].sum()
            out[s].fill_(1.0)
        return out

    def mixed_product_in_pieces() -> Any:  # the token broadcast before it converted the mask itself
        out = torch.from_numpy(np.empty((n, length), dtype=np.float32))
        for s in cuts:
            torch.mul(row[s, None], mask[s], out=out[s])
        return out

    calls, _, _ = verl_calls(batch)
    return {
        "sum of the token rewards over L": (lambda: rewards.sum(-1), out4, 0),
        "one read of the mask (its sum)": (lambda: mask.sum(), mask8, 0),
        "write into a reused output (fill)": (lambda: reused.fill_(0.0), 0, out4),
        "fault in a fresh huge-page output (kernel zeroing)": (fault_fresh, 0, 0),
        "write a fresh huge-page output (numpy empty + fill)": (
            lambda: torch.from_numpy(np.empty((n, length), dtype=np.float32)).fill_(0.0),
            0,
            out4,
        ),
        "write a fresh torch output (torch.empty + fill)": (
            lambda: torch.empty((n, length), dtype=torch.float32).fill_(0.0),
            0,
            out4,
        ),
        "read the mask, write a fresh output, in pieces (no arithmetic)": (read_and_write_fresh, mask8, out4),
        "ours: broadcast_to_tokens (fresh output)": (lambda: cc.broadcast_to_tokens(row, mask), mask8, out4),
        "one mixed-dtype torch.mul per piece (fresh output)": (mixed_product_in_pieces, mask8, out4),
        "verl: scalars.unsqueeze(-1) * response_mask": (lambda: row.unsqueeze(-1) * mask, mask8, out4),
        "ours core_grpo end to end": (calls["ours core_grpo"], out4 + mask8, out4),
        "verl grpo_vectorized end to end": (calls["verl grpo_vectorized"], out4 + mask8, out4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser(prog="python -m benchmarks.token_passes", description=__doc__)
    p.add_argument("--n", type=int, default=65_536)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    batch = verl_batch(args.n, args.length, shuffled=False)
    table = passes(batch)
    record = RunRecord.start()
    best = interleaved_min({k: v[0] for k, v in table.items()}, args.repeats)
    record.finish()
    print("| pass | MiB read | MiB written | min ms | GB/s |")
    print("|---|---|---|---|---|")
    for name, (_, read, written) in table.items():
        t = best[name]
        rate = f"{(read + written) / t / 1e9:.1f}" if read + written else "-"
        print(f"| {name} | {read / 2**20:.0f} | {written / 2**20:.0f} | {t * 1e3:.2f} | {rate} |")
    thp = os.environ.get("THP_MEM_ALLOC_ENABLE", "unset")
    print(
        f"\nN = {args.n:,}, L = {args.length}; THP_MEM_ALLOC_ENABLE={thp}; {record.footer()}; min of "
        f"{args.repeats} interleaved rounds; python {sys.version.split()[0]}, torch {torch.__version__}"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
