"""TRL entry point of the recipes: ``python -m corrgrpo_tasks.recipes.trl_train --config JSON``.

The JSON is what :func:`corrgrpo_tasks.recipes.trl_config` resolves. The trainer is our TRL adapter's
``GRPOTrainer`` subclass when ``corrgrpo_adapters.trl`` provides one (any estimator); without it, plain
TRL covers ``grpo`` (``sum_then_normalize``) and ``gdpo`` (``normalize_then_sum``). Agent security runs
multi-turn through TRL's ``environment_factory``: one AgentDojo environment class per suite, chosen by
the row's ``environment`` column (added here from ``extra_info.suite``).
"""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo_tasks.domains import get_domain

FRAMEWORK = "trl"  # the framework this entry point trains with: the key of the specs' entries it reads
_PLAIN_TRL = {"grpo": "sum_then_normalize", "gdpo": "normalize_then_sum"}


def load_prompts(files: str) -> Any:
    """Load comma-separated parquet/JSON(L) files as one ``datasets.Dataset`` TRL can train on.

    A ``ground_truth`` column is added from verl's ``reward_model.ground_truth`` when missing, so the
    files prepared for verl serve TRL unchanged.
    """
    import datasets

    paths = [p for p in files.split(",") if p]
    kind = "parquet" if all(p.endswith(".parquet") for p in paths) else "json"
    dataset = datasets.load_dataset(kind, data_files=paths, split="train")
    if "prompt" not in dataset.column_names:
        raise ValueError(f"{files}: no 'prompt' column (have {dataset.column_names})")
    if "ground_truth" not in dataset.column_names:
        if "reward_model" not in dataset.column_names:
            raise ValueError(f"{files}: neither 'ground_truth' nor 'reward_model' column")
        dataset = dataset.map(lambda row: {"ground_truth": row["reward_model"]["ground_truth"]})
    return dataset


def reward_functions(
    domain: str, reward_keys: Sequence[str], reward_kwargs: Mapping[str, Any] | None = None
) -> list[Callable[..., list[float]]]:
    """The domain's TRL reward functions, one per key, in ``reward_keys`` order (``reward_kwargs`` the
    domain's ``trl_reward_functions`` does not take are left out)."""
    spec = get_domain(domain)
    if FRAMEWORK not in spec.rewards:
        raise ValueError(f"no TRL reward functions for domain {domain!r}")
    trl_reward_functions = spec.reward(FRAMEWORK)
    accepted = inspect.signature(trl_reward_functions).parameters
    kwargs = {k: v for k, v in (reward_kwargs or {}).items() if k in accepted}
    by_name = {fn.__name__: fn for fn in trl_reward_functions(**kwargs)}
    missing = [k for k in reward_keys if k not in by_name]
    if missing:
        raise ValueError(f"{domain} has no TRL reward function for {missing}; it has {sorted(by_name)}")
    return [by_name[k] for k in reward_keys]


def _adapter_classes() -> tuple[type, type] | None:
    """Our adapter's (trainer, config) subclasses of TRL's GRPO classes, if the adapter is installed."""
    import trl

    try:
        import corrgrpo_adapters.trl as adapter
    except ImportError:
        return None
    try:  # the adapter's documented names (resolved lazily by the adapter package)
        return adapter.CorrGRPOTrainer, adapter.CorrGRPOConfig
    except AttributeError:
        pass
    members = [v for v in vars(adapter).values() if isinstance(v, type)]
    trainers = [c for c in members if issubclass(c, trl.GRPOTrainer) and c is not trl.GRPOTrainer]
    configs = [c for c in members if issubclass(c, trl.GRPOConfig) and c is not trl.GRPOConfig]
    if len(trainers) != 1 or len(configs) != 1:
        return None
    return trainers[0], configs[0]


def resolve_trainer(estimator: str, *, use_adapter: bool | None = None) -> tuple[type, type, dict[str, Any]]:
    """(trainer class, config class, config kwargs selecting ``estimator``).

    ``use_adapter``: True requires our adapter, False forces plain TRL, None (default) prefers the adapter.
    """
    import trl

    found = _adapter_classes() if use_adapter is not False else None
    if found is not None:
        return found[0], found[1], {"advantage_estimator": estimator}
    if use_adapter:
        raise RuntimeError(
            "corrgrpo_adapters.trl (the TRL adapter) is not installed or defines no "
            "GRPOTrainer/GRPOConfig subclass"
        )
    if estimator not in _PLAIN_TRL:
        raise RuntimeError(
            f"estimator {estimator!r} needs corrgrpo_adapters.trl; plain TRL offers {sorted(_PLAIN_TRL)}"
        )
    return trl.GRPOTrainer, trl.GRPOConfig, {"multi_objective_aggregation": _PLAIN_TRL[estimator]}


def build_trainer(
    config: Mapping[str, Any],
    *,
    model: Any = None,
    processing_class: Any = None,
    use_adapter: bool | None = None,
) -> Any:
    """A ready-to-``train()`` trainer for a resolved recipe config (``model`` defaults to its path)."""
    trainer_cls, config_cls, selection = resolve_trainer(config["estimator"], use_adapter=use_adapter)
    grpo_args = {k: v for k, v in config["grpo_config"].items() if v is not None}
    reward_kwargs = dict(config.get("reward_kwargs") or {})
    spec = get_domain(config["domain"])
    if processing_class is None and spec.trl_tokenizer:
        processing_class = _tokenizer(model if model is not None else config["model"])
    if processing_class is not None:
        # A reward that decodes the completion tokens itself (skipping special tokens, as verl does) takes
        # the tokenizer, so one that parses tool calls out of TRL's conversational completions loses
        # nothing; rewards without a ``tokenizer`` keyword are not given it (:func:`reward_functions`).
        reward_kwargs.setdefault("tokenizer", getattr(processing_class, "tokenizer", processing_class))
    args = config_cls(**grpo_args, **selection)
    train = load_prompts(config["train_files"])
    evaluation = (
        load_prompts(config["val_files"])
        if config.get("val_files") and grpo_args.get("eval_strategy", "no") != "no"
        else None
    )
    environments: dict[str, Any] = {}
    setup = spec.agent_loop(FRAMEWORK)
    if setup is not None:
        train, evaluation, environments = setup(train, evaluation, processing_class, config)
    return trainer_cls(
        model=model if model is not None else config["model"],
        reward_funcs=reward_functions(config["domain"], config["reward_keys"], reward_kwargs),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=processing_class,
        **environments,
    )


def _tokenizer(model: Any) -> Any:
    """The tokenizer TRL would load for ``model`` (a path or a loaded model), or None if it has no path."""
    path = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "")
    if not path:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, truncation_side="left", padding_side="left")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="the recipe's resolved config as JSON")
    source.add_argument("--config-file", help="a file holding that JSON")
    parser.add_argument("--plain-trl", action="store_true", help="use TRL's own GRPOTrainer (grpo/gdpo only)")
    args = parser.parse_args(argv)
    config = json.loads(args.config if args.config else Path(args.config_file).read_text())
    trainer = build_trainer(config, use_adapter=False if args.plain_trl else None)
    trainer.train()
    trainer.save_model()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
