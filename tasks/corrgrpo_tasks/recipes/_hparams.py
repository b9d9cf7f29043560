"""The paper's training hyperparameters per domain, and ``name=value`` overrides of them."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corrgrpo_tasks.domains import get_domain


def estimator_names() -> tuple[str, ...]:
    """The core's estimator names (its registry's, user-registered ones included)."""
    import corrgrpo_core

    return tuple(corrgrpo_core.estimator_names())


def reward_keys(domain: str) -> tuple[str, ...]:
    """The domain's reward components, as its reward declares them (``COMPONENTS``)."""
    return get_domain(domain).components


@dataclass(frozen=True)
class HParams:
    """Every knob a recipe sets; defaults are per domain (:func:`defaults`), all overridable.

    Batch sizes count prompts (verl's convention); ``group_size`` rollouts are drawn per prompt.
    """

    model: str
    train_files: str
    val_files: str
    reward_keys: tuple[str, ...]
    reward_weights: tuple[float, ...] | None = None
    lr: float = 1e-6
    weight_decay: float = 0.01
    train_batch_size: int = 128
    group_size: int = 4
    mini_batch_size: int = 32
    ppo_epochs: int = 1
    epochs: int = 15
    max_steps: int | None = None
    max_prompt_length: int = 2048
    max_response_length: int = 2048
    max_token_len_per_gpu: int = 24576
    use_kl_loss: bool = False
    kl_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    entropy_coeff: float = 0.0
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    temperature: float = 1.0
    top_p: float = 1.0
    gpu_memory_utilization: float = 0.8
    n_gpus: int = 1
    nnodes: int = 1
    tensor_parallel: int = 1
    save_freq: int = 100
    test_freq: int = 10
    val_before_train: bool = False
    seed: int = 42
    project_name: str = "corrgrpo"
    experiment_name: str = ""
    output_dir: str = "checkpoints"
    logger: str = "console"
    # verl: the legacy (non-V1) trainer keeps per-sample reward components next to the batch.
    verl_legacy_trainer: bool = True
    # TRL: completions per device per forward pass; vLLM for generation.
    per_device_batch_size: int = 8
    use_vllm: bool = True
    bf16: bool = True
    gradient_checkpointing: bool = True
    # Agent security: the multi-turn loop.
    multi_turn: bool = False
    max_turns: int = 8
    max_tool_response_length: int = 2048
    # verl runs this many tool calls of one turn and drops the rest silently (1 in the paper's runs).
    max_parallel_calls: int = 1
    agent_loop_config: str = ""  # agent security: the shipped corrgrpo_tasks.agent_security.AGENT_LOOP_CONFIG
    tool_config: str = ""  # a verl tool config; AgentDojo's tools come from the case's suite instead
    reward_kwargs: tuple[tuple[str, Any], ...] = field(default=())
    # The reward's definition: "paper" (the authors' reward, bit for bit) or "hardened" (closes the
    # ways the paper's definition can be gamed; docs/tasks.md, "Reward profiles").
    profile: str = "paper"

    def weights(self) -> tuple[float, ...]:
        """Component weights, all 1 unless set (the paper sets none)."""
        return self.reward_weights if self.reward_weights is not None else (1.0,) * len(self.reward_keys)


def defaults(domain: str) -> HParams:
    """The paper's settings for ``domain`` (its launchers; upstream verl defaults elsewhere), from its
    :class:`~corrgrpo_tasks.domains.DomainSpec`."""
    try:
        spec = get_domain(domain)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return HParams(**spec.recipe_defaults())


def _convert(name: str, annotation: Any, text: str) -> Any:
    if name == "reward_kwargs":
        pairs = []
        for item in text.split(","):
            key, sep, value = item.partition(":")
            if not sep:
                raise ValueError(f"override reward_kwargs={text!r}: expected key:value[,key:value]")
            pairs.append((key.strip(), _literal(value.strip())))
        return tuple(pairs)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if text.lower() in ("none", "null", ""):
            return None
        return _convert(name, next(a for a in args if a is not type(None)), text)
    if annotation is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"override {name}={text!r}: expected true or false")
    if annotation in (int, float, str):
        try:
            return annotation(text)
        except ValueError:
            raise ValueError(f"override {name}={text!r}: expected {annotation.__name__}") from None
    if origin is tuple and args and args[-1] is Ellipsis:
        items = [p.strip() for p in text.strip().strip("[]()").split(",") if p.strip()]
        return tuple(_convert(name, args[0], item) for item in items)
    raise ValueError(f"override {name}: unsupported type {annotation}")


def _literal(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def apply_overrides(hparams: HParams, overrides: Sequence[str] | Mapping[str, Any]) -> HParams:
    """``hparams`` with ``name=value`` overrides (strings, converted by field type) or a mapping applied.

    >>> apply_overrides(defaults("tool_calling"), ["lr=2e-6", "group_size=8"]).group_size
    8
    """
    hints = typing.get_type_hints(HParams)
    known = {f.name for f in dataclasses.fields(HParams)}
    changes: dict[str, Any] = {}
    items = overrides.items() if isinstance(overrides, Mapping) else (_split(o) for o in overrides)
    for name, value in items:
        if name not in known:
            raise ValueError(
                f"unknown hyperparameter {name!r}; known: {sorted(known)} "
                "(framework-specific settings go after '--')"
            )
        changes[name] = _convert(name, hints[name], value) if isinstance(value, str) else value
    result = dataclasses.replace(hparams, **changes)
    _validate(result)
    return result


def _split(override: str) -> tuple[str, str]:
    name, sep, value = override.partition("=")
    if not sep or not name:
        raise ValueError(f"override {override!r} is not name=value")
    return name.strip(), value


def _validate(hp: HParams) -> None:
    if any(key == "profile" for key, _ in hp.reward_kwargs):
        raise ValueError("set the reward profile with profile=..., not in reward_kwargs")
    if hp.reward_weights is not None and len(hp.reward_weights) != len(hp.reward_keys):
        raise ValueError(f"{len(hp.reward_weights)} reward_weights for {len(hp.reward_keys)} reward_keys")
    for name in (
        "train_batch_size",
        "group_size",
        "mini_batch_size",
        "epochs",
        "n_gpus",
        "per_device_batch_size",
    ):
        if getattr(hp, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(hp, name)}")
    if hp.train_batch_size % hp.mini_batch_size:
        raise ValueError(
            f"train_batch_size {hp.train_batch_size} is not a multiple of mini_batch_size "
            f"{hp.mini_batch_size}"
        )
