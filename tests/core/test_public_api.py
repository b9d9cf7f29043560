"""The public surface: a sorted, complete ``__all__`` in every public module."""

import importlib
import inspect
from typing import Literal, get_origin

import pytest

PUBLIC = ["corrgrpo_core", "corrgrpo_core.testing", "corrgrpo_core.objectives"]


@pytest.mark.parametrize("module_name", PUBLIC)
def test_all_is_sorted_and_complete(module_name):
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__)
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not inspect.ismodule(v) and n not in {"annotations"}
    }
    assert public <= set(module.__all__), f"missing from __all__: {public - set(module.__all__)}"
    for name in module.__all__:
        assert hasattr(module, name), name


def test_every_public_function_has_a_docstring_with_an_example():
    import corrgrpo_core as cc

    for name in cc.__all__:
        obj = getattr(cc, name)
        if inspect.ismodule(obj) or get_origin(obj) is Literal:  # option types (EpsPlacement, ...)
            continue
        if callable(obj) and not isinstance(obj, type):
            assert obj.__doc__, name
            assert ">>>" in obj.__doc__, name
