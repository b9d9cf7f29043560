"""Agent security on TRL: two real GRPO steps in which TRL's own tool loop drives AgentDojo environments.

The tiny random model emits whole *pieces*, one token each (``gpu_smoke.agent_security_pieces``):
valid tool calls, a malformed one, a call to a tool the suite lacks, and a final answer. TRL (with its
copy of Qwen2.5's chat template, which it knows how to parse) executes the parsed calls on our
per-suite environments, and the rewards come from AgentDojo's checkers. Needs trl and agentdojo (ci/envs/trl/recipes.args).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agentdojo")
from trl.chat_template_utils import qwen2_5_chat_template

from corrgrpo_tasks.agent_security import suite_tool_names
from corrgrpo_tasks.agent_security.trl_env import TURN_KEY
from corrgrpo_tasks.gpu_smoke import agent_security_pieces, write_chat_checkpoint
from corrgrpo_tasks.gpu_smoke._run import AGENT_SECURITY
from corrgrpo_tasks.recipes import build_recipe
from corrgrpo_tasks.recipes.trl_train import build_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)

MAX_RESPONSE = 12  # tokens; a turn of fewer pieces ended itself (each piece is one token)
TINY = (
    "val_files=",
    "train_batch_size=2",
    "group_size=4",
    "mini_batch_size=2",
    "per_device_batch_size=4",
    "max_steps=2",
    f"max_response_length={MAX_RESPONSE}",
    "max_turns=3",
    "use_vllm=false",
    "bf16=false",
    "gradient_checkpointing=false",
    "test_freq=0",
    "save_freq=1000",
    "lr=1e-3",
)


@pytest.fixture(scope="module")
def agent_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return write_chat_checkpoint(
        tmp_path_factory.mktemp("tiny-agent"), agent_security_pieces(), chat_template=qwen2_5_chat_template
    )


@pytest.fixture(scope="module")
def banking_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean and an attacked banking case (the GPU smoke's rows) as a parquet file."""
    import datasets

    path = tmp_path_factory.mktemp("agentdojo") / "train.parquet"
    datasets.Dataset.from_list(AGENT_SECURITY.rows()).to_parquet(str(path))
    return path


def test_two_real_steps_with_trl_tool_loop_on_agentdojo(
    agent_model: tuple[Path, str], banking_rows: Path, tmp_path: Path, train_two_steps: Any
) -> None:
    model, generation = agent_model
    recipe = build_recipe(
        "agent_security",
        "trl",
        estimator="corrgrpo",
        overrides=[f"model={model}", f"train_files={banking_rows}", f"output_dir={tmp_path / 'out'}", *TINY],
        extra=["use_cpu=true", generation],
    )
    # max_turns=3 generations, as verl counts them: two rounds of tool calls between them.
    assert recipe.config["grpo_config"]["max_tool_calling_iterations"] == 2
    trainer = build_trainer(recipe.config)
    assert sorted(trainer.environment_factories) == ["banking"]
    logged = train_two_steps(trainer)
    # The last batch's rollouts, each turn read by the paper's parser (install_paper_parser): one whose
    # turn dropped a malformed or unknown call scores 0, unless a limit cut that turn (then the paper's
    # loop never reads it). A one-turn rollout of fewer than MAX_RESPONSE pieces ended itself.
    bad = 0
    for i, completion in enumerate(trainer._logs["completion"]):
        turns = [m for m in completion if m.get("role") == "assistant"]
        assert all(TURN_KEY in m for m in turns)
        text = turns[-1][TURN_KEY]["text"]
        pieces = text.count("</tool_call>") + text.count("I have checked your account.")
        if len(turns) == 1 and pieces < MAX_RESPONSE and not turns[0][TURN_KEY]["format_valid"]:
            bad += 1
            assert [trainer._logs["rewards"][k][i] for k in ("utility_reward", "safety_reward")] == [0.0, 0.0]
    assert bad > 0, "no malformed or unknown call in the last batch: the check above proved nothing"
    # TRL parsed and ran tool calls on the environments, and the rewards differ within groups.
    assert any(entry["tools/call_frequency"] > 0 for entry in logged)
    assert any(
        entry["corrgrpo/zero_signal_groups"] < 1.0 for entry in logged
    )  # the adapter's one zero-signal metric


def test_the_environment_methods_are_the_suite_tools_with_schemas() -> None:
    from transformers.utils import get_json_schema

    from corrgrpo_tasks.agent_security import environment_factories

    for suite, cls in environment_factories().items():
        env = cls()
        names = suite_tool_names(suites=[suite])[suite]
        schemas = {n: get_json_schema(getattr(env, n)) for n in names}
        assert all(s["function"]["name"] == n for n, s in schemas.items())
    share = get_json_schema(environment_factories(suites=["workspace"])["workspace"]().share_file)
    assert share["function"]["parameters"]["properties"]["permission"]["enum"] == ["r", "rw"]
    assert json.dumps(share)  # plain JSON, as the chat template needs


def test_eval_suites_are_registered_too(
    agent_model: tuple[Path, str], banking_rows: Path, tmp_path: Path
) -> None:
    import datasets

    from corrgrpo_tasks.agent_security import build_cases, default_system_message, to_rows

    slack = [c for c in build_cases(suites=["slack"], attacks=()) if c["case_id"] == "slack:user_task_0"]
    val = tmp_path / "val.parquet"
    datasets.Dataset.from_list(
        to_rows(slack, split="test", system_message=default_system_message())
    ).to_parquet(str(val))
    model, generation = agent_model
    recipe = build_recipe(
        "agent_security",
        "trl",
        overrides=[
            f"model={model}",
            f"train_files={banking_rows}",
            f"val_files={val}",
            f"output_dir={tmp_path / 'out'}",
            *[o for o in TINY if not o.startswith(("val_files", "test_freq"))],
            "test_freq=1",
        ],
        extra=["use_cpu=true", generation],
    )
    trainer = build_trainer(recipe.config)
    assert sorted(trainer.environment_factories) == ["banking", "slack"]
