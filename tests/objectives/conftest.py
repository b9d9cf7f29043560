"""Backend fixture and autograd helpers for the objectives tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

BACKENDS = ("numpy", "array_api_strict", "torch", "jax")


def _load(name: str) -> Any:
    if name == "numpy":
        return np
    if name == "array_api_strict":
        xp = pytest.importorskip("array_api_strict")
        xp.set_array_api_strict_flags(boolean_indexing=False, data_dependent_shapes=False)
        return xp
    if name == "torch":
        torch = pytest.importorskip("torch")
        from array_api_compat import array_namespace

        return array_namespace(torch.zeros(1))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax.numpy


@pytest.fixture(params=BACKENDS)
def xp(request: pytest.FixtureRequest) -> Any:
    return _load(request.param)


@pytest.fixture
def xp_for() -> Callable[[str], Any]:
    """``xp_for(name)``: the namespace of one backend (skips when it is not installed)."""
    return _load


@pytest.fixture(params=("torch", "jax"))
def ad(request: pytest.FixtureRequest) -> Autodiff:
    """An autograd backend: ``ad.grad(f, x)`` differentiates a scalar function of one array."""
    return Autodiff(request.param)


class Autodiff:
    def __init__(self, name: str) -> None:
        self.name = name
        self.xp = _load(name)

    def asarray(self, a: np.ndarray) -> Any:
        return self.xp.asarray(np.asarray(a, dtype=np.float64))

    def grad(self, f: Callable[[Any], Any], x: np.ndarray) -> np.ndarray:
        if self.name == "torch":
            import torch

            t = torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
            f(t).backward()
            assert t.grad is not None
            return t.grad.numpy()
        import jax

        return np.asarray(jax.grad(f)(self.asarray(x)))


def _to_numpy(a: Any) -> np.ndarray:
    """Any backend's array as a float64 numpy array (detached)."""
    if hasattr(a, "detach"):
        a = a.detach()
    return np.asarray(a, dtype=np.float64)


def _make_batch(seed: int, n: int = 6, t: int = 5, spread: float = 0.6) -> dict[str, np.ndarray]:
    """Random log-probs (ratios spread on both sides of the clip range), advantages and a ragged mask."""
    rng = np.random.default_rng(seed)
    old = np.log(rng.uniform(0.05, 0.95, size=(n, t)))
    log_prob = old + rng.uniform(-spread, spread, size=(n, t))
    log_prob = np.minimum(log_prob, -1e-3)  # keep them valid log-probabilities
    adv = rng.normal(size=n)
    lengths = rng.integers(1, t + 1, size=n)
    mask = np.arange(t)[None, :] < lengths[:, None]
    return {"log_prob": log_prob, "old_log_prob": old, "advantages": adv, "mask": mask}


@pytest.fixture(name="to_numpy")
def to_numpy_fixture() -> Callable[[Any], np.ndarray]:
    """``to_numpy(a)``: any backend's array as a detached float64 numpy array."""
    return _to_numpy


@pytest.fixture(name="make_batch")
def make_batch_fixture() -> Callable[..., dict[str, np.ndarray]]:
    """``make_batch(seed, n=6, t=5, spread=0.6)``: a random numpy batch for the losses."""
    return _make_batch
