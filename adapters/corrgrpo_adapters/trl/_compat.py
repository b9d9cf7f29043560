"""Fail at construction, not mid-training, when the installed TRL moved the methods we hook."""

from __future__ import annotations

import inspect
from typing import Any

from .. import RANGES, warn_outside_range

__all__ = ["SUPPORTED_TRL", "UnsupportedTRLError", "check_trl_compatibility"]

#: TRL versions whose GRPOTrainer has the hooks below with these signatures and semantics; CI runs the
#: adapter's tests at both ends (corrgrpo_adapters.RANGES).
SUPPORTED_TRL = RANGES["trl"].requirement

# The adapter overrides these two methods (and reads the attributes) of trl.GRPOTrainer.
HOOKS: dict[str, tuple[str, ...]] = {
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_generate_and_score_completions": ("self", "inputs"),
}
INSTANCE_ATTRIBUTES = (
    "reward_weights",
    "reward_func_names",
    "num_generations",
    "num_generations_eval",
    "_metrics",
    "_logs",
    "accelerator",
)


class UnsupportedTRLError(RuntimeError):
    """The installed TRL lacks a GRPOTrainer method or attribute the adapter hooks into."""


def _fail(problems: list[str]) -> UnsupportedTRLError:
    import trl

    return UnsupportedTRLError(
        f"corrgrpo_adapters.trl supports {RANGES['trl'].describe()}, but the installed "
        f"trl {getattr(trl, '__version__', '?')} does not match: {'; '.join(problems)}. "
        f"Install a supported TRL with: pip install 'corrgrpo-core[trl]'"
    )


def check_trl_compatibility(trainer_cls: type | None = None) -> None:
    """Raise :class:`UnsupportedTRLError` when ``trainer_cls`` (default ``trl.GRPOTrainer``) lacks a
    hooked method or its signature changed; warn when they match but the version is outside the range."""
    import trl

    cls = trainer_cls if trainer_cls is not None else trl.GRPOTrainer  # type: ignore[attr-defined]
    problems = []
    for name, expected in HOOKS.items():
        method = getattr(cls, name, None)
        if not callable(method):
            problems.append(f"GRPOTrainer.{name} is missing")
            continue
        got = tuple(inspect.signature(method).parameters)
        if got != expected:
            problems.append(f"GRPOTrainer.{name}{_sig(got)} is not {name}{_sig(expected)}")
    if problems:
        raise _fail(problems)
    warn_outside_range("trl", getattr(trl, "__version__", None), stacklevel=3)


def check_trainer_attributes(trainer: Any) -> None:
    """The instance attributes the adapter reads, checked right after GRPOTrainer.__init__."""
    missing = [name for name in INSTANCE_ATTRIBUTES if not hasattr(trainer, name)]
    if missing:
        raise _fail([f"GRPOTrainer instances lack {', '.join(missing)}"])


def _sig(params: tuple[str, ...]) -> str:
    return f"({', '.join(params)})"
