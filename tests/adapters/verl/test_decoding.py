"""verl hands the tool-calling reward the completion as the model ended it: its own reward manager
decodes the response tokens (a real tokenizer whose end-of-turn ``<|im_end|>`` is the EOS special
token, padding after it) and calls the recipe's reward file with the recipe's reward kwargs.
Runs in ci/envs/verl."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo.reward import get_custom_reward_fn

from corrgrpo_tasks.gpu_smoke._tiny import QWEN_STYLE_TEMPLATE, byte_chat_tokenizer
from corrgrpo_tasks.recipes import build_recipe
from corrgrpo_tasks.tool_calling import compute_score

GT = '<think>plan</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>'
HEDGE = GT.replace("}}\n", '}}\n{"name": "f", "parameters": {"a": 2}}\n')


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return byte_chat_tokenizer(QWEN_STYLE_TEMPLATE)  # <|im_end|> is its EOS special token


def _score(tokenizer: Any, completion: str, profile: str) -> dict[str, Any]:
    overrides = ["profile=hardened"] if profile == "hardened" else []
    recipe = build_recipe("tool_calling", "verl", overrides=overrides)
    ov = recipe.config["overrides"]
    kwargs = {k.rsplit(".", 1)[1]: v for k, v in ov.items() if ".reward_kwargs." in k}
    config = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": ov["reward.custom_reward_function.path"],
                    "name": ov["reward.custom_reward_function.name"],
                    "reward_kwargs": kwargs,
                }
            }
        }
    )
    manager = NaiveRewardManager(config, tokenizer, get_custom_reward_fn(config))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "call f"}], add_generation_prompt=True
    )
    prompt_ids = torch.tensor(prompt if isinstance(prompt, list) else prompt["input_ids"])
    response = [*tokenizer.encode(completion, add_special_tokens=False), tokenizer.eos_token_id]
    pad = [tokenizer.pad_token_id] * 5
    responses = torch.tensor(response + pad)
    mask = torch.cat([torch.ones(len(prompt_ids) + len(response)), torch.zeros(len(pad))]).long()
    data = DataProto.from_dict(
        tensors={
            "prompts": prompt_ids[None],
            "responses": responses[None],
            "attention_mask": mask[None],
        },
        non_tensors={
            "data_source": np.array(["rlla"], dtype=object),
            "reward_model": np.array([{"ground_truth": GT}], dtype=object),
            "extra_info": np.array([{}], dtype=object),
        },
    )
    # The manager runs its decode on the event loop it took at construction.
    result: dict[str, Any] = manager.loop.run_until_complete(manager.run_single(data))
    return result


@pytest.mark.parametrize("profile", ["paper", "hardened"])
def test_the_reward_sees_the_completion_without_markers(tokenizer: Any, profile: str) -> None:
    for completion in (GT, HEDGE):
        result = _score(tokenizer, completion, profile)
        expected = compute_score("rlla", completion, GT, profile=profile)
        assert result["reward_score"] == expected["score"]
        assert result["reward_extra_info"]["format_reward"] == 1.0  # no <|im_end|> left behind
    assert _score(tokenizer, HEDGE, profile)["reward_score"] == {"paper": 3.5, "hardened": 1.0}[profile]
