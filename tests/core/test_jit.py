"""Every estimator runs under ``jax.jit`` (dense and ragged) and gives the eager result."""

import functools

import numpy as np
import pytest

import corrgrpo_core as cc

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("name", cc.estimator_names())
def test_dense_and_ragged_under_jit(name):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 3))
    x[1, :, 2] = 0.7  # a constant component
    fn = jax.jit(functools.partial(cc.compute_advantages, estimator=name))
    np.testing.assert_allclose(
        fn(jnp.asarray(x)), cc.compute_advantages(x, estimator=name), rtol=1e-12, atol=1e-12
    )
    ids = rng.integers(0, 5, 12)
    flat = x.reshape(12, 3)
    ragged = jax.jit(functools.partial(cc.compute_advantages, estimator=name))
    np.testing.assert_allclose(
        ragged(jnp.asarray(flat), jnp.asarray(ids)),
        cc.compute_advantages(flat, ids, estimator=name),
        rtol=1e-12,
        atol=1e-12,
    )


def test_jit_without_x64_computes_in_float32():
    x = np.random.default_rng(1).normal(size=(2, 4, 3)).astype(np.float32)
    out = jax.jit(cc.corrgrpo_advantage)(jnp.asarray(x))
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, cc.corrgrpo_advantage(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
