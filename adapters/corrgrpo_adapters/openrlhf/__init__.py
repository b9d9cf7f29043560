"""CorrGRPO and the other core estimators inside OpenRLHF's Ray PPO trainer.

OpenRLHF has no estimator registry: its advantage is an if/elif inside a Ray actor. The launcher
(``corrgrpo-openrlhf`` or ``python -m corrgrpo_adapters.openrlhf``) takes OpenRLHF's own arguments plus
``--corrgrpo.*`` ones, starts Ray with :func:`hook.setup` as every worker's setup hook, and runs
``openrlhf.cli.train_ppo_ray``. The hook patches ``RemoteExperienceMaker.compute_advantages_and_returns``
(advantages from the reward components in ``Experience.info``) and, on request, ``PolicyLoss.forward``
(CISPO). See ``docs/adapters/openrlhf.md``.

Nothing here imports OpenRLHF, Ray or torch at import time.
"""

from .config import CONFIG_ENV_VAR, AdapterConfig

__all__ = ["CONFIG_ENV_VAR", "AdapterConfig"]
