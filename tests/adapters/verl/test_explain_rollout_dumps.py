"""``corrgrpo explain RUN`` on rollout dumps written by verl's own code.

The legacy trainer's ``RayPPOTrainer._log_rollout_data`` (with its ``_dump_generations`` executor and
``_write_generations``) writes the files from a DataProto, exactly as ``fit()`` does with
``trainer.rollout_data_dir`` set; only the tokenizer is a stand-in (decoding is not what is tested).
The V1 trainer's writer (``PPOTrainer._write_generations``) is checked too: it dumps no reward
components, and the command says what that means. The core suite's replica writer
(tests/cli/test_runs.py) must write byte-identical files.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import corrgrpo_core as cc
from corrgrpo_core.cli import main

pytestmark = pytest.mark.usefixtures("verl_imported")


class _Tokenizer:
    """Decodes token ids to words: the dump's text, without a real vocabulary."""

    pad_token_id = 0

    def batch_decode(self, ids: torch.Tensor, skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(row, skip_special_tokens=skip_special_tokens) for row in ids]

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return " ".join(f"w{int(t)}" for t in ids if int(t) != 0)


def _trainer(step: int) -> Any:
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    trainer = object.__new__(RayPPOTrainer)  # no workers, no Ray: only the dump path is used
    trainer.tokenizer = _Tokenizer()
    trainer.global_steps = step
    trainer._init_dump_executor()
    return trainer


def _batch(rng: np.random.Generator, prompts: int, n: int = 4) -> tuple[Any, dict[str, np.ndarray]]:
    from verl.protocol import DataProto

    rows = prompts * n
    prompt_ids = torch.repeat_interleave(torch.arange(1, prompts + 1), n)[:, None] * torch.ones(
        1, 3, dtype=torch.int64
    )
    responses = torch.as_tensor(rng.integers(1, 50, (rows, 5)))
    acc = rng.random(rows) < 0.5
    fmt = rng.random(rows).round(3)
    total = acc + 0.2 * fmt
    scores = torch.zeros(rows, 5, dtype=torch.float64)
    scores[:, -1] = torch.as_tensor(total)
    data = DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": responses, "token_level_scores": scores},
        non_tensors={
            "reward_model": np.array([{"ground_truth": str(i % 3)} for i in range(rows)], dtype=object)
        },
    )
    # fit(): reward_extra_infos_dict holds every key of compute_score's dict, as numpy arrays
    return data, {"acc": acc, "fmt": fmt, "score": total}


def _dump_with_verl(folder: Path, step: int, data: Any, extra: dict[str, np.ndarray]) -> Path:
    trainer = _trainer(step)
    trainer._log_rollout_data(data, extra, {}, str(folder))
    trainer._shutdown_dump_executor()
    return folder / f"{step}.jsonl"


def _replica() -> Any:
    path = Path(__file__).parents[2] / "cli" / "test_runs.py"
    spec = importlib.util.spec_from_file_location("_cli_test_runs", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_verl_dump


def test_replica_writer_is_byte_identical_to_verls(tmp_path):
    rng = np.random.default_rng(0)
    data, extra = _batch(rng, 3)
    ours = _dump_with_verl(tmp_path / "verl", 5, data, extra)
    rows = [json.loads(line) for line in ours.read_text().splitlines()]
    replica = _replica()(
        tmp_path / "replica",
        5,
        [r["input"] for r in rows],
        [r["output"] for r in rows],
        [r["gts"] for r in rows],
        [r["score"] for r in rows],
        {k: v.tolist() for k, v in extra.items()},
    )
    assert replica.read_bytes() == ours.read_bytes()


def test_explain_reads_verls_dumps(tmp_path, capsys):
    rng = np.random.default_rng(1)
    folder = tmp_path / "rollouts"
    for step, prompts in [(1, 4), (2, 4), (3, 1)]:  # step 3: a single group
        data, extra = _batch(rng, prompts)
        _dump_with_verl(folder, step, data, extra)
    path = folder / "2.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    row = json.loads(lines[2])
    del row["fmt"]  # a component missing in one row
    lines[2] = json.dumps(row) + "\n"
    lines.insert(4, '{"input": "w1 w1 w1", "output": \n')  # a malformed line
    path.write_text("".join(lines))

    code = main(["explain", str(folder), "--nan-policy", "ignore"])
    out = capsys.readouterr().out
    assert code == 0
    assert "verl rollout dumps, 3 step file(s); 3 step(s)" in out
    assert "components: acc, fmt" in out
    assert "weights: acc=1, fmt=0.2" in out  # score = acc + 0.2 fmt, found from the dump
    assert "skipped 1 malformed line(s): 2.jsonl line 5" in out
    assert "1 rollout(s) miss a component" in out

    from corrgrpo_core.cli.runs import analyse_run, find_run

    report = analyse_run(
        find_run(folder, group_col=None, step_col="step", file_format=None), nan_policy="ignore"
    )
    assert [s.groups for s in report.steps] == [4, 4, 1]
    rows = [json.loads(line) for line in (folder / "1.jsonl").read_text().splitlines()]
    labels = list(dict.fromkeys(r["input"] for r in rows))
    ids = np.array([labels.index(r["input"]) for r in rows])
    x = np.array([[float(r["acc"]), r["fmt"]] for r in rows])
    base = cc.compute_advantages(np.array([[r["score"]] for r in rows]), ids, estimator="grpo")
    corr = cc.compute_advantages(x, ids, estimator="corrgrpo", weights=[1.0, 0.2])
    np.testing.assert_allclose(
        report.steps[0].changes["corrgrpo"].scale, np.mean(np.abs(corr)) / np.mean(np.abs(base))
    )


def test_v1_dumps_carry_no_components_and_the_report_says_so(tmp_path, capsys):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    n = 8
    PPOTrainer._write_generations(
        [f"prompt {i // 4}" for i in range(n)],
        [f"answer {i}" for i in range(n)],
        [None] * n,
        [float(i % 2) for i in range(n)],
        {"uid": [f"{i // 4}_{i % 4}_0" for i in range(n)]},  # what V1's _log_rollout_data passes
        str(tmp_path),
        3,
    )
    code = main(["explain", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "components: score" in out
    assert "CorrGRPO is Dr.GRPO here" in out
