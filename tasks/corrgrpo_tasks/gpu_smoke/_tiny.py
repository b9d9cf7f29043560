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
from typing import Any

CHARS: tuple[str, ...] = (*(chr(i) for i in range(32, 127)), "\n", "\t")
SPECIALS: tuple[str, ...] = ("<pad>", "<eos>")
FIRST_PIECE_ID = len(SPECIALS) + len(CHARS)
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def write_tiny_checkpoint(
    out_dir: str | Path, pieces: Sequence[str], *, hidden_size: int = 32, layers: int = 2, seed: int = 0
) -> Path:
    """Save a random Qwen2 and its tokenizer under ``out_dir`` (loadable with ``from_pretrained``)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

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
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="?", padding_side="left"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    _save_random_qwen2(out, tokenizer, hidden_size=hidden_size, layers=layers, seed=seed, max_positions=8192)
    return out


def _save_random_qwen2(
    out: Path, tokenizer: Any, *, hidden_size: int, layers: int, seed: int, max_positions: int
) -> None:
    """Save ``tokenizer`` and a random-weight Qwen2 sized to its vocabulary under ``out``."""
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


# A Qwen2.5-style chat template (tools in the system turn, hermes <tool_call> blocks, tool replies as
# <tool_response> user turns), for tests that need a framework to render and parse tool use.
QWEN_STYLE_TEMPLATE = """\
{%- if messages[0].role == 'system' %}{% set system = messages[0].content %}\
{%- else %}{% set system = 'You are a helpful assistant.' %}{% endif %}\
<|im_start|>system
{{ system }}
{%- if tools %}

# Tools

<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags.
{%- endif %}<|im_end|>
{% for message in messages %}\
{%- if message.role == 'user' %}<|im_start|>user
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{{ message.content }}\
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>\
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}\
{%- endfor %}\
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
QWEN_MARKERS: tuple[str, ...] = (
    "<|im_start|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)


def byte_chat_tokenizer(
    chat_template: str,
    *,
    markers: Sequence[str] = QWEN_MARKERS,
    pieces: Sequence[str] = (),
    eos: str = "<|im_end|>",
) -> Any:
    """A tokenizer that can render a real chat template: byte-level (every text encodes, newlines
    included), the template's ``markers`` and each piece as single ordinary tokens, ``eos`` ending a turn."""
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


def write_chat_checkpoint(
    out_dir: str | Path,
    pieces: Sequence[str],
    *,
    chat_template: str,
    markers: Sequence[str] = QWEN_MARKERS,
    eos: str = "<|im_end|>",
    hidden_size: int = 32,
    layers: int = 2,
    seed: int = 0,
) -> tuple[Path, str]:
    """A random Qwen2 with a :func:`byte_chat_tokenizer` whose pieces are whole completions.

    Returns the checkpoint and the TRL ``generation_kwargs=...`` setting that allows only the pieces and
    ``eos``, so a random policy writes whole pieces (e.g. tool calls a chat parser recognises).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(out_dir)
    tokenizer = byte_chat_tokenizer(chat_template, markers=markers, pieces=pieces, eos=eos)
    _save_random_qwen2(out, tokenizer, hidden_size=hidden_size, layers=layers, seed=seed, max_positions=32768)
    allowed = {tokenizer.convert_tokens_to_ids(p) for p in pieces} | {tokenizer.eos_token_id}
    suppress = [i for i in range(len(tokenizer)) if i not in allowed]
    return out, "generation_kwargs=" + json.dumps({"suppress_tokens": suppress})


def piece_only_generation() -> str:
    """A TRL ``generation_kwargs=...`` setting that suppresses padding and every character token."""
    return "generation_kwargs=" + json.dumps({"suppress_tokens": [0, *range(len(SPECIALS), FIRST_PIECE_ID)]})
