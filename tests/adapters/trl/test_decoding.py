"""TRL hands the tool-calling reward the completion as the model ended it, without chat or end-of-turn
markers, even when TRL's own chat parser has moved the tool call out of the message text.

TRL's ``_generate`` decodes completions itself: plain text without special tokens, or, for chat
prompts with a tokenizer that has a response template (``add_response_schema``), structured
messages whose ``content`` no longer holds the ``<tool_call>`` block. A tiny model with a zero output
layer and greedy decoding writes exactly one whole-completion token and then ``<|im_end|>`` (the EOS
special token). The reward functions built with the tokenizer decode TRL's ``completion_ids`` without
special tokens, as verl does. Runs in ci/envs/trl.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

from corrgrpo_tasks.gpu_smoke._tiny import write_chat_checkpoint
from corrgrpo_tasks.tool_calling import COMPONENTS, compute_score, trl_reward_functions

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)

GT = '<think>plan</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>'


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, _ = write_chat_checkpoint(
        tmp_path_factory.mktemp("tiny"), [GT], chat_template=qwen2_5_chat_template
    )
    return path


def _train_one_step(checkpoint: Path, tmp_path: Path, *, chat: bool) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint, padding_side="left")
    if chat:
        tokenizer = add_response_schema(tokenizer)  # TRL then parses tool calls out of the messages
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: greedy picks the lowest allowed id
    piece, eos = tokenizer.convert_tokens_to_ids(GT), tokenizer.eos_token_id
    assert eos < piece
    generation = {
        "do_sample": False,
        "suppress_tokens": [i for i in range(len(tokenizer)) if i not in (piece, eos)],
        "begin_suppress_tokens": [eos],  # so: the whole completion, then <|im_end|>
    }
    prompt: Any = [{"role": "user", "content": "call f"}] if chat else "call f"
    data = Dataset.from_list([{"prompt": prompt, "ground_truth": GT}] * 2)
    seen: list[Any] = []

    def spy(completions: list[Any], **_: Any) -> list[float]:
        seen.extend(completions)
        return [0.0] * len(completions)

    with_tokenizer = trl_reward_functions(tokenizer=tokenizer)
    without = trl_reward_functions()
    for fn in without:
        fn.__name__ = "plain_" + fn.__name__
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=False,
        generation_kwargs=generation,
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[spy, *with_tokenizer, *without],
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
    )
    trainer.train()
    rewards = {name: list(values) for name, values in trainer._logs["rewards"].items()}
    return {"seen": seen, "rewards": rewards, "ids": trainer._logs.get("completion_ids")}


def test_plain_completions_reach_the_reward_without_markers(checkpoint: Path, tmp_path: Path) -> None:
    out = _train_one_step(checkpoint, tmp_path, chat=False)
    assert out["seen"]
    assert all(c == GT for c in out["seen"])  # TRL decoded: no <|im_end|>
    expected = compute_score("rlla", GT, GT)
    for name in COMPONENTS:
        assert out["rewards"][name] == [expected[name]] * 2
        assert out["rewards"]["plain_" + name] == [expected[name]] * 2


def test_chat_completions_keep_their_tool_call_for_the_reward(checkpoint: Path, tmp_path: Path) -> None:
    import transformers
    import trl
    from transformers import AutoTokenizer

    schema = add_response_schema(AutoTokenizer.from_pretrained(checkpoint))
    if not getattr(schema, "response_template", None):  # TRL 1.4-1.7 with transformers >= 5.2x
        pytest.skip(
            f"TRL {trl.__version__}'s add_response_schema sets no response_template, which transformers "
            f"{transformers.__version__} needs to parse chat responses: TRL's own chat parsing cannot run"
        )
    out = _train_one_step(checkpoint, tmp_path, chat=True)
    message = out["seen"][0][-1]
    assert "<tool_call>" not in message["content"]  # TRL's parser moved the call out of the text
    assert json.loads(json.dumps(message["tool_calls"]))[0]["function"]["name"] == "f"
    expected = compute_score("rlla", GT, GT)
    for name in COMPONENTS:
        assert out["rewards"][name] == [expected[name]] * 2  # decoded from the tokens: all there
    assert out["rewards"]["plain_function_name_reward"] == [-0.5, -0.5]  # the message text alone: no call
