"""Shared helpers for the verl adapter tests: real verl code (each end of the supported range),
synthetic batches, no GPU, no network."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _pytest.config import parse_warning_filter

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

if find_spec("verl") is not None:  # else tests/conftest.py skips this folder without importing it
    # verl's config folder (ppo_trainer.yaml and its defaults), found without importing verl.
    VERL_CONFIG_DIR = next(
        Path(p) / "verl" / "trainer" / "config"
        for p in sys.path
        if (Path(p) / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file()
    )

# A verl GRPO launch (from verl's GSM8K GRPO example) that the adapter's overrides are added to.
GRPO_RECIPE = [
    "algorithm.adv_estimator=grpo",
    "data.train_files=/data/gsm8k/train.parquet",
    "data.val_files=/data/gsm8k/test.parquet",
    "data.train_batch_size=16",
    "data.max_prompt_length=512",
    "data.max_response_length=512",
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    "reward.custom_reward_function.path=my_reward.py",
    "reward.custom_reward_function.name=compute_score",
    "trainer.n_gpus_per_node=2",
    "trainer.nnodes=1",
    "trainer.logger=[console]",
]

# What a user adds to switch that launch to CorrGRPO (docs/adapters/verl.md shows the same lines).
CORRGRPO_OVERRIDES = [
    "algorithm.adv_estimator=corrgrpo",
    "+algorithm.reward_keys=[acc,fmt]",
    "trainer.v1.trainer_mode=corrgrpo",
]


# verl, ray and tensordict warn at import about optional engines and their own deprecations; the
# project turns warnings into errors, so silence exactly those.
_FRAMEWORK_WARNINGS = (
    "ignore:.*engine is not available:UserWarning",
    # verl 0.9.0's ray_trainer imports its MindSpeed engine, whose router-replay patch warns without megatron
    "ignore:NPU not support router replay:UserWarning",
    "ignore::DeprecationWarning",
    "ignore::FutureWarning",
    "ignore::PendingDeprecationWarning",
    "ignore:.*NonTensorData.*:UserWarning",
    "ignore:.*nested tensors.*:UserWarning",
    "ignore::ResourceWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    for line in _FRAMEWORK_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
        # Loaded during collection (`pytest tests`), this conftest comes after pytest has set the
        # collection's filters, and the test modules import verl then: apply the filter there too.
        warnings.filterwarnings(*parse_warning_filter(line, escape=False))


def _compose(overrides: Sequence[str]) -> Any:
    """verl's own ``ppo_trainer`` config, composed by Hydra with ``overrides`` (what main_ppo receives)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(VERL_CONFIG_DIR), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))


def algorithm(**options: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create({"adv_estimator": "corrgrpo", "norm_adv_by_std_in_grpo": True, **options})


# A server for ``_run_python``: it imports once the packages every verl import pays for (torch and
# tensordict alone are most of verl's 20 s import on this 2-core machine; with datasets and peft, 85%
# of the 25 s the plugin tests' code takes to import) and that neither verl's plugin loading nor the
# environment variables the tests set touch, then forks one child per request.
# Each child is an interpreter in which nothing of verl or ours has been imported yet: it takes the
# request's environment and PYTHONPATH, runs the code as ``python -c`` would, and exits; the server
# sends back its exit status and output.
_FORK_SERVER = r"""
import builtins, importlib, importlib.util, json, os, signal, sys, tempfile, time, traceback, types


def pythonpath(value):  # the folders PYTHONPATH=value puts on sys.path: "" is the working folder
    folders = [os.path.abspath(p) if p else os.getcwd() for p in value.split(os.pathsep)] if value else []
    return list(dict.fromkeys(folders))


# sys.path less "" and PYTHONPATH's folders, taken before ray adds its own
BASE_PATH = [p for p in sys.path[1:] if p not in pythonpath(os.environ.get("PYTHONPATH", ""))]
for name in ("torch", "tensordict", "transformers", "ray", "datasets", "peft"):  # the preload
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name)

loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("verl", "corrgrpo_core", "corrgrpo_adapters"))
assert not loaded, f"the preload imported {loaded}: its children would not be fresh"


def child(request, out, err):
    importlib.invalidate_caches()  # files written since the server started (a test's PYTHONPATH folder)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    os.environ.clear()
    os.environ.update(request["env"])
    extra = pythonpath(request["env"].get("PYTHONPATH", ""))
    sys.path[:] = ["", *extra, *(p for p in BASE_PATH if p not in extra)]  # as a fresh `python -c` has it
    sys.argv[:] = ["-c"]
    main = sys.modules["__main__"] = types.ModuleType("__main__")  # the server's own globals stay apart
    main.__builtins__ = builtins
    try:
        exec(compile(request["code"], "<string>", "exec"), main.__dict__)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


def serve():
    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                return child(request, out, err)  # the child leaves the loop and exits as `python -c` does
            deadline = time.monotonic() + request["timeout"]
            while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            if done[0] == 0:
                os.kill(pid, signal.SIGKILL)
                done = os.waitpid(pid, 0)
            out.seek(0)
            err.seek(0)
            reply = {"returncode": os.waitstatus_to_exitcode(done[1]), "stdout": out.read(),
                     "stderr": err.read()}
        print(json.dumps(reply), flush=True)
    return 0


sys.exit(serve())
"""


class _ForkServer:
    """One ``_FORK_SERVER`` process per test session, started on first use."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def run(self, code: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"code": code, "env": env, "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the fork server exited with {self.proc.wait()}"
        reply = json.loads(line)
        return subprocess.CompletedProcess(
            [sys.executable, "-c", code], reply["returncode"], reply["stdout"], reply["stderr"]
        )

    def close(self) -> None:
        if self.proc is not None:
            self.proc.communicate()  # end of input: the server returns


def _run_python(
    code: str, *, env: dict[str, str] | None = None, timeout: float = 120, server: _ForkServer | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this environment (plugins load from installed metadata):
    a new ``python -c``, or a child of ``server`` (the same, less the preloaded packages' import time)."""
    environ = dict(os.environ, **(env or {}))
    if server is not None:
        return server.run(code, environ, timeout)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        check=False,
    )


