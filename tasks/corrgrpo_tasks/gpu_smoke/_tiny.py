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

from corrgrpo_tasks.training._tokenizer import byte_chat_tokenizer, save_random_qwen2

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
    save_random_qwen2(out, tokenizer, hidden_size=hidden_size, layers=layers, seed=seed, max_positions=8192)
    return out


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
    save_random_qwen2(out, tokenizer, hidden_size=hidden_size, layers=layers, seed=seed, max_positions=32768)
    allowed = {tokenizer.convert_tokens_to_ids(p) for p in pieces} | {tokenizer.eos_token_id}
    suppress = [i for i in range(len(tokenizer)) if i not in allowed]
    return out, "generation_kwargs=" + json.dumps({"suppress_tokens": suppress})


def piece_only_generation() -> str:
    """A TRL ``generation_kwargs=...`` setting that suppresses padding and every character token."""
    return "generation_kwargs=" + json.dumps({"suppress_tokens": [0, *range(len(SPECIALS), FIRST_PIECE_ID)]})
