"""The pipeline's verl conversion on a checkpoint written by verl's own code, on CPU.

Two gloo ranks shard a tiny random Qwen2 with FSDP2 over a ``("fsdp",)`` device mesh (as verl's workers
do) and save it with verl's ``FSDPCheckpointManager``; the pipeline then runs its ``convert`` step (verl's
merger, ``python -m verl.model_merger merge --backend fsdp``) on the step the tracker names, evaluates
the merged folder with ``corrgrpo evaluate`` and writes the table. The merged weights must equal the
original ones in bfloat16 (the merger's fixed dtype). verl's training step itself is not run: its
rollout needs vLLM on a GPU. Needs verl (ci/envs/verl).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from corrgrpo_tasks.pipeline import plan, run_pipeline

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)
TOOLS = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "tool_calling" / "fixtures"

# The ranks are forked from a parent that has imported verl and transformers (20 s of CPU on this 2-core
# machine), not spawned to import them each again.
SAVE = """
import os, sys
import torch.distributed as dist
import torch.multiprocessing as mp
from omegaconf import OmegaConf
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager


def worker(rank, src, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    model = AutoModelForCausalLM.from_pretrained(src)
    fully_shard(model, mesh=init_device_mesh("cpu", (2,), mesh_dim_names=("fsdp",)))
    contents = OmegaConf.create({"save_contents": ["model"], "load_contents": ["model"]})
    manager = FSDPCheckpointManager(model, None, None, processing_class=AutoTokenizer.from_pretrained(src),
                                    checkpoint_config=contents)
    manager.save_checkpoint(out, global_step=3)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.start_processes(worker, args=tuple(sys.argv[1:4]), nprocs=2, start_method="fork")
"""


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_verl_fsdp_checkpoint_is_merged_by_verl_and_evaluated(tmp_path: Path) -> None:
    import datasets
    from transformers import AutoModelForCausalLM

    from corrgrpo_tasks.gpu_smoke._run import tool_calling_pieces
    from corrgrpo_tasks.gpu_smoke._tiny import write_tiny_checkpoint
    from corrgrpo_tasks.tool_calling import read_records, to_rows

    model = write_tiny_checkpoint(tmp_path / "tiny", tool_calling_pieces(), hidden_size=32)
    (tmp_path / "rlla").mkdir()
    rows = to_rows(read_records(TOOLS / "rlla_tiny.json"), split="test")[:2]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "rlla" / "test.parquet"))

    def planned():  # type: ignore[no-untyped-def]
        return plan(
            "tool_calling",
            "verl",
            out=tmp_path / "pipe",
            overrides=[f"output_dir={tmp_path / 'ck'}", f"model={model}"],
            data={"rlla-test": str(tmp_path / "rlla")},
            evaluate_args=["--max-new-tokens", "2", "--no-progress"],
        )

    pipeline = planned()
    actor = pipeline.checkpoint_dir / "global_step_3" / "actor"
    script = tmp_path / "save.py"
    script.write_text(SAVE)
    subprocess.run([sys.executable, str(script), str(model), str(actor), _port()], check=True, timeout=600)
    (pipeline.checkpoint_dir / "latest_checkpointed_iteration.txt").write_text("3")
    (pipeline.out / "steps").mkdir(parents=True)
    (pipeline.out / "steps" / "train.done").write_text("trained elsewhere\n")
    again = planned()  # the tracker and the train marker are there now
    assert [s.skip for s in again.steps] == ["done", "", ""]
    assert str(actor) in again.steps[1].argv
    table = run_pipeline(again, log=lambda line: None).read_text()
    merged = AutoModelForCausalLM.from_pretrained(str(again.model_dir)).state_dict()
    original = AutoModelForCausalLM.from_pretrained(str(model)).state_dict()
    assert sorted(merged) == sorted(original)
    for name, tensor in original.items():
        assert torch.equal(merged[name], tensor.to(torch.bfloat16)), name
    assert (tmp_path / "pipe" / "eval" / "rlla-test" / "metrics.json").is_file()
    assert "| rlla-test | all_exact |" in table
