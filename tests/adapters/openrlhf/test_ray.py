"""The launcher's setup hook reaches a real Ray actor, and the patched computation runs there.

One local Ray session (1 CPU, no dashboard) serves the whole module. The fixture runs the launcher's
``main``, which starts Ray and runs OpenRLHF's real entry point (parser, checks, ``train()``). Where
``train()`` would build its first GPU object (``get_strategy``), a probe takes over: it starts a Ray
actor that runs ``RemoteExperienceMaker.compute_advantages_and_returns`` on real ``Experience``
objects and OpenRLHF's ``PolicyLoss`` (patched to CISPO), and reports back. ``main`` then shuts Ray
down on the way out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import ray
import torch

import corrgrpo_core as cc
from corrgrpo_adapters import METRIC_PREFIX
from corrgrpo_adapters.openrlhf import launcher

pytestmark = [
    pytest.mark.slow,
    # Ray's own start-up and shutdown emit these from its threads; they are not about our code.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Tip. In future versions of Ray:FutureWarning"),
    # OpenRLHF turns on Ray's zero-copy tensors, whose read-only buffers torch warns about.
    pytest.mark.filterwarnings("ignore:The given NumPy array is not writable:UserWarning"),
]

N_SAMPLES = 4
KEYS = ("acc", "fmt")


@ray.remote(num_cpus=1)
class _Probe:
    """Runs in a Ray worker process: everything it sees was set up by the runtime_env's hooks."""

    def report(self, components: dict[str, Any]) -> dict[str, Any]:
        import os
        import sys
        from types import SimpleNamespace

        from openrlhf.models.loss import PolicyLoss
        from openrlhf.trainer.ppo_utils.experience import Experience
        from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

        from corrgrpo_adapters.openrlhf import hook

        n = len(components[KEYS[0]])
        maker = RemoteExperienceMaker.__new__(RemoteExperienceMaker)
        args = SimpleNamespace(
            rollout=SimpleNamespace(n_samples_per_prompt=N_SAMPLES),
            reward=SimpleNamespace(clip_range=(-10.0, 10.0)),
            algo=SimpleNamespace(advantage=SimpleNamespace(estimator="group_norm", gamma=1.0)),
        )
        maker.strategy, maker.advantage_estimator = SimpleNamespace(args=args), "group_norm"
        maker.kl_ctl = SimpleNamespace(value=0.0)
        half = n // 2
        experiences = [
            Experience(
                index=list(range(lo, hi)),
                rewards=components["acc"][lo:hi].clone(),
                action_mask=torch.ones(hi - lo, 3, dtype=torch.bool),
                kl=torch.zeros(hi - lo, 3),
                info={k: v[lo:hi].clone() for k, v in components.items()},
            )
            for lo, hi in ((0, half), (half, n))
        ]
        out = maker.compute_advantages_and_returns(experiences)
        log_probs = torch.log(torch.linspace(0.1, 0.9, 6)).reshape(2, 3)
        advantages = torch.tensor([[1.0], [-1.0]]).expand(2, 3)  # token-level, as OpenRLHF passes them
        cispo = PolicyLoss(0.2, 0.28)(log_probs, log_probs.flip(1), advantages, torch.ones(2, 3))
        return {
            "pid": os.getpid(),
            "patched": hook.is_patched(),
            "stubbed": "vllm" in sys.modules and not hasattr(sys.modules["vllm"], "__file__"),
            "advantages": torch.cat([e.advantages[:, 0] for e in out]),
            "metrics": sorted(k for k in out[0].info if k.startswith(METRIC_PREFIX)),
            "cispo_loss": cispo[0],
        }


class _ReachedTraining(Exception):
    pass


