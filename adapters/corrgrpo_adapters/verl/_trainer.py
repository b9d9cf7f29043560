"""V1 trainer modes (``trainer.v1.trainer_mode=corrgrpo`` ...) that hand reward components to estimators.

verl's V1 ``PPOTrainer._compute_advantage`` reads only ``uid``, masks, scores and log-probs from
TransferQueue; the components that ``compute_score`` returned sit in each trajectory's
``extra_fields["reward_extra_info"]``. Our modes fetch those for the configured ``reward_keys``, open a
component source around verl's own ``_compute_advantage`` (which runs unchanged), and add the
estimator's ``corrgrpo/...`` metrics to the step's metrics.

Each mode subclasses one of verl's (``sync``, ``colocate_async``, ``separate_async``) and runs under that
mode's name, so verl's mode-dependent branches and ``trainer.v1.<mode>`` settings apply unchanged.
"""

from __future__ import annotations

import functools
from collections import Counter
from types import ModuleType
from typing import Any

import numpy as np

from ._config import (
    COMPONENTS_FILTER_METRIC,
    TRAINER_MODES,
    check_trainer,
    ours,
    reward_keys,
    reward_spec,
)
from ._estimator import active_source, component_source, components_from_extra_fields, group_ids


def _fetch_components(
    keys: list[str], partition_id: str, keys_needed: tuple[str, ...]
) -> dict[str, np.ndarray]:
    import transfer_queue as tq  # the client verl's trainer and replay buffer use

    data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["extra_fields"])
    return components_from_extra_fields(list(data["extra_fields"]), keys_needed, row_names=keys)


def _final_rows(keys: list[str]) -> np.ndarray | None:
    """For each TransferQueue key ``{uid}_{session}_{index}``, the row of its session's last output."""
    last: dict[str, tuple[int, int]] = {}
    sessions = []
    for row, key in enumerate(keys):
        session, _, index = key.rpartition("_")
        sessions.append(session)
        if session not in last or last[session][0] < int(index):
            last[session] = (int(index), row)
    if len(last) == len(keys):
        return None
    return np.array([last[session][1] for session in sessions])


class ComponentTrainerMixin:
    """Mixed in before a verl V1 trainer class; see the module docstring."""

    base_mode: str
    config: Any

    def __init__(self, config: Any) -> None:
        check_trainer(config)
        # verl reads trainer.v1.trainer_mode for its sync/async branches and per-mode settings: run as the
        # mode we extend. The TaskRunner has already looked our class up by its registered name.
        config.trainer.v1.trainer_mode = self.base_mode
        super().__init__(config)  # type: ignore[call-arg]

    def _reward_keys(self) -> tuple[str, ...]:
        algorithm = self.config.algorithm
        if ours(str(algorithm.get("adv_estimator"))):
            return reward_spec(algorithm).keys
        return ()

    def _compute_advantage(self, batch: Any, metrics: dict[str, Any]) -> Any:
        keys = self._reward_keys()
        values = _fetch_components(batch.keys, batch.partition_id, keys) if keys else None
        origin = f"TransferQueue extra_fields.reward_extra_info (trainer mode corrgrpo, {self.base_mode})"
        with component_source(values, origin=origin, final_row=_final_rows(batch.keys)) as source:
            batch = super()._compute_advantage(batch, metrics)  # type: ignore[misc]
        metrics.update(source.metrics)
        return batch

    def _build_replay_buffer(self) -> Any:
        buffer = super()._build_replay_buffer()  # type: ignore[misc]
        if getattr(buffer, "filter_groups_metric", None) == COMPONENTS_FILTER_METRIC:
            buffer.__class__ = _component_filter_class(type(buffer))
            # check_trainer (in __init__) has made sure the keys are set.
            buffer.component_keys = reward_keys(self.config.algorithm)
        return buffer


