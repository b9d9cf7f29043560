"""``corrgrpo pipeline``'s plan: every step's command in a dry run, resumption markers, bad input in one
line. No framework is imported (the steps are command lines)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from corrgrpo_core.cli.plugin import CliError
from corrgrpo_tasks.pipeline import latest_verl_actor, plan, render_table, run_pipeline
from corrgrpo_tasks.pipeline.cli import COMMAND


def cli(argv: list[str]) -> str:
    parser = argparse.ArgumentParser(prog="corrgrpo")
    COMMAND.attach(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    assert COMMAND.run(parser.parse_args(["pipeline", *argv]), out) == 0
    return out.getvalue()


def test_verl_dry_run_prints_train_convert_and_each_evaluation(tmp_path: Path) -> None:
    text = cli(
        [
            "code",
            "--framework",
            "verl",
            "--out",
            str(tmp_path / "p"),
            "--data",
            "humaneval=HumanEval.jsonl.gz",
            "--data",
            "livecodebench=test6.jsonl",
            "--set",
            "model=/ckpt/Qwen2.5-Coder-7B-Instruct",
            "trainer.nnodes=2",
            "--max-new-tokens",
            "1024",
            "--dry-run",
        ]
    )
    steps = [line for line in text.splitlines() if line.startswith("# step")]
    assert steps == [
        "# step 1: train",
        "# step 2: convert",
        "# step 3: evaluate humaneval",
        "# step 4: evaluate livecodebench",
    ]
    assert "-m verl.trainer.main_ppo" in text
    assert "trainer.nnodes=2" in text
    assert "actor_rollout_ref.model.path=/ckpt/Qwen2.5-Coder-7B-Instruct" in text
    checkpoints = tmp_path / "p" / "checkpoints" / "code-corrgrpo"
    assert (
        f"-m verl.model_merger merge --backend fsdp --local_dir '{checkpoints}/global_step_<latest>/actor' "
        f"--target_dir {tmp_path / 'p' / 'hf_model'}"
    ) in text
    assert (
        f"evaluate code --benchmark humaneval --model {tmp_path / 'p' / 'hf_model'} --data HumanEval.jsonl.gz "
        f"--out {tmp_path / 'p' / 'eval' / 'humaneval'} --max-new-tokens 1024"
    ) in text
    assert "# not evaluated: mbpp (no --data mbpp=PATH" in text
    assert not (tmp_path / "p").exists()  # a dry run writes nothing


def test_trl_has_no_conversion_and_evaluates_its_output_dir(tmp_path: Path) -> None:
    pipeline = plan(
        "tool-calling",
        "trl",
        out=tmp_path,
        overrides=[f"output_dir={tmp_path / 'ck'}"],
        data={"rlla-test": "data/rlla"},
    )
    assert [s.name for s in pipeline.steps] == ["train", "evaluate rlla-test"]
    assert pipeline.model_dir == tmp_path / "ck" / "tool_calling-corrgrpo"
    assert pipeline.steps[0].argv[1:3] == ("-m", "corrgrpo_tasks.recipes.trl_train")
    assert pipeline.missing_data == ("api-bank",)


def test_a_given_checkpoint_skips_training_and_finished_steps_are_skipped(tmp_path: Path) -> None:
    given = plan("code", "verl", out=tmp_path, checkpoint="/models/hf", data={"mbpp": "m.jsonl"})
    assert [s.skip for s in given.steps] == ["--checkpoint given", "--checkpoint given", ""]
    assert "--model /models/hf" in given.steps[2].command()
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "train.done").write_text("done\n")
    resumed = plan("code", "verl", out=tmp_path, data={"mbpp": "m.jsonl"})
    assert [s.skip for s in resumed.steps] == ["done", "", ""]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"--data asb: not a code benchmark; the domain has humaneval, mbpp"):
        cli(["code", "--framework", "trl", "--data", "asb=x", "--dry-run"])
    with pytest.raises(CliError, match=r"unknown hyperparameter|setting 'lr' is not name=value"):
        cli(["code", "--framework", "trl", "--set", "lr", "--dry-run"])
    with pytest.raises(CliError, match="no benchmark to evaluate"):
        cli(["code", "--framework", "trl", "--out", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match=r"latest_checkpointed_iteration\.txt is missing"):
        latest_verl_actor(tmp_path)


def test_run_pipeline_marks_steps_and_writes_one_table(tmp_path: Path) -> None:
    """The runner (a stand-in for the subprocesses) sees the steps in order with the latest verl step
    filled in; the table holds the run's headline and the paper's labelled rows."""
    pipeline = plan(
        "code",
        "verl",
        out=tmp_path,
        overrides=[f"output_dir={tmp_path / 'ck'}"],
        data={"humaneval": "h.jsonl"},
    )
    ran: list[str] = []

    def runner(step):  # type: ignore[no-untyped-def]
        ran.append(step.name)
        if step.name == "train":
            (pipeline.checkpoint_dir / "global_step_7" / "actor").mkdir(parents=True)
            (pipeline.checkpoint_dir / "latest_checkpointed_iteration.txt").write_text("7")
        if step.name == "convert":
            assert str(pipeline.checkpoint_dir / "global_step_7" / "actor") in step.argv
        if step.name == "evaluate humaneval":
            folder = tmp_path / "eval" / "humaneval"
            folder.mkdir(parents=True)
            metrics = {"pass@1": 9.15, "executable": 67.07, "efficiency": None, "n": 164}
            payload = {"metrics": metrics, "config": {"n_selected": 164, "n_total": 164}}
            (folder / "metrics.json").write_text(json.dumps(payload))
        return 0

    table = run_pipeline(pipeline, runner=runner, log=lambda line: None).read_text()
    assert ran == ["train", "convert", "evaluate humaneval"]
    assert (tmp_path / "steps" / "train.done").is_file()
    assert (tmp_path / "steps" / "convert.done").is_file()
    assert "| humaneval | pass@1 | 9.15 | 164 of 164 |" in table
    assert (
        "| humaneval | Qwen2.5-Coder-7B-Instruct (7B) | Pass@1 (base model: 78.66) | 73.78 | 78.66 |" in table
    )
    assert table == render_table(pipeline)
    again = plan("code", "verl", out=tmp_path, overrides=[f"output_dir={tmp_path / 'ck'}"], data={})
    assert [s.skip for s in again.steps] == ["done", "done"]

    def failing(step):  # type: ignore[no-untyped-def]
        return 3

    fresh = plan("code", "trl", out=tmp_path / "other", data={"mbpp": "m"})
    with pytest.raises(RuntimeError, match=r"step 'train' failed with exit status 3; rerun the same command"):
        run_pipeline(fresh, runner=failing, log=lambda line: None)