@pytest.fixture(scope="module")
def ray_run(orl) -> dict[str, Any]:
    import os

    gen = torch.Generator().manual_seed(0)
    components = {"acc": (torch.rand(16, generator=gen) > 0.5).float(), "fmt": torch.rand(16, generator=gen)}
    seen: dict[str, Any] = {}

    def start_of_training(args: Any) -> None:
        # OpenRLHF's train() has parsed and checked its arguments and found Ray up; its next step
        # (the DeepSpeed strategy, then GPU actors) needs GPUs, so the probe takes over from here.
        seen["args"] = args
        seen["runtime_env"] = ray.get_runtime_context().runtime_env
        seen["report"] = ray.get(_Probe.remote().report.remote(components), timeout=240)
        raise _ReachedTraining

    ray_init = {
        "address": "local",  # a fresh local Ray, never a cluster some other process started
        "num_cpus": 1,
        "include_dashboard": False,
        "log_to_driver": False,
        # The workers need the test-only stubs (chained before our hook) and the folder they live in.
        "runtime_env": {
            "worker_process_setup_hook": f"{orl.stubs_module}.install",
            "env_vars": {"PYTHONPATH": str(orl.here)},
        },
    }
    # fmt: off
    argv = [
        "--corrgrpo.estimator", "corrgrpo",
        "--corrgrpo.reward_keys", *KEYS,
        "--corrgrpo.policy_loss", "cispo",
        "--corrgrpo.ray_init", json.dumps(ray_init),
        "--rollout.n_samples_per_prompt", str(N_SAMPLES),
    ]
    # fmt: on
    import openrlhf.utils

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openrlhf.utils, "get_strategy", start_of_training)
        with pytest.raises(_ReachedTraining):
            launcher.main(argv)  # the real launcher, running OpenRLHF's real entry point
    seen["ray_down"] = not ray.is_initialized()
    seen["components"] = components
    seen["driver_pid"] = os.getpid()
    return seen


def test_patched_computation_runs_in_a_ray_actor(ray_run):
    report = ray_run["report"]
    assert report["pid"] != ray_run["driver_pid"]  # really another process
    assert report["patched"] == {"compute_advantages_and_returns": True, "policy_loss": True}
    assert report["stubbed"]  # the user's hook ran there too (before ours)

    scores = torch.stack([ray_run["components"][k] for k in KEYS], dim=-1)
    expected = cc.compute_advantages(scores, torch.arange(16) // N_SAMPLES, estimator="corrgrpo")
    torch.testing.assert_close(report["advantages"], expected)
    assert "corrgrpo/c_q/mean" in report["metrics"]


def test_cispo_loss_runs_in_a_ray_actor(ray_run, orl):
    from corrgrpo_core.objectives import cispo_loss

    log_probs = torch.log(torch.linspace(0.1, 0.9, 6)).reshape(2, 3)
    advantages, mask = torch.tensor([[1.0], [-1.0]]).expand(2, 3), torch.ones(2, 3)
    expected = cispo_loss(log_probs, log_probs.flip(1), advantages, mask, eps_low=0.2, eps_high=0.28).loss
    torch.testing.assert_close(ray_run["report"]["cispo_loss"], expected)
    # The driver was never patched: its PolicyLoss is OpenRLHF's PPO, whose value differs here.
    ppo = orl.PolicyLoss(0.2, 0.28)(log_probs, log_probs.flip(1), advantages, mask)[0]
    assert not torch.allclose(ppo, expected)


def test_launcher_started_ray_ran_openrlhf_and_shut_ray_down(ray_run):
    env = ray_run["runtime_env"]
    assert env["worker_process_setup_hook"] == launcher.SETUP_HOOK
    assert json.loads(env["env_vars"]["CORRGRPO_OPENRLHF_CONFIG"])["user_setup_hook"].endswith(".install")
    args = ray_run["args"]  # as OpenRLHF's own parser made them from the launcher's argv
    assert args.algo.advantage.estimator == "group_norm"
    assert args.rollout.n_samples_per_prompt == N_SAMPLES
    assert ray_run["ray_down"]
