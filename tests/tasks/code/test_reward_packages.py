"""``CodeRewardConfig(sandbox_packages=...)``: a named installed package is importable by the candidate's
program, and only when asked for (HumanEval's own harness runs solutions that import numpy)."""

from __future__ import annotations

import pytest

from corrgrpo_tasks.code import CodeRewardConfig, compute_score
from corrgrpo_tasks.sandbox import Sandbox

pytest.importorskip("numpy")

GT = {
    "prompt": "",
    "test": "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n",
    "entry_point": "total",
}
NUMPY_SOLUTION = "```python\nimport numpy as np\n\ndef total(xs):\n    return int(np.sum(xs))\n```"


def test_a_named_package_is_importable_only_when_asked_for(box: Sandbox) -> None:
    del box
    without = compute_score("humaneval", NUMPY_SOLUTION, GT)
    assert (without["runtime_reward"], without["accuracy_reward"]) == (0.0, 0.0)
    with_numpy = compute_score("humaneval", NUMPY_SOLUTION, GT, sandbox_packages=("numpy",))
    assert (with_numpy["runtime_reward"], with_numpy["accuracy_reward"]) == (1.0, 1.0), with_numpy


def test_a_single_name_is_a_tuple_of_one_and_an_unknown_name_is_an_error() -> None:
    assert CodeRewardConfig(sandbox_packages="numpy").sandbox_packages == ("numpy",)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no_such_package_xyz"):
        compute_score("humaneval", NUMPY_SOLUTION, GT, sandbox_packages=("no_such_package_xyz",))
