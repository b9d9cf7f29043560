"""Shared helpers for the OpenRLHF adapter tests: stubs, OpenRLHF objects built with its own classes.

OpenRLHF's wheel installs a top-level ``tests`` package into site-packages. Nothing here imports a
module by a ``tests.`` name: helpers live in this conftest (fixtures) and the stub module is loaded
from its file, so that package can never shadow ours (``test_launcher.py`` checks this).
"""

from __future__ import annotations

import copy
import importlib.util
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
STUBS_MODULE = "corrgrpo_openrlhf_stubs"


def _load_stubs() -> Any:
    if STUBS_MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(STUBS_MODULE, HERE / f"{STUBS_MODULE}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[STUBS_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[STUBS_MODULE]


if importlib.util.find_spec("openrlhf") is not None:  # else tests/conftest.py skips this folder unimported
    _load_stubs().install()
    with warnings.catch_warnings():
        # deepspeed and transformers warn at import time (accelerator detection, deprecations); the
        # suite's filterwarnings=error must judge our code, not their import side effects.
        warnings.simplefilter("ignore")
        import torch
        from openrlhf.models.loss import PolicyLoss
        from openrlhf.trainer.ppo_utils.experience import Experience
        from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    from corrgrpo_adapters.openrlhf import hook
    from corrgrpo_adapters.openrlhf.config import AdapterConfig


def make_args(n_samples: int, *, overlong_buffer_len: float | None = None, max_new_tokens: int = 8) -> Any:
    """The slice of OpenRLHF's hierarchised CLI namespace that the advantage step reads."""
    return SimpleNamespace(
        rollout=SimpleNamespace(n_samples_per_prompt=n_samples, max_new_tokens=max_new_tokens),
        data=SimpleNamespace(max_len=64),
        reward=SimpleNamespace(
            clip_range=(-10.0, 10.0),
            overlong_buffer_len=overlong_buffer_len,
            overlong_penalty_factor=1.0,
            stop_properly_penalty_coef=None,
        ),
        algo=SimpleNamespace(
            advantage=SimpleNamespace(estimator="group_norm", gamma=1.0, lambd=1.0, no_std_norm=False)
        ),
    )


def make_maker(args: Any, *, kl_coef: float = 0.0) -> Any:
    """A real ``RemoteExperienceMaker`` without its Ray model groups (the advantage step needs none)."""
    maker = RemoteExperienceMaker.__new__(RemoteExperienceMaker)
    maker.strategy = SimpleNamespace(args=args)
    maker.args = args
    maker.advantage_estimator = args.algo.advantage.estimator
    maker.kl_ctl = SimpleNamespace(value=kl_coef)
    return maker


def make_experiences(
    components: dict[str, torch.Tensor],
    *,
    n_samples: int,
    micro_batch: int,
    seed: int = 0,
    max_len: int = 6,
) -> list[Any]:
    """Micro-batches of real ``Experience`` objects, as OpenRLHF's ``split_rollout_samples`` makes them.

    ``components`` are per-sample tensors in prompt order (sample ``i`` of prompt ``i // n_samples``).
    Samples are shuffled before they are cut into micro-batches, so groups span several experiences
    and ``Experience.index`` is not sorted: the adapter must use it, not the batch order.
    """
    gen = torch.Generator().manual_seed(seed)
    total = len(next(iter(components.values())))
    assert total % n_samples == 0
    order = torch.randperm(total, generator=gen).tolist()
    lengths = torch.randint(1, max_len + 1, (total,), generator=gen)
    experiences = []
    for start in range(0, total, micro_batch):
        idx = order[start : start + micro_batch]
        width = int(lengths[idx].max())
        mask = torch.arange(width)[None, :] < lengths[idx][:, None]
        info = {key: value[idx].clone() for key, value in components.items()}
        rewards = sum(value[idx] for value in components.values())
        assert isinstance(rewards, torch.Tensor)
        info["reward"] = rewards.clone()
        experiences.append(
            Experience(
                sequences=torch.randint(3, 100, (len(idx), width), generator=gen) * mask,
                attention_mask=mask.long(),
                index=list(idx),
                rewards=rewards,
                action_mask=mask,
                kl=torch.rand(len(idx), width, generator=gen) * mask,
                values=torch.zeros(len(idx), width),
                response_length=lengths[idx].float(),
                info=info,
            )
        )
    return experiences


def prompt_order(experiences: Sequence[Any], per_experience: Sequence[torch.Tensor]) -> torch.Tensor:
    """Put per-sample values (one tensor per experience) back in prompt order."""
    index = torch.tensor([i for e in experiences for i in e.index])
    out = torch.empty(len(index), dtype=per_experience[0].dtype)
    out[index] = torch.cat(list(per_experience))
    return out


@pytest.fixture
def patch_with() -> Iterator[Any]:
    """``patch_with(config)`` patches OpenRLHF in this process; the original methods come back after."""

    def apply(config: AdapterConfig) -> None:
        hook.patch_openrlhf(config)

    yield apply
    hook.unpatch_openrlhf()


class ReachedTraining(Exception):
    """Raised in place of OpenRLHF's first training step, carrying its fully validated arguments."""


@pytest.fixture
def openrlhf_cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``openrlhf_cli(argv)`` runs OpenRLHF's real CLI through the launcher's runner, up to training.

    OpenRLHF's parser and all of its argument checks run; ``train()`` stops at its first call
    (``get_strategy``), before it would start Ray or build GPU actors, and the parsed arguments
    come back.
    """
    import openrlhf.utils
    import ray

    from corrgrpo_adapters.openrlhf import launcher

    def reached(args: Any) -> None:
        raise ReachedTraining(args)

    monkeypatch.setattr(openrlhf.utils, "get_strategy", reached)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # as under the launcher's main()

    def run(argv: Sequence[str]) -> Any:
        with pytest.raises(ReachedTraining) as stopped:
            launcher.run_openrlhf(argv)
        return stopped.value.args[0]

    return run


@pytest.fixture(scope="session")
def orl() -> SimpleNamespace:
    """OpenRLHF's classes and this file's builders, for test modules (which cannot import conftest)."""
    return SimpleNamespace(
        Experience=Experience,
        PolicyLoss=PolicyLoss,
        RemoteExperienceMaker=RemoteExperienceMaker,
        make_args=make_args,
        make_maker=make_maker,
        make_experiences=make_experiences,
        prompt_order=prompt_order,
        copy=copy.deepcopy,
        here=HERE,
        stubs_module=STUBS_MODULE,
    )