class ComponentFilterMixin:
    """DAPO dynamic sampling that drops a group only when every reward component is constant in it.

    verl's filter looks at one scalar per trajectory (the total or one ``reward_extra_info`` key), so a group
    whose components trade off against each other with a tied total is dropped, although CorrGRPO and GDPO
    give it non-zero advantages. Selected by ``algorithm.filter_groups.metric=reward_components``.
    """

    component_keys: tuple[str, ...]
    finished_keys: Any
    partitions: Any
    _dapo_classification_cache: Any

    def _dapo_filtered_keys(self, partition_id: str) -> tuple[set[str], Counter[float]]:
        if partition_id == "val":
            return set(), Counter()
        finished = self.finished_keys[partition_id]
        cache = self._dapo_classification_cache[partition_id]
        for uid in cache.keys() - finished:
            del cache[uid]
        new = finished - cache.keys()
        trajectories = [key for key in self.partitions[partition_id] if key.split("_")[0] in new]
        if trajectories:
            columns = _fetch_components(trajectories, partition_id, self.component_keys)
            scores = np.stack([columns[k] for k in self.component_keys], axis=1)
            uids = np.array([key.split("_")[0] for key in trajectories], dtype=object)
            ids = group_ids(uids)  # numbered in order of first appearance, as dict.fromkeys lists them
            for g, uid in enumerate(dict.fromkeys(uids)):
                rows = scores[ids == g]
                tied = rows.shape[0] > 1 and bool(np.all(rows == rows[0]))
                # verl's diagnostic counts filtered groups by their shared value; ours is the shared total.
                cache[uid] = float(rows[0].sum()) if tied else None
        for uid in new - cache.keys():
            cache[uid] = None  # no trajectory finished for it: verl's own eviction handles failed groups
        filtered = {uid: total for uid, total in cache.items() if total is not None}
        return set(filtered), Counter(filtered.values())


_FILTER_CLASSES: dict[type, type] = {}


def _component_filter_class(base: type) -> type:
    if base not in _FILTER_CLASSES:
        _FILTER_CLASSES[base] = type(f"ComponentFilter{base.__name__}", (ComponentFilterMixin, base), {})
    return _FILTER_CLASSES[base]


V1_ORIGIN = "verl's own V1 trainer mode (no reward components; set trainer.v1.trainer_mode=corrgrpo for them)"


def patch_multi_trajectories(trainer_base: ModuleType) -> None:
    """verl's V1 ``_compute_advantage`` picks each session's final output only for its own ``grpo``; wrap
    the dispatcher it calls so that our estimators do the same in verl's own trainer modes too (each
    multi-output session counts once in its group, its other outputs take its advantage). Inside our
    trainer modes their component source is open already and carries the same final rows."""
    original = trainer_base.compute_advantage_for_multi_trajectories
    if getattr(original, "corrgrpo_wrapped", False):
        return

    @functools.wraps(original)
    def compute_advantage_for_multi_trajectories(
        data: Any, batch_keys: Any, adv_estimator: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if not ours(str(adv_estimator)) or active_source() is not None:
            return original(data, batch_keys, adv_estimator, *args, **kwargs)
        with component_source(None, origin=V1_ORIGIN, final_row=_final_rows(list(batch_keys))):
            return original(data, batch_keys, adv_estimator, *args, **kwargs)

    compute_advantage_for_multi_trajectories.corrgrpo_wrapped = True  # type: ignore[attr-defined]
    vars(trainer_base)["compute_advantage_for_multi_trajectories"] = compute_advantage_for_multi_trajectories


def register(v1: ModuleType) -> None:
    """Register our trainer modes with ``verl.trainer.ppo.v1`` (called once it is imported)."""
    bases = {
        "sync": v1.PPOTrainerSync,
        "colocate_async": v1.PPOTrainerColocateAsync,
        "separate_async": v1.PPOTrainerSeparateAsync,
    }
    for name, base_mode in TRAINER_MODES.items():
        existing = v1.trainer_base.TRAINER_REGISTRY.get(name)
        if isinstance(existing, type) and issubclass(existing, ComponentTrainerMixin):
            continue  # registered by an earlier load of this plugin in the same process
        base = bases[base_mode]
        cls = type(
            f"CorrGRPO{base.__name__}",
            (ComponentTrainerMixin, base),
            {
                "base_mode": base_mode,
                "__module__": __name__,
                "__doc__": f"verl's {base_mode!r} trainer mode, with reward components for the estimators.",
            },
        )
        v1.register_trainer(name)(cls)
