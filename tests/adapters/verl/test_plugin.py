"""The ``verl.plugins`` entry point, in fresh interpreters: ``import verl`` alone registers everything, and a
broken registration (which verl itself would only log at DEBUG level) fails loudly with its reason.

Each interpreter is a child of the ``run_python`` fork server (conftest.py), in which torch and the other
packages verl imports first are loaded already and nothing of verl or ours is."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ESTIMATORS = ["core_grpo", "corrgrpo", "grpo_covariance_coefficient", "gdpo_corr", "mo_grpo", "dara"]
# core estimators verl has no name for, registered under their core name (every other one is verl's own)
CORE_NAMED = ["dr_grpo"]
MODES = ["corrgrpo", "corrgrpo_colocate_async", "corrgrpo_separate_async"]

REPORT = f"""
import json, sys
import verl
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
report = {{"plugin_loaded": "corrgrpo_adapters.verl.plugin" in sys.modules,
          "v1_loaded_by_import_verl": "verl.trainer.ppo.v1" in sys.modules,
          "estimators": sorted(k for k, v in ADV_ESTIMATOR_REGISTRY.items()
                               if getattr(v, "corrgrpo_estimator", None) == k)}}
from verl.trainer.ppo.v1 import trainer_base
from verl.trainer.ppo import ray_trainer
import verl.trainer.ppo.v1.utils as v1_utils
report["modes"] = sorted(trainer_base.TRAINER_REGISTRY)
report["mode_bases"] = {{m: trainer_base.get_trainer_cls(m).__mro__[2].__name__ for m in {MODES!r}}}
report["legacy_wrapped"] = getattr(ray_trainer.compute_advantage, "corrgrpo_wrapped", False)
report["v1_dispatch_wrapped"] = getattr(v1_utils.compute_advantage, "corrgrpo_wrapped", False)
print("REPORT" + json.dumps(report))
"""

CHECK = """
import verl
from omegaconf import OmegaConf
from verl.utils.config import validate_config
config = OmegaConf.create({"algorithm": {"adv_estimator": "corrgrpo"}, "trainer": {"use_v1": True,
                           "v1": {"trainer_mode": "corrgrpo"}}})
from corrgrpo_adapters.verl.plugin import check_config
try:
    check_config(config)
except Exception as exc:
    print("CHECK", type(exc).__name__, exc)
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
try:
    get_adv_estimator_fn("corrgrpo")(token_level_rewards=None, response_mask=None, config=None, index=None)
except Exception as exc:
    print("CALL", type(exc).__name__, exc)
