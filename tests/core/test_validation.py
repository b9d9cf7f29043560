"""Bad input gets a clear error; edge cases get defined answers; inputs are never mutated."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import corrgrpo_core as cc

ALL = cc.estimator_names()


@pytest.mark.parametrize(
    ("scores", "ids", "kwargs", "error", "match"),
    [
        (np.zeros(4), None, {}, ValueError, r"\(n, K\) for one group"),
        (np.zeros((2, 2, 2, 2)), None, {}, ValueError, r"got shape \(2, 2, 2, 2\)"),
        (np.zeros((4, 0)), None, {}, ValueError, r"K = 0"),
        (
            np.zeros((2, 3, 2)),
            np.zeros(6, dtype=int),
            {},
            ValueError,
            r"with group_ids, scores must be \(N, K\)",
        ),
        (
            np.zeros((4, 2)),
            np.zeros(3, dtype=int),
            {},
            ValueError,
            r"group_ids has length 3 but scores has 4",
        ),
        (np.zeros((4, 2)), np.zeros((4, 1), dtype=int), {}, ValueError, r"one-dimensional"),
        (np.zeros((4, 2)), np.zeros(4), {}, TypeError, r"integer dtype"),
        (np.zeros((4, 2)), np.array(["a", "a", "b", "b"]), {}, TypeError, r"group_ids must"),
        (np.zeros((4, 2)), None, {"weights": [1.0]}, ValueError, r"one entry per reward component \(2\)"),
        (np.zeros((4, 2)), None, {"weights": [1.0, np.nan]}, ValueError, r"weights must be finite"),
        (np.zeros((4, 2)), None, {"weights": ["a", "b"]}, TypeError, r"weights must be a sequence"),
        (np.array([[1.0, np.nan], [2, 3], [np.nan, 1], [0, 0]]), None, {}, ValueError, r"NaN in rows 0, 2"),
        (np.array([[1.0, np.inf], [2, 3]]), None, {"nan_policy": "ignore"}, ValueError, r"inf in rows 0"),
        (np.zeros((4, 2), dtype=complex), None, {}, TypeError, r"real numeric dtype"),
        (np.zeros((4, 2), dtype=bool), None, {}, TypeError, r"real numeric dtype"),
        ([[1.0, 2.0]], None, {}, TypeError, r"scores must be an array"),
        (
            np.zeros((4, 2)),
            None,
            {"nan_policy": "drop"},
            ValueError,
            r"nan_policy must be one of 'raise', 'ignore', got 'drop'",
        ),
        (
            np.zeros((4, 2)),
            None,
            {"singleton": "keep"},
            ValueError,
            r"singleton must be one of 'zero', 'raise', got 'keep'",
        ),
        (
            np.zeros((4, 2)),
            np.array([0, 0, 1, 2]),
            {"singleton": "raise"},
            ValueError,
            r"groups of one.*rows 2, 3",
        ),
    ],
)
@pytest.mark.parametrize("name", ALL)
def test_bad_input_names_the_problem(name, scores, ids, kwargs, error, match):
    with pytest.raises(error, match=match):
        cc.compute_advantages(scores, ids, estimator=name, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eps": -1.0}, "eps must be a non-negative number"),
        ({"eps_placement": "middle"}, "eps_placement must be one of 'inside', 'outside', got 'middle'"),
        ({"ddof": -1}, "ddof must be a non-negative integer"),
        ({"min_correlation_sum": -0.1}, "min_correlation_sum must be"),
        ({"zero_variance_rtol": -1e-9}, "zero_variance_rtol must be"),
    ],
)
def test_bad_options_name_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cc.corrgrpo_advantage(np.ones((4, 2)), **kwargs)


def test_dara_options_are_checked():
    with pytest.raises(ValueError, match="variant must be one of 'asym', 'sym', got 'both'"):
        cc.dara_advantage(np.ones((4, 2)), variant="both")
    with pytest.raises(ValueError, match="base must be one of 'gdpo', 'corrgrpo', got 'grpo'"):
        cc.dara_advantage(np.ones((4, 2)), base="grpo")
    with pytest.raises(ValueError, match="max_weight must be a number >= 1"):
        cc.dara_advantage(np.ones((4, 2)), max_weight=0.5)


def test_the_nan_error_names_dense_rows():
    x = np.zeros((2, 3, 2))
    x[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match=r"NaN in rows \(1, 2\)"):
        cc.corrgrpo_advantage(x)


def test_registry_errors():
    with pytest.raises(ValueError, match=r"unknown estimator 'corr'; known: corrgrpo, dara"):
        cc.compute_advantages(np.ones((2, 2)), estimator="corr")
    with pytest.raises(TypeError, match=r"estimator 'grpo' takes no option.*min_correlation_sum"):
        cc.compute_advantages(np.ones((2, 2)), estimator="grpo", min_correlation_sum=1.0)
    with pytest.raises(ValueError, match="already registered"):
        cc.register_estimator("grpo", cc.grpo_advantage, "again")
    assert set(ALL) == {"corrgrpo", "dara", "dr_grpo", "gdpo", "gdpo_corr", "grpo", "mo_grpo", "rloo"}
    assert all(cc.get_estimator(n).summary for n in ALL)
    assert "weights" in cc.get_estimator("corrgrpo").options


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize(
    ("shape", "ids"), [((0, 3), None), ((0, 4, 3), None), ((3, 0, 2), None), ((0, 2), np.zeros(0, dtype=int))]
)
def test_empty_batches_give_empty_advantages(backend, name, shape, ids):
    scores = backend.asarray(np.zeros(shape))
    out = cc.compute_advantages(scores, None if ids is None else backend.asarray(ids), estimator=name)
    assert tuple(out.shape) == (shape[:-1] if len(shape) == 3 or ids is not None else shape[:1])
    assert out.dtype == scores.dtype


@pytest.mark.parametrize("name", ALL)
def test_singletons_and_constant_groups_get_zero(name):
    x = np.array([[1.0, 5.0], [2.0, 2.0], [2.0, 2.0], [3.0, 1.0], [4.0, 0.5]])
    ids = np.array([0, 1, 1, 2, 2])
    adv = cc.compute_advantages(x, ids, estimator=name)
    if name not in ("gdpo", "gdpo_corr", "dara"):  # batch-normalised ones shift every row
        assert np.all(adv[:3] == 0)
    assert np.all(np.isfinite(adv))


@pytest.mark.parametrize("name", ALL)
def test_inputs_are_never_mutated(backend, name):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3))
    ids = rng.integers(0, 4, 12)
    xs, gs = backend.asarray(x.copy()), backend.asarray(ids.copy())
    w = backend.asarray(np.array([1.0, -0.5, 2.0]))
    if backend.name == "numpy":
        for a in (xs, gs, w):
            a.setflags(write=False)
    cc.compute_advantages(xs, gs, estimator=name, weights=w)
    np.testing.assert_array_equal(backend.to_numpy(xs), x)
    np.testing.assert_array_equal(backend.to_numpy(gs), ids)


def test_integer_scores_give_floating_advantages(backend):
    from array_api_compat import array_namespace

    out = cc.corrgrpo_advantage(backend.asarray(np.array([[0, 1], [1, 1], [1, 0]])))
    assert array_namespace(out).isdtype(out.dtype, "real floating")
    np.testing.assert_allclose(
        backend.to_numpy(out), cc.corrgrpo_advantage(np.array([[0.0, 1], [1, 1], [1, 0]]))
    )


def test_weights_are_applied_before_the_statistics():
    x = np.random.default_rng(3).normal(size=(6, 3))
    w = np.array([2.0, -1.0, 0.0])
    np.testing.assert_allclose(cc.corrgrpo_advantage(x, weights=w), cc.corrgrpo_advantage(x * w))
    np.testing.assert_allclose(cc.grpo_advantage(x, weights=w), cc.grpo_advantage(x * w))


def test_torch_gradients_flow_through():
    torch = pytest.importorskip("torch")
    x = torch.tensor(np.random.default_rng(0).normal(size=(2, 4, 3)), requires_grad=True)
    cc.corrgrpo_advantage(x).pow(2).sum().backward()
    assert x.grad is not None
    assert torch.isfinite(x.grad).all()


def test_broadcast_to_tokens(backend):
    adv = backend.asarray(np.array([1.5, -2.0]))
    mask = backend.asarray(np.array([[1, 1, 0], [1, 0, 0]]))
    out = backend.to_numpy(cc.broadcast_to_tokens(adv, mask))
    np.testing.assert_array_equal(out, [[1.5, 1.5, 0], [-2.0, 0, 0]])
    with pytest.raises(ValueError, match="advantages' shape plus a token axis"):
        cc.broadcast_to_tokens(adv, backend.asarray(np.ones((3, 3))))


def test_import_pulls_in_no_backend_or_test_dependency():
    code = (
        "import sys, corrgrpo_core; bad = {'torch', 'jax', 'hypothesis', 'array_api_strict'} & set(sys.modules);"
        "print(sorted(bad)); sys.exit(bool(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_defers_numpys_heavy_submodules_until_used():
    # array-api-compat's numpy namespace copies every name of numpy: the submodules numpy loads on
    # first use (f2py, testing, ma, ...) are loaded when something reads from them, not at import
    code = (
        "import sys, corrgrpo_core, numpy as np; from corrgrpo_core._lib._compat import _NUMPY\n"
        "heavy = ('numpy.f2py', 'numpy.testing', 'numpy.ma', 'numpy.polynomial', 'numpy.random')\n"
        "loaded = [m for m in heavy if type(sys.modules.get(m)).__name__ == 'module']\n"
        "assert not loaded, loaded\n"
        "assert _NUMPY.random is np.random and _NUMPY.ma is np.ma\n"
        "assert np.random.default_rng(0).integers(10) == 8 and np.ma.masked_array([1, 2], [0, 1]).sum() == 1\n"
        "from numpy.testing import assert_array_equal; assert_array_equal(np.polynomial.Polynomial([1, 2])(3), 7)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ddof": 1.5}, r"ddof must be a non-negative integer, got 1.5 \(float\)"),
        ({"ddof": True}, r"ddof must be a non-negative integer, got True \(bool\)"),
        ({"eps": "1e-6"}, r"eps must be a non-negative number, got '1e-6' \(str\)"),
        ({"eps": None}, r"eps must be a non-negative number, got None \(NoneType\)"),
        ({"eps_placement": 1}, r"eps_placement must be one of 'inside', 'outside', got 1 \(int\)"),
        ({"nan_policy": None}, r"nan_policy must be one of 'raise', 'ignore', got None \(NoneType\)"),
    ],
)
@pytest.mark.parametrize("name", ["corrgrpo", "grpo"])
def test_wrong_types_are_type_errors(name, kwargs, match):
    """TypeError for a value of the wrong type, checked before any route (the torch kernel included)."""
    with pytest.raises(TypeError, match=match):
        cc.compute_advantages(np.ones((4, 2)), estimator=name, **kwargs)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=match):
        cc.compute_advantages(torch.ones(4, 2), estimator=name, **kwargs)


def test_the_same_mistake_gets_the_same_message_in_core_and_objectives():
    from corrgrpo_core.objectives import informative_groups, ppo_clip_loss

    x = np.ones((4, 2))
    for call in (
        lambda: cc.advantage_stats(x, nan_policy="drop"),
        lambda: informative_groups(x, nan_policy="drop"),
    ):
        with pytest.raises(ValueError, match=r"^nan_policy must be one of 'raise', 'ignore', got 'drop'$"):
            call()
    lp, adv, mask = np.zeros((2, 3)), np.zeros(2), np.ones((2, 3))
    with pytest.raises(ValueError, match=r"^eps_low must be a non-negative number, got -0.1$"):
        ppo_clip_loss(lp, lp, adv, mask, eps_low=-0.1)
    with pytest.raises(ValueError, match=r"^eps must be a non-negative number, got -0.1$"):
        cc.corrgrpo_advantage(x, eps=-0.1)
    with pytest.raises(TypeError, match=r"^eps_low must be a non-negative number, got '0.2' \(str\)$"):
        ppo_clip_loss(lp, lp, adv, mask, eps_low="0.2")
    with pytest.raises(TypeError, match=r"^eps must be a non-negative number, got '0.2' \(str\)$"):
        cc.corrgrpo_advantage(x, eps="0.2")
