"""Shared fixtures for the recipe tests; framework imports stay inside the fixtures that need them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TOOL_FIXTURE = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "tool_calling" / "fixtures" / "rlla_tiny.json"
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def completion_pieces() -> list[str]:
    """Whole completions the tiny model can emit as single tokens: right, partly right, unformatted."""
    import json

    target = json.loads(TOOL_FIXTURE.read_text())[0]["output"]
    return [target, target.replace("Lyon", "Paris"), "<think>hmm</think>", "no idea"]


CHARS = [chr(i) for i in range(32, 127)] + ["\n", "\t"]
FIRST_PIECE_ID = 2 + len(CHARS)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight 2-layer Qwen2 and a character-level tokenizer saved like a Hub checkpoint.

    Besides one token per character the vocabulary holds a few whole completions (never produced by
    encoding: there are no merges). Generating with the character ids suppressed
    (:func:`piece_only_generation`) makes a random policy sample completions whose tool-calling rewards
    differ within a group, so the training steps have non-zero advantages and gradients.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = tmp_path_factory.mktemp("tiny-qwen2")
    tokens = ["<pad>", "<eos>", *CHARS, *completion_pieces()]
    vocab = {t: i for i, t in enumerate(tokens)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="?"))
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="?", padding_side="left")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=1)
    Qwen2ForCausalLM(config).save_pretrained(out)
    return out


def piece_only_generation() -> str:
    """TRL ``generation_kwargs`` (as a ``field=value`` setting) that suppress the character tokens."""
    import json

    return "generation_kwargs=" + json.dumps({"suppress_tokens": list(range(2, FIRST_PIECE_ID))})


@pytest.fixture(scope="session")
def piece_generation() -> str:
    return piece_only_generation()


@pytest.fixture(scope="session")
def tool_fixture() -> Path:
    return TOOL_FIXTURE


@pytest.fixture
def tool_parquet(tmp_path: Path) -> Path:
    """The tool-calling fixture records as verl/TRL rows in a parquet file."""
    import datasets
    from corrgrpo_tasks.tool_calling import read_records, to_rows

    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list(to_rows(read_records(TOOL_FIXTURE), split="train")).to_parquet(str(path))
    return path
