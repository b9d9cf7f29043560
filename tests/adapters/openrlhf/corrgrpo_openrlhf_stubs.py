"""Stand-ins for the GPU-only modules OpenRLHF imports at module level (vllm, flash_attn). Tests only.

OpenRLHF's experience maker, loss and CLI modules import ``flash_attn.bert_padding`` and ``vllm`` at
the top. Neither installs without CUDA, and the code paths under test never call them, so each stub
only has to exist: every function in it raises if it is ever called. ``install`` is also the Ray
``worker_process_setup_hook`` the Ray tests chain before the adapter's own hook.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import sys
import types
from typing import Any

STUBBED = (
    "flash_attn",
    "flash_attn.utils",
    "flash_attn.bert_padding",
    "flash_attn.utils.distributed",
    "vllm",
    "vllm.inputs",
    "vllm.utils",
)


def _unavailable(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("a GPU-only module (vllm / flash_attn) was called in a CPU test")


def _module(name: str, **attrs: Any) -> None:
    if name in sys.modules:
        return
    module = types.ModuleType(name)
    # transformers probes optional packages with importlib.util.find_spec, which needs a __spec__.
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attrs)
    sys.modules[name] = module


def _probe_flash_attn_before_the_stub() -> None:
    """Let transformers find flash_attn absent before its stub exists. Its flash-attention module asks
    once, at import, whether flash_attn is installed; up to 5.7 (OpenRLHF 0.10.3's pin) it then looks
    up the distribution that provides the module found, and a stub has none (KeyError)."""
    if "flash_attn" in sys.modules:
        return
    # No transformers (or a layout without that module): nothing probes early.
    with contextlib.suppress(ImportError):
        importlib.import_module("transformers.integrations.flash_attention")


def install() -> None:
    _probe_flash_attn_before_the_stub()
    _module("flash_attn")
    _module("flash_attn.utils")
    _module(
        "flash_attn.bert_padding",
        index_first_axis=_unavailable,
        pad_input=_unavailable,
        rearrange=_unavailable,
        unpad_input=_unavailable,
    )
    _module("flash_attn.utils.distributed", all_gather=_unavailable)
    _module("vllm", LLM=object, SamplingParams=object, __version__="0.0.0")
    _module("vllm.inputs", TokensPrompt=dict)
    _module("vllm.utils", random_uuid=lambda: "0")
