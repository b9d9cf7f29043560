"""The CPU training's tokenizer and model builder: a byte-level tokenizer with whole-token pieces, and a
random-weight Qwen2 sized to it (no download). ``corrgrpo_tasks.gpu_smoke`` builds its checkpoints with
them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["byte_chat_tokenizer", "save_random_qwen2"]


def byte_chat_tokenizer(
    chat_template: str,
    *,
    markers: Sequence[str] = ("<|im_start|>",),
    pieces: Sequence[str] = (),
    eos: str = "<|im_end|>",
) -> Any:
    """A tokenizer that can render a real chat template: byte-level (every text encodes, newlines
    included), the template's ``markers`` and each piece as single ordinary tokens, ``eos`` ending a turn.

    >>> tok = byte_chat_tokenizer("{{ messages[0]['content'] }}", pieces=["hello"])
    >>> tok.tokenize("hello?")
    ['hello', '?']
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=eos, pad_token="<|endoftext|>", padding_side="left"
    )
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in (*markers, *pieces)])
    tokenizer.chat_template = chat_template
    return tokenizer


def save_random_qwen2(
    out: Path, tokenizer: Any, *, hidden_size: int, layers: int, seed: int, max_positions: int
) -> None:
    """Save ``tokenizer`` and a random-weight Qwen2 sized to its vocabulary under ``out``: ``hidden_size``
    wide, ``layers`` deep, heads of 16 dimensions (at least 2), half as many key/value heads, MLP twice the
    width, tied embeddings."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer.save_pretrained(out)
    torch.manual_seed(seed)
    heads = max(2, hidden_size // 16)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2 or 1,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        architectures=["Qwen2ForCausalLM"],
    )
    Qwen2ForCausalLM(config).save_pretrained(out)