"""


def report(result: Any) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT"))
    return json.loads(line[len("REPORT") :])


def test_import_verl_registers_every_name(run_python: Any) -> None:
    got = report(run_python(REPORT))
    assert got["plugin_loaded"]
    assert got["estimators"] == sorted(ESTIMATORS + CORE_NAMED)
    # The V1 trainer is registered when verl imports it, not dragged into every process by `import verl`.
    assert not got["v1_loaded_by_import_verl"]
    assert set(MODES) <= set(got["modes"])
    assert got["mode_bases"] == {
        "corrgrpo": "PPOTrainerSync",
        "corrgrpo_colocate_async": "PPOTrainerColocateAsync",
        "corrgrpo_separate_async": "PPOTrainerSeparateAsync",
    }
    assert got["legacy_wrapped"]
    assert got["v1_dispatch_wrapped"]


def test_broken_core_fails_loudly(run_python: Any, tmp_path: Path) -> None:
    """A corrupt installation: ``corrgrpo_core`` raises on import. verl's loader would swallow it."""
    fake = tmp_path / "corrgrpo_core"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('simulated broken corrgrpo_core install')\n")
    result = run_python(
        CHECK, env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # Logged at ERROR level in every process, with the reason, as soon as verl is imported ...
    assert "corrgrpo verl plugin: estimators failed" in result.stderr
    assert "simulated broken corrgrpo_core install" in result.stderr
    # ... the driver's config check stops the run before Ray starts, repeating the reason ...
    check = next(line for line in result.stdout.splitlines() if line.startswith("CHECK"))
    assert "PluginError" in check
    assert "simulated broken corrgrpo_core install" in check
    # ... and our names still resolve, to an error that says why rather than "Unknown advantage estimator".
    call = next(line for line in result.stdout.splitlines() if line.startswith("CALL"))
    assert "PluginError" in call
    assert "simulated broken corrgrpo_core install" in call


COLLISION = """
import logging, verl
from omegaconf import OmegaConf
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
from corrgrpo_adapters.verl.plugin import check_config
ours = sorted(k for k, v in ADV_ESTIMATOR_REGISTRY.items() if getattr(v, "corrgrpo_estimator", None) == k)
print("OURS", ours)
print("CORRGRPO_OWNER", ADV_ESTIMATOR_REGISTRY["corrgrpo"].__module__)
for name in ("gdpo_corr", "corrgrpo"):
    config = OmegaConf.create({"algorithm": {"adv_estimator": name}, "trainer": {"use_v1": True,
                               "v1": {"trainer_mode": "corrgrpo"}}})
    print("CHECK", name, check_config(config) is not None)
"""


def test_name_collision_leaves_that_name_and_registers_the_others(run_python: Any, tmp_path: Path) -> None:
    """Another package already registered 'corrgrpo' (loaded first through VERL_USE_EXTERNAL_MODULES): that
    name stays theirs, every other name is ours, and a run selecting either is told which it gets."""
    (tmp_path / "other_corrgrpo.py").write_text(
        "from verl.trainer.ppo.core_algos import register_adv_est\n"
        "@register_adv_est('corrgrpo')\n"
        "def someone_elses(**kwargs):\n    raise AssertionError('wrong estimator')\n"
    )
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    result = run_python(COLLISION, env={"PYTHONPATH": path, "VERL_USE_EXTERNAL_MODULES": "other_corrgrpo"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.split(" ")[0].isupper())
    assert lines["OURS"] == str(sorted(n for n in ESTIMATORS + CORE_NAMED if n != "corrgrpo"))
    assert lines["CORRGRPO_OWNER"] == "other_corrgrpo"
    assert result.stdout.count("CHECK gdpo_corr True") == 1  # ours, checked as ours
    assert result.stdout.count("CHECK corrgrpo False") == 1  # theirs: not checked as ours, no error
    assert "estimator name 'corrgrpo' is registered to other_corrgrpo.someone_elses" in result.stderr
    assert "also registered as grpo_covariance_coefficient" in result.stderr
    assert "estimators failed" not in result.stderr


@pytest.mark.parametrize(
    ("env", "code", "needle"),
    [
        (
            {},
            0,
            f"estimators {[*ESTIMATORS, *CORE_NAMED]}",
        ),
        ({"VERL_USE_EXTERNAL_PLUGINS": "none"}, 1, "did not load the verl.plugins entry point"),
    ],
)
def test_node_check_command(run_python: Any, env: dict[str, str], code: int, needle: str) -> None:
    result = run_python(
        "import runpy; runpy.run_module('corrgrpo_adapters.verl', run_name='__main__')", env=env
    )
    assert result.returncode == code, result.stderr[-3000:]
    assert needle in result.stdout + result.stderr


def test_entry_point_is_declared() -> None:
    from importlib.metadata import entry_points

    (ep,) = [ep for ep in entry_points(group="verl.plugins") if ep.name == "corrgrpo"]
    assert ep.value == "corrgrpo_adapters.verl.plugin"
    assert sys.modules.get("corrgrpo_adapters.verl.plugin") is None or ep.load() is sys.modules[ep.value]


LATE = """
import verl
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
import corrgrpo_core as cc
cc.register_estimator("team_estimator", cc.rloo_advantage, "a team's own, registered after verl loaded")
print("RESOLVES", getattr(get_adv_estimator_fn("team_estimator"), "corrgrpo_estimator", None))
import runpy
runpy.run_module("corrgrpo_adapters.verl", run_name="__main__")
"""


def test_an_estimator_registered_after_verl_loaded_is_in_verl_and_listed(run_python: Any) -> None:
    """No call of the plugin's after ``register_estimator``: the plugin subscribes to the core's registry,
    and the node check lists what verl's registry holds now."""
    result = run_python(LATE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "RESOLVES team_estimator" in result.stdout
    assert "'dara', 'dr_grpo', 'team_estimator']" in result.stdout
