"""The policy: a tiny Qwen2 built from the project's own byte tokenizer, warm-started with TRL's
``SFTTrainer`` on the task's synthetic data, cached on disk so every estimator and seed starts from the
same weights. ``--model PATH`` (a real checkpoint) takes the same path from the warm start on.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "base_tokenizer",
    "count_parameters",
    "default_cache_dir",
    "quiet_trainer",
    "warm_start",
]

# Turns are "<|im_start|>role\ncontent<|im_end|>"; <|im_end|> is the EOS, so a completion ends there.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_FORMAT_VERSION = 2  # bump when the builder or the warm start changes what a cached checkpoint holds


def default_cache_dir() -> Path:
    """``$CORRGRPO_CACHE``, else ``$XDG_CACHE_HOME/corrgrpo``, else ``~/.cache/corrgrpo``."""
    if os.environ.get("CORRGRPO_CACHE"):
        return Path(os.environ["CORRGRPO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "corrgrpo"


def quiet_trainer(trainer: Any) -> None:
    """No per-log dict printed to stdout (HF's PrinterCallback); ``corrgrpo train`` has its own bar."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)


def checkpointing_option(enabled: bool) -> dict[str, bool]:
    """The training-arguments keyword that switches activation checkpointing: transformers 5 renamed
    ``gradient_checkpointing`` to ``activation_checkpointing`` and warns (FutureWarning) on the old name."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return {
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else "gradient_checkpointing": enabled
    }


def count_parameters(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def base_tokenizer(model: str | None, pieces: Sequence[str]) -> Any:
    """The tokenizer of checkpoint ``model``, or for None the tiny model's: bytes, the chat template's
    markers and ``pieces`` as whole tokens."""
    if model is not None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model)
    from ._tokenizer import byte_chat_tokenizer

    return byte_chat_tokenizer(CHAT_TEMPLATE, markers=("<|im_start|>",), pieces=pieces, eos="<|im_end|>")


def _build_tiny(out: Path, pieces: Sequence[str], *, hidden_size: int, layers: int, seed: int) -> None:
    from ._tokenizer import save_random_qwen2

    tokenizer = base_tokenizer(None, pieces)
    save_random_qwen2(out, tokenizer, hidden_size=hidden_size, layers=layers, seed=seed, max_positions=1024)


def _key(spec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps({**spec, "v": _FORMAT_VERSION}, sort_keys=True).encode()).hexdigest()[
        :16
    ]


def warm_start(
    spec: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    pieces: Sequence[str],
    cache_dir: Path,
    evaluate: Callable[[Any, Any], dict[str, float]],
    log: Callable[[str], None] = print,
) -> tuple[Path, dict[str, Any]]:
    """The warm-started checkpoint for ``spec`` (built, trained and cached on first use) and its record.

    ``spec`` holds everything that defines the weights: ``model`` (None for the tiny Qwen2, else a
    path), ``hidden_size``, ``layers``, ``warm_steps``, ``warm_lr``, ``warm_batch``, ``seed`` and the
    task/data identifiers. ``rows`` are prompt/completion chat rows for ``SFTTrainer``. ``evaluate``
    scores a (model, tokenizer) on the held-out set; its result is stored with the checkpoint.
    ``warm_steps == 0`` takes no supervised step: a ``model`` path is used as it is (only the record
    is cached), the tiny model is its random initialisation.
    """
    key = _key(spec)
    final = Path(cache_dir) / f"warm-{key}"
    record_file = final / "corrgrpo_warm_start.json"
    if record_file.is_file():
        record = json.loads(record_file.read_text())
        log(f"warm start: cached checkpoint {record.get('checkpoint', final)}")
        return Path(record.get("checkpoint", final)), record

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".warm-{key}-", dir=final.parent))
    try:
        base = spec["model"]
        if base is None:
            base = work / "init"
            _build_tiny(
                base, pieces, hidden_size=spec["hidden_size"], layers=spec["layers"], seed=spec["seed"]
            )
        tokenizer = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        log(f"warm start: {count_parameters(model):,} parameters, {spec['warm_steps']} supervised steps")
        sft: dict[str, float] = {"train_runtime": 0.0, "train_loss": math.nan}
        if spec["warm_steps"] > 0:
            sft = _supervised(model, tokenizer, spec, rows, work / "sft")
        target = work / "warm"
        if spec["model"] is None or spec["warm_steps"] > 0:
            model.save_pretrained(str(target))
            tokenizer.save_pretrained(str(target))
            checkpoint = final
        else:  # the checkpoint itself: no copy, only the record is cached
            target.mkdir()
            checkpoint = Path(spec["model"]).resolve()
        scores = evaluate(model, tokenizer)
        record = {
            "spec": dict(spec),
            "key": key,
            "checkpoint": str(checkpoint),
            "parameters": count_parameters(model),
            "sft_steps": spec["warm_steps"],
            "sft_seconds": float(sft.get("train_runtime", 0.0)),
            "sft_final_loss": float(sft.get("train_loss", math.nan)),
            "held_out": scores,
        }
        (target / "corrgrpo_warm_start.json").write_text(json.dumps(record, indent=1, default=str))
        if final.exists():  # another process finished first; keep its copy
            record = json.loads(record_file.read_text())
            return Path(record.get("checkpoint", final)), record
        os.replace(target, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"warm start: cached at {final}")
    return checkpoint, record


def _supervised(
    model: Any, tokenizer: Any, spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], out: Path
) -> dict[str, float]:
    """``spec['warm_steps']`` steps of TRL's SFTTrainer on ``rows`` (AdamW at ``warm_lr`` after a
    10% warm-up of at most 20 steps, then constant; loss on the completion tokens); TRL's metrics."""
    import datasets
    from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined,unused-ignore]  # lazy names in trl

    steps = spec["warm_steps"]
    checkpointing: dict[str, Any] = checkpointing_option(False)
    args = SFTConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=spec["warm_batch"],
        learning_rate=spec["warm_lr"],
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=min(20, steps // 10),
        weight_decay=0.0,
        logging_steps=max(1, steps // 10),
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=spec["seed"],
        disable_tqdm=True,
        max_length=512,
        packing=False,
        dataloader_num_workers=0,
        **checkpointing,
    )
    train = datasets.Dataset.from_list([dict(r) for r in rows])
    trainer = SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    quiet_trainer(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers 5's checkpointing renames
        result = trainer.train()
    return {k: float(v) for k, v in result.metrics.items() if isinstance(v, (int, float))}
