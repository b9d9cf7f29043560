"""Agent security on TRL: two real GRPO steps in which TRL's own tool loop drives AgentDojo environments.

The tiny random model emits whole *pieces*, one token each: valid tool calls, a malformed one, a call
to a tool the suite lacks, and a final answer. TRL (with its copy of Qwen2.5's chat
template, which it knows how to parse) executes the parsed calls on our per-suite environments, and the
rewards come from AgentDojo's checkers. Needs trl and agentdojo (ci/envs/trl/recipes.args).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agentdojo")
import torch
from trl.chat_template_utils import qwen2_5_chat_template

from corrgrpo_tasks.agent_security import build_cases, default_system_message, suite_tool_names, to_rows
from corrgrpo_tasks.recipes import build_recipe
from corrgrpo_tasks.recipes.trl_train import build_trainer

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning",
                                        "ignore::DeprecationWarning")

PIECES = [
    '<tool_call>\n{"name": "get_balance", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "get_most_recent_transactions", "arguments": {"n": 5}}\n</tool_call>',
    '<tool_call>\n{"name": "get_balance", "arguments": \n</tool_call>',  # malformed
    '<tool_call>\n{"name": "launch_rocket", "arguments": {}}\n</tool_call>',  # not a banking tool
    "I have checked your account.",
]
TINY = ("val_files=", "train_batch_size=2", "group_size=4", "mini_batch_size=2", "per_device_batch_size=4",
        "max_steps=2", "max_response_length=6", "max_turns=2", "use_vllm=false", "bf16=false",
        "gradient_checkpointing=false", "test_freq=0", "save_freq=1000", "lr=1e-3")


@pytest.fixture(scope="module")
def agent_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A random 2-layer Qwen2 with a byte-level tokenizer, Qwen2.5's markers as tokens, TRL's copy of the
    Qwen2.5 chat template, and each piece as one token; plus the generation setting allowing only
    pieces and the end of turn."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    path = tmp_path_factory.mktemp("tiny-agent")
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  padding_side="left")
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t in ("<|im_start|>", "<tool_call>", "</tool_call>", *PIECES)])
    tok.chat_template = qwen2_5_chat_template
    tok.save_pretrained(path)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768,
                         tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    Qwen2ForCausalLM(config).save_pretrained(path)
    allowed = {tok.convert_tokens_to_ids(p) for p in PIECES} | {tok.eos_token_id}
    suppress = [i for i in range(len(tok)) if i not in allowed]
    return path, "generation_kwargs=" + json.dumps({"suppress_tokens": suppress})


@pytest.fixture(scope="module")
def banking_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import datasets

    cases = {c["case_id"]: c for c in build_cases(suites=["banking"], attacks=("important_instructions",))}
    chosen = [cases["banking:user_task_0"], cases["banking:user_task_1:injection_task_0:important_instructions"]]
    path = tmp_path_factory.mktemp("agentdojo") / "train.parquet"
    rows = to_rows(chosen, split="train", system_message=default_system_message(),
                   tool_names=suite_tool_names(suites=["banking"]))
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def test_two_real_steps_with_trl_tool_loop_on_agentdojo(agent_model: tuple[Path, str], banking_rows: Path,
                                                        tmp_path: Path, train_two_steps: Any) -> None:
    model, generation = agent_model
    recipe = build_recipe("agent_security", "trl", estimator="corrgrpo",
                          overrides=[f"model={model}", f"train_files={banking_rows}",
                                     f"output_dir={tmp_path / 'out'}", *TINY],
                          extra=["use_cpu=true", generation])
    assert recipe.config["grpo_config"]["max_tool_calling_iterations"] == 2
    trainer = build_trainer(recipe.config)
    assert sorted(trainer.environment_factories) == ["banking"]
    logged = train_two_steps(trainer)
    for entry in logged:
        for component in ("utility_reward", "safety_reward"):
            assert 0.0 <= entry[f"rewards/{component}/mean"] <= 1.0
    # TRL parsed and ran tool calls on the environments, and the rewards differ within groups.
    assert any(entry["tools/call_frequency"] > 0 for entry in logged)
    assert any(entry["frac_reward_zero_std"] < 1.0 for entry in logged)


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
