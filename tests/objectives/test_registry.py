"""Objective registry, combination names and the public surface."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import corrgrpo_core as cc
import corrgrpo_core.objectives as obj


def test_all_is_sorted_and_complete() -> None:
    assert list(obj.__all__) == sorted(obj.__all__)
    public = {n for n in dir(obj) if not n.startswith("_")} - {"annotations"}
    assert public == set(obj.__all__)


def test_objective_names_and_specs() -> None:
    assert obj.objective_names() == ("cispo", "dapo", "gspo", "ppo")
    for name in obj.objective_names():
        spec = obj.get_objective(name)
        assert spec.name == name
        assert spec.default_estimator in cc.estimator_names()
        params = inspect.signature(spec.fn).parameters
        # inputs positional-only, options keyword-only, then the shared options (LossTail)
        kinds = [p.kind for p in params.values()]
        assert kinds[:4] == [inspect.Parameter.POSITIONAL_ONLY] * 4
        assert set(kinds[4:-1]) == {inspect.Parameter.KEYWORD_ONLY}
        assert kinds[-1] == inspect.Parameter.VAR_KEYWORD
    assert obj.get_objective("dapo").dynamic_sampling
    assert obj.get_objective("dapo").overlong_shaping
    assert not obj.get_objective("cispo").dynamic_sampling


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cispo+corrgrpo", ("cispo", "corrgrpo")),
        ("dapo+corrgrpo", ("dapo", "corrgrpo")),
        ("corrgrpo+gspo", ("gspo", "corrgrpo")),
        (" DAPO + GDPO ", ("dapo", "gdpo")),
        ("dapo", ("dapo", "grpo")),
        ("corrgrpo", ("ppo", "corrgrpo")),
        ("ppo+dr_grpo", ("ppo", "dr_grpo")),
    ],
)
def test_parse_combination(name: str, expected: tuple[str, str]) -> None:
    assert obj.parse_combination(name) == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "must be"),
        ("dapo+", "must be"),
        ("dapo+cispo", "cannot read 'cispo'"),
        ("grpo+corrgrpo", "cannot read 'corrgrpo'"),
        ("dapo+corrgrpo+gspo", "must be"),
        ("reinforce", "cannot read 'reinforce'"),
    ],
)
def test_parse_combination_errors(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        obj.parse_combination(name)


def test_parse_combination_type_error() -> None:
    with pytest.raises(TypeError, match="string"):
        obj.parse_combination(None)  # type: ignore[arg-type]


def test_filter_criterion_covers_every_estimator() -> None:
    for name in cc.estimator_names():
        assert obj.filter_criterion_for(name) in ("total", "any_component")
    with pytest.raises(ValueError, match="unknown estimator"):
        obj.filter_criterion_for("dapo")


def test_get_objective_error_names_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown objective 'vanilla'; known: cispo, dapo, gspo, ppo"):
        obj.get_objective("vanilla")


@pytest.mark.parametrize("module", ["_aggregate", "_losses", "_registry", "_sampling"])
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(f"corrgrpo_core.objectives.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_shared_options_are_checked_by_name() -> None:
    """The options every objective shares (LossTail) are declared once; a misspelt one is still a
    TypeError, and GSPO keeps its own default aggregation."""
    import numpy as np

    lp = np.log(np.asarray([[0.5, 0.25]]))
    adv, mask = np.asarray([1.0]), np.asarray([[1, 1]])
    for name in obj.objective_names():
        with pytest.raises(TypeError, match="kl_coeff"):
            obj.get_objective(name).fn(lp, lp, adv, mask, kl_coeff=0.1)
    seq = obj.gspo_loss(lp, lp, adv, np.asarray([[1, 0]]))
    tok = obj.gspo_loss(lp, lp, adv, np.asarray([[1, 0]]), aggregation="token-sum")
    assert float(seq.loss) == float(tok.loss) == -1.0
