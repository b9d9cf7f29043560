"""A tiny random-weight causal LM and tokenizer for smoke-testing a GRPO pipeline on CPU.

Nothing here touches a model hub: the tokenizer is built from a character list and the model from a
config, and both are written to a local folder. Saving and reloading matters because TRL builds its
reference model (``beta > 0``) from ``model.config._name_or_path``, which is empty for a model that was
only constructed in memory.

Example::

    from corrgrpo_adapters.trl.testing import make_tiny_model
    path = make_tiny_model("/tmp/tiny-qwen2")       # ~20k parameters, trains at ~0.05 s/step on CPU
    # GRPOTrainer(model=path, ...) or AutoModelForCausalLM.from_pretrained(path)
"""

from __future__ import annotations

import string
from pathlib import Path

__all__ = ["CHARACTERS", "make_tiny_model"]

#: Every character the tiny tokenizer knows; each is one token (no merges).
CHARACTERS = string.digits + string.ascii_lowercase + "+-*=?. "

_SPECIAL = ("<pad>", "<eos>", "<unk>")


def _char_tokenizer() -> object:
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate((*_SPECIAL, *CHARACTERS))}
    # A BPE model with no merges and no pre-tokenizer maps each character to its id (spaces included);
    # Fuse glues the characters back together on decode.
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )


def make_tiny_model(path: str | Path, *, hidden_size: int = 32, num_layers: int = 2, seed: int = 0) -> str:
    """Write a random-weight Qwen2 causal LM and its character tokenizer to ``path``.

    Args:
        path: folder to write (created if missing).
        hidden_size: width of the model; 4 attention heads and 2 key/value heads, MLP twice as wide.
        num_layers: number of decoder layers.
        seed: seed for the random weights, so two calls give the same model.

    Returns:
        ``str(path)``, ready for ``from_pretrained`` or for ``GRPOTrainer(model=...)``.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tokenizer = _char_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),  # type: ignore[arg-type]
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,  # type: ignore[attr-defined]
        eos_token_id=tokenizer.eos_token_id,  # type: ignore[attr-defined]
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)  # type: ignore[attr-defined]
    return str(path)
