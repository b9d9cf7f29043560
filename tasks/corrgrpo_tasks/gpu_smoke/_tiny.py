"""A tiny random-weight causal LM checkpoint built from a config (no download), for smoke runs and tests.

The tokenizer has one token per printable character plus a few whole *completion pieces* that
encoding never produces (there are no merges). Generating with the character ids suppressed makes a
random policy emit whole pieces, so rewards differ within a group from the first step on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

CHARS: tuple[str, ...] = (*(chr(i) for i in range(32, 127)), "\n", "\t")
SPECIALS: tuple[str, ...] = ("<pad>", "<eos>")
FIRST_PIECE_ID = len(SPECIALS) + len(CHARS)
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def write_tiny_checkpoint(out_dir: str | Path, pieces: Sequence[str], *, hidden_size: int = 32, layers: int = 2,
                          seed: int = 0) -> Path:
    """Save a random Qwen2 and its tokenizer under ``out_dir`` (loadable with ``from_pretrained``)."""
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(out_dir)
    tokens = [*SPECIALS, *CHARS, *pieces]
    if len(set(tokens)) != len(tokens):
        raise ValueError("completion pieces must differ from each other and from single characters")
    vocab = {token: i for i, token in enumerate(tokens)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="?"))
    core.decoder = decoders.Fuse()
    # Prompts must be mostly ordinary tokens: TRL drops special ones (here "?" for characters outside
    # the vocabulary) from prompt text, and an all-special prompt would be empty.
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="?", padding_side="left")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    torch.manual_seed(seed)
    heads = max(2, hidden_size // 16)
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads // 2 or 1,
                         max_position_embeddings=8192, tie_word_embeddings=True, pad_token_id=0, bos_token_id=1,
                         eos_token_id=1)
    Qwen2ForCausalLM(config).save_pretrained(out)
    return out


def piece_only_generation() -> str:
    """A TRL ``generation_kwargs=...`` setting that suppresses padding and every character token."""
    return "generation_kwargs=" + json.dumps({"suppress_tokens": [0, *range(len(SPECIALS), FIRST_PIECE_ID)]})
