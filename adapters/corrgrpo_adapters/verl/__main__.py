"""``python -m corrgrpo_adapters.verl``: check that this node's verl loads the corrgrpo plugin.

Imports verl the way every verl process does, triggers every registration, and prints what is registered.
Exits 1, with the reason, when anything failed. Run it on every node of a multi-node Ray cluster.
"""

from __future__ import annotations

import sys


def main() -> int:
    import verl  # loads the plugin through its entry point

    if f"{__package__}.plugin" not in sys.modules:
        print(
            "corrgrpo verl plugin FAILED: `import verl` did not load the verl.plugins entry point "
            "'corrgrpo'; install corrgrpo-core[verl] in this environment and leave "
            "VERL_USE_EXTERNAL_PLUGINS unset (or list 'corrgrpo' in it)",
            file=sys.stderr,
        )
        return 1
    from verl.trainer.ppo import core_algos, ray_trainer  # noqa: F401
    from verl.trainer.ppo.v1 import trainer_base

    from . import _config, plugin

    # Read from verl's registry as it is now: our fixed names, then every core estimator registered under its
    # own name (dr_grpo, and any registered through VERL_USE_EXTERNAL_MODULES or the plugin's subscription).
    estimators = [
        n
        for n in [*_config.ESTIMATORS, *sorted(_config.REGISTERED)]
        if getattr(core_algos.ADV_ESTIMATOR_REGISTRY.get(n), "corrgrpo_estimator", None) == n
    ]
    modes = [m for m in _config.TRAINER_MODES if m in trainer_base.TRAINER_REGISTRY]
    print(f"verl {verl.__version__}: estimators {estimators}; V1 trainer modes {modes}")
    for name, owner in _config.TAKEN.items():
        print(f"note: estimator name {name!r} belongs to {owner} (registered by another package first)")
    if plugin.FAILURES:
        print(f"corrgrpo verl plugin FAILED: {plugin.failure_report()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
