"""The OpenRLHF recipes go through our launcher and OpenRLHF 0.11.2's own parser and argument checks.

Needs the openrlhf environment (listed in ci/envs/openrlhf/recipes.args). OpenRLHF's CLI imports vLLM and
flash-attn at module level; the OpenRLHF adapter suite's stub module stands in for them (loaded by path,
as that suite does), and ``train()`` is stopped at its first step, before Ray or any GPU work.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from corrgrpo_tasks.recipes import SUPPORTED, build_recipe

STUBS = Path(__file__).resolve().parents[2] / "adapters" / "openrlhf" / "corrgrpo_openrlhf_stubs.py"
DOMAINS = [d for d, frameworks in SUPPORTED.items() if "openrlhf" in frameworks]


class _Reached(Exception):
    pass


@pytest.fixture(scope="module")
def openrlhf_parse() -> Any:
    if "corrgrpo_openrlhf_stubs" not in sys.modules:
        spec = importlib.util.spec_from_file_location("corrgrpo_openrlhf_stubs", STUBS)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["corrgrpo_openrlhf_stubs"] = module
        spec.loader.exec_module(module)
    sys.modules["corrgrpo_openrlhf_stubs"].install()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deepspeed/transformers import-time warnings are not ours
        import openrlhf.utils
        import ray

        from corrgrpo_adapters.openrlhf import launcher

    def reached(args: Any) -> None:
        raise _Reached(args)

    patch = pytest.MonkeyPatch()
    patch.setattr(openrlhf.utils, "get_strategy", reached)
    patch.setattr(ray, "is_initialized", lambda: True)

    def parse(argv: list[str]) -> tuple[Any, Any]:
        launch = launcher.parse_launch(argv, environ={})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(_Reached) as stopped:
                launcher.run_openrlhf(launch.openrlhf_argv)
        return launch.config, stopped.value.args[0]

    yield parse
    patch.undo()


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("estimator", ["corrgrpo", "grpo", "gdpo"])
def test_recipe_passes_the_launcher_and_openrlhf(domain: str, estimator: str, openrlhf_parse: Any) -> None:
    recipe = build_recipe(domain, "openrlhf", estimator=estimator)
    assert recipe.argv[1:3] == ("-m", "corrgrpo_adapters.openrlhf")
    config, args = openrlhf_parse(list(recipe.argv[3:]))
    hp = recipe.hparams
    assert config.estimator == estimator
    assert config.reward_keys == hp.reward_keys
    assert args.algo.advantage.estimator == "group_norm"
    assert args.rollout.n_samples_per_prompt == hp.group_size
    assert args.rollout.batch_size == hp.train_batch_size
    assert args.train.batch_size == hp.mini_batch_size * hp.group_size
    assert args.actor.adam.lr == hp.lr
    assert args.algo.kl.use_loss is hp.use_kl_loss
