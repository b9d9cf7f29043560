"""A tiny random GGUF file in the layout of SmolLM2-135M-Instruct's (llama architecture, a GPT-2 style
byte-level BPE tokenizer, a ChatML template), for tests of the converter and of ``--model`` runs."""

from __future__ import annotations

from pathlib import Path

import pytest

# ChatML with a default system turn, the shape of SmolLM2-Instruct's template.
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a tiny test model.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def write_tiny_gguf(path: Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """Write a random-weight llama GGUF (float32 tensors, tied embeddings) whose vocabulary is the three
    ChatML specials, the 256 byte-level symbols and a few merges."""
    import gguf
    import numpy as np
    from tokenizers import pre_tokenizers

    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = ["Ġ t", "Ġ a", "e r", "i n"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *symbols, *(m.replace(" ", "") for m in merges)]
    types = [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (len(tokens) - 3)
    heads, kv_heads, ff = 2, 1, 2 * hidden
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_context_length(512)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(head_dim)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(len(tokens), hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(hidden, hidden))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(kv_heads * head_dim, hidden))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(kv_heads * head_dim, hidden))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(hidden, hidden))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ff, hidden))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(ff, hidden))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(hidden, ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    """A tiny random GGUF file (skips where the ``gguf`` package is absent)."""
    pytest.importorskip("gguf")
    return write_tiny_gguf(tmp_path / "tiny.gguf")
