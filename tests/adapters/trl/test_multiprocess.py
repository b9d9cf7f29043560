"""Two CPU processes (torchrun, gloo) where one group of completions spans both ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def test_group_spanning_two_ranks(tiny_model: str, tmp_path: Path) -> None:
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    )
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(HERE / "ddp_worker.py"),
        tiny_model,
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    for estimator in ("corrgrpo", "gdpo", "trl-batch"):
        ranks = [torch.load(tmp_path / f"{estimator}-rank{r}.pt") for r in (0, 1)]
        assert [r["world_size"] for r in ranks] == [2, 2]
        assert all(r["checked"] >= 2 for r in ranks)  # each rank checked its slice against the core
        for gen in range(len(ranks[0]["rewards"])):
            # both ranks normalise the same gathered matrix: 8 rows, one group of 8 ...
            torch.testing.assert_close(ranks[0]["rewards"][gen], ranks[1]["rewards"][gen], equal_nan=True)
            assert ranks[0]["rewards"][gen].shape[0] == 8
            # ... whose prompt sits on both ranks
            assert set(ranks[0]["prompts"][gen]) == set(ranks[1]["prompts"][gen])
            assert len(set(ranks[0]["prompts"][gen])) == 1
            ours = torch.cat([r["advantages"][gen] for r in ranks])
            assert ours.abs().max() > 0.1
            if estimator != "corrgrpo":  # and equals TRL's own GDPO / batch-wide std across ranks
                trl = torch.cat([r["trl_advantages"][gen] for r in ranks])
                torch.testing.assert_close(ours, trl, rtol=1e-4, atol=1e-5)
