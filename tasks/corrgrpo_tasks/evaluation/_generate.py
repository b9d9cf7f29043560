"""Generation for the evaluations: a local checkpoint behind one ``generate(conversations, tools)`` call.

Greedy decoding (the paper's evaluations use one greedy sample per problem). The chat template renders
each conversation (and the tools, as function schemas, for templates that take them). Backends:

* ``transformers`` (CPU or GPU): batched ``generate`` with left padding;
* ``vllm`` when it is installed: the same prompts through ``LLM.generate`` with ``temperature=0``
  (same results up to numerics).

``backend="auto"`` picks vLLM when it imports and a GPU is visible, else transformers. Nothing is
downloaded: ``path`` must be a local checkpoint folder (``HF_HUB_OFFLINE`` is set).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None
BACKENDS = ("auto", "transformers", "vllm")


class ChatModel:
    """A local chat model: ``generate`` a batch of conversations, ``chat`` one.

    ``generation_kwargs`` go to ``model.generate`` (transformers) or ``SamplingParams`` (vLLM), e.g.
    ``{"suppress_tokens": [...]}``. ``on_batch(n)`` is called after every generated batch of ``n``.
    """

    @staticmethod
    def parameter_count(path: str | Path) -> int | None:
        """Parameters of the checkpoint at ``path``, read from its safetensors headers (no weights are
        loaded); None without safetensors files."""
        return parameter_count(path)

    def __init__(
        self,
        path: str | Path,
        *,
        max_new_tokens: int = 512,
        backend: str = "auto",
        device: str | None = None,
        batch_size: int = 8,
        dtype: str = "auto",
        generation_kwargs: Mapping[str, Any] | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{path} is not a local checkpoint folder (no config.json); nothing is downloaded"
            )
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if max_new_tokens < 1 or batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be at least 1")
        backend = resolve_backend(backend)
        self.path, self.backend, self.max_new_tokens, self.batch_size = (
            path,
            backend,
            max_new_tokens,
            batch_size,
        )
        self.generation_kwargs = dict(generation_kwargs or {})
        self.on_batch = on_batch
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        if backend == "vllm":
            from vllm import LLM  # type: ignore[import-not-found,unused-ignore]

            self._llm: Any = LLM(model=str(path), dtype=dtype)
        else:
            import torch
            from transformers import AutoModelForCausalLM

            self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            loaded: Any = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
            self._model: Any = loaded.to(self.device).eval()

    def render(self, messages: Messages, tools: Tools = None) -> str:
        """The prompt text of one conversation (chat template, generation prompt added)."""
        kwargs: dict[str, Any] = {"tools": list(tools)} if tools else {}
        return str(
            self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], tokenize=False, add_generation_prompt=True, **kwargs
            )
        )

    def generate(self, conversations: Sequence[Messages], tools: Sequence[Tools] | None = None) -> list[str]:
        """One greedy completion per conversation (``tools[i]`` offered to conversation ``i``)."""
        if tools is not None and len(tools) != len(conversations):
            raise ValueError("give one tool list (or None) per conversation")
        prompts = [
            self.render(m, tools[i] if tools is not None else None) for i, m in enumerate(conversations)
        ]
        out: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            batch = prompts[start : start + self.batch_size]
            out.extend(self._vllm(batch) if self.backend == "vllm" else self._transformers(batch))
            if self.on_batch:
                self.on_batch(len(batch))
        return out

    def chat(self, messages: Messages, tools: Tools = None) -> str:
        """One greedy reply."""
        return self.generate([messages], [tools])[0]

    def _transformers(self, prompts: list[str]) -> list[str]:
        import torch

        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )
        with torch.inference_mode():
            ids = self._model.generate(
                **enc,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
                **self.generation_kwargs,
            )
        new = ids[:, enc["input_ids"].shape[1] :]
        return [str(t) for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]

    def _vllm(self, prompts: list[str]) -> list[str]:
        from vllm import SamplingParams  # type: ignore[import-not-found,unused-ignore]

        params = SamplingParams(temperature=0.0, max_tokens=self.max_new_tokens, **self.generation_kwargs)
        return [r.outputs[0].text for r in self._llm.generate(prompts, params, use_tqdm=False)]


def parameter_count(path: str | Path) -> int | None:
    """Sum of the tensor sizes in the safetensors headers under ``path`` (None when there are none)."""
    import json
    import math
    import struct

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            if size > 100 << 20:
                return None
            header = json.loads(handle.read(size))
        total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
    return total


def resolve_backend(backend: str) -> str:
    """``auto`` as :class:`ChatModel` resolves it: vLLM when it imports and a GPU is visible."""
    if backend == "auto":
        return "vllm" if _vllm_usable() else "transformers"
    return backend


def _vllm_usable() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
