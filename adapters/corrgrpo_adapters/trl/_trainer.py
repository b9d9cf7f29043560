"""``CorrGRPOTrainer``: TRL's GRPOTrainer with its advantages computed by a ``corrgrpo_core`` estimator.

Two overrides, no copied TRL code: ``_calculate_rewards`` keeps the gathered ``(N, K)`` reward matrix
TRL returns, and ``_generate_and_score_completions`` replaces the advantages in TRL's output with the
core's, computed on that global matrix and sliced to this rank's rows. This must happen there: TRL
shuffles the returned batch right after, and group membership is lost.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import torch
from trl import GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]

from .. import METRIC_PREFIX, ZERO_SIGNAL
from ._advantages import advantage_diagnostics, group_advantages
from ._compat import check_trainer_attributes, check_trl_compatibility
from ._config import AdvantagePlan, CorrGRPOConfig, advantage_plan

__all__ = ["CorrGRPOTrainer"]


class CorrGRPOTrainer(GRPOTrainer):
    """A ``trl.GRPOTrainer`` whose advantages come from a ``corrgrpo_core`` estimator.

    Takes the same arguments as ``GRPOTrainer``. With TRL's own ``GRPOConfig`` it computes TRL's own
    advantages (every ``scale_rewards`` and ``multi_objective_aggregation``, TRL's eps) with the core, so
    swapping the class name changes nothing; with a :class:`CorrGRPOConfig`, ``advantage_estimator``
    picks the estimator. Everything else (generation, loss types, ``num_iterations``, gradient
    accumulation, eval, multiple processes) is TRL's. The advantages TRL logs in its completions table
    are the ones used for the loss.

    ``trainer.advantage_estimator`` names the core estimator in use; ``trainer.scale_rewards`` and
    ``trainer.multi_objective_aggregation`` are TRL's names for the advantages used, None where TRL has
    no equivalent (CorrGRPO, MO-GRPO, RLOO, GDPO-corr, DARA).

    Example::

        trainer = CorrGRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=[correct, formatted],
                                  args=CorrGRPOConfig(output_dir="out", advantage_estimator="corrgrpo"),
                                  train_dataset=dataset)
        trainer.train()
    """

    args: GRPOConfig

    def __init__(self, model: Any, reward_funcs: Any, args: GRPOConfig | None = None, **kwargs: Any) -> None:
        check_trl_compatibility()
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path
            args = CorrGRPOConfig(f"{str(name).rstrip('/').split('/')[-1] or 'model'}-CorrGRPO")
        elif not isinstance(args, GRPOConfig):
            raise TypeError(
                f"CorrGRPOTrainer needs args=GRPOConfig(...) or CorrGRPOConfig(...), got "
                f"{type(args).__name__}"
            )
        plan = advantage_plan(args)
        super().__init__(model, reward_funcs, args=args, **kwargs)
        check_trainer_attributes(self)
        self.advantage_plan: AdvantagePlan = plan
        self.advantage_estimator = plan.estimator
        # TRL's names for the advantages actually used (None: TRL has no equivalent).
        self.scale_rewards = plan.scale_rewards  # type: ignore[assignment]
        self.multi_objective_aggregation = plan.multi_objective_aggregation  # type: ignore[assignment]
        self._gathered_rewards: torch.Tensor | None = None
        self._check_estimator_runs()

    def _estimator_call(self) -> dict[str, Any]:
        return {
            "estimator": self.advantage_plan.estimator,
            "weights": self.reward_weights.tolist(),
            "options": self.advantage_plan.options,
        }

    def _check_estimator_runs(self) -> None:
        # Option *values* (a misspelt placement, a negative floor) are checked by the core; one call on
        # a small random batch surfaces them now instead of after the first generation.
        size = self._group_size("train")
        probe = torch.rand(2 * size, len(self.reward_func_names), generator=torch.Generator().manual_seed(0))
        group_advantages(probe, size, **self._estimator_call())

    def _group_size(self, mode: str) -> int:
        return int(self.num_generations if mode == "train" else self.num_generations_eval)  # type: ignore[arg-type]

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards
        return rewards

    @contextmanager
    def _trl_switches(self) -> Iterator[None]:
        """TRL's own block runs inside super(): give it valid switches, those of the advantages used when
        TRL has an equivalent, and restore ours after."""
        ours = (self.scale_rewards, self.multi_objective_aggregation)
        self.scale_rewards = ours[0] or "group"
        self.multi_objective_aggregation = ours[1] or "sum_then_normalize"
        try:
            yield
        finally:
            self.scale_rewards, self.multi_objective_aggregation = ours

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        with self._trl_switches():
            output = super()._generate_and_score_completions(inputs)
        rewards, self._gathered_rewards = self._gathered_rewards, None
        if rewards is None:
            raise RuntimeError(
                "GRPOTrainer._generate_and_score_completions did not call _calculate_rewards; "
                "this TRL version is not supported by corrgrpo_adapters.trl"
            )
        mode = "train" if getattr(self.model, "training", False) else "eval"
        group_size = self._group_size(mode)
        advantages = group_advantages(rewards, group_size, **self._estimator_call())

        local = output["advantages"]
        rows = local.shape[0]
        if rows * self.accelerator.num_processes != rewards.shape[0]:
            raise RuntimeError(
                f"{rewards.shape[0]} gathered reward rows do not split into "
                f"{self.accelerator.num_processes} ranks of {rows} completions"
            )
        start = self.accelerator.process_index * rows
        output["advantages"] = advantages[start : start + rows].to(dtype=local.dtype, device=local.device)

        self._replace_logged_advantages(advantages)
        self._log_diagnostics(mode, rewards, group_size)
        return output

    def _log_diagnostics(self, mode: str, rewards: torch.Tensor, group_size: int) -> None:
        """The core's ``AdvantageStats.summary()`` under ``corrgrpo/``, the names verl's and OpenRLHF's
        adapters log. TRL's ``frac_reward_zero_std`` is dropped: it tests the std of the weighted total
        (or, for TRL's GDPO, of the whole batch), so it meant something else per estimator. Its
        replacement, ``corrgrpo/zero_signal_groups`` (groups where no reward varies: every estimator's
        advantages are 0 there), is logged for every estimator, even with the diagnostics off."""
        self._metrics[mode].pop("frac_reward_zero_std", None)
        metrics = advantage_diagnostics(
            rewards, group_size, component_names=self.reward_func_names, **self._estimator_call()
        )
        if not self.advantage_plan.log_diagnostics:
            metrics = {ZERO_SIGNAL: metrics[ZERO_SIGNAL]}
        for key, value in metrics.items():
            self._metrics[mode][METRIC_PREFIX + key].append(value)

    def _replace_logged_advantages(self, advantages: torch.Tensor) -> None:
        # TRL appended its own (now unused) advantages for these rows to the completions-table log;
        # swap in the ones the loss sees.
        logged = cast("deque[float]", self._logs["advantages"])
        for _ in range(min(len(logged), advantages.shape[0])):
            logged.pop()
        logged.extend(advantages.tolist())
