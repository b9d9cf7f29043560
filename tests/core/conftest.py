"""Backends the core is tested on: every one installed, each as an ``xp`` fixture value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest


@dataclass(frozen=True)
class Backend:
    name: str
    xp: Any
    asarray: Callable[[Any], Any]
    examples: int = 40  # hypothesis examples per property (jax compiles each new shape: fewer)

    def to_numpy(self, a: Any) -> np.ndarray:
        if self.name == "torch":
            return a.detach().cpu().numpy()
        return np.asarray(a)


def _load(name: str) -> Backend:
    if name == "numpy":
        return Backend(name, np, np.asarray)
    if name == "array_api_strict":
        xps = pytest.importorskip("array_api_strict")
        return Backend(name, xps, xps.asarray)
    if name == "torch":
        torch = pytest.importorskip("torch")
        torch.set_num_threads(1)
        return Backend(name, torch, torch.asarray)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return Backend(name, jnp, jnp.asarray, examples=3)


BACKENDS = ("numpy", "array_api_strict", "torch", "jax")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    return _load(request.param)


@pytest.fixture
def figure2() -> np.ndarray:
    """The paper's Figure 2 group: 4 rollouts, 3 rewards."""
    return np.array([[0.10, 0.18, 0.80], [0.18, 0.10, 7.28], [0.82, 0.90, 8.00], [0.90, 0.82, 1.52]])