class Batch:
    """A synthetic multi-reward GRPO batch: ragged groups in shuffled order, string uids, ragged lengths."""

    def __init__(
        self,
        seed: int = 0,
        group_sizes: Sequence[int] = (4, 3, 1, 5, 2),
        keys: Sequence[str] = ("acc", "fmt", "len"),
        max_len: int = 7,
    ) -> None:
        rng = np.random.default_rng(seed)
        uids = [f"prompt-{g:02d}-{rng.integers(1 << 30):x}" for g in range(len(group_sizes))]
        rows = np.array([uids[g] for g, size in enumerate(group_sizes) for _ in range(size)], dtype=object)
        order = rng.permutation(len(rows))
        self.uids = rows[order]
        self.n = len(self.uids)
        self.keys = tuple(keys)
        self.components = {
            "acc": rng.integers(0, 2, self.n).astype(np.float64),
            "fmt": rng.choice([0.0, 0.5, 1.0], self.n),
            "len": rng.normal(size=self.n),
        }
        self.lengths = rng.integers(1, max_len + 1, self.n)
        self.max_len = max_len

    def matrix(self, keys: Sequence[str] | None = None) -> np.ndarray:
        return np.stack([self.components[k] for k in (keys or self.keys)], axis=1)

    def group_ids(self) -> np.ndarray:
        return np.unique(self.uids, return_inverse=True)[1]

    def response_mask(self) -> Any:
        import torch

        return (torch.arange(self.max_len)[None, :] < torch.as_tensor(self.lengths)[:, None]).to(torch.int64)

    def token_level_scores(self, total: np.ndarray | None = None) -> Any:
        """The total score at each response's last token, as verl's reward managers place it."""
        import torch

        total = self.matrix().sum(1) if total is None else total
        scores = torch.zeros(self.n, self.max_len)
        scores[torch.arange(self.n), torch.as_tensor(self.lengths) - 1] = torch.as_tensor(
            total, dtype=torch.float32
        )
        return scores

    def core(self, estimator: str, keys: Sequence[str] | None = None, **options: Any) -> np.ndarray:
        """The core's advantages on the same score matrix, broadcast to tokens."""
        import corrgrpo_core as cc

        adv = cc.compute_advantages(self.matrix(keys), self.group_ids(), estimator=estimator, **options)
        return np.asarray(cc.broadcast_to_tokens(adv, self.response_mask().numpy()))


@pytest.fixture
def batch() -> Batch:
    return Batch()


@pytest.fixture(scope="session")
def verl_imported() -> None:
    import verl  # noqa: F401  -- loads the plugin through its entry point

    from corrgrpo_adapters.verl import plugin

    assert not plugin.FAILURES, plugin.FAILURES


@pytest.fixture
def make_batch() -> type[Batch]:
    return Batch


@pytest.fixture
def algo() -> Any:
    return algorithm


@pytest.fixture(scope="session")
def _fork_server() -> Iterator[_ForkServer]:
    server = _ForkServer()
    yield server
    server.close()


@pytest.fixture
def run_python(_fork_server: _ForkServer) -> Any:
    return functools.partial(_run_python, server=_fork_server)


@pytest.fixture
def compose() -> Any:
    return _compose


@pytest.fixture
def recipes() -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(grpo=list(GRPO_RECIPE), corrgrpo=list(CORRGRPO_OVERRIDES))
