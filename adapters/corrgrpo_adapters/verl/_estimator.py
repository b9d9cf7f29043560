"""The estimators registered in verl: map verl's batch to one ``corrgrpo_core`` call.

verl calls a registered estimator as ``fn(token_level_rewards=, response_mask=, config=, index=)``;
reward components are not among those arguments. They reach us through :func:`component_source`, a
context that the corrgrpo V1 trainer modes (from TransferQueue ``extra_fields``) and the legacy
``compute_advantage`` wrapper (from ``non_tensor_batch``) open around verl's own advantage call.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from corrgrpo_core import (
    advantage_stats,
    broadcast_to_tokens,
    compute_advantages,
    dense_group_size,
    get_estimator,
    group_labels,
)

from .. import logged_summary
from ._config import METRICS_PREFIX, ConfigError, RewardSpec, reward_spec


@dataclass
class ComponentSource:
    """Per-row reward components for the advantage call in progress, and where its metrics go."""

    values: Mapping[str, Any] | None
    origin: str
    metrics: dict[str, float] = field(default_factory=dict)
    # Agent loops that emit several outputs per session: for each row, the row holding its session's final
    # output. Only those rows are scored (each session is one response of its group, as in verl's GRPO)
    # and every row takes its final row's advantage. None when every session has one output.
    final_row: np.ndarray | None = None


_SOURCE: contextvars.ContextVar[ComponentSource | None] = contextvars.ContextVar(
    "corrgrpo_source", default=None
)


@contextlib.contextmanager
def component_source(
    values: Mapping[str, Any] | None, *, origin: str, final_row: np.ndarray | None = None
) -> Iterator[ComponentSource]:
    """Make ``values`` (key -> one value per row) visible to the estimators called inside the block."""
    source = ComponentSource(values=values, origin=origin, final_row=final_row)
    token = _SOURCE.set(source)
    try:
        yield source
    finally:
        _SOURCE.reset(token)


def active_source() -> ComponentSource | None:
    return _SOURCE.get()


def components_from_extra_fields(
    extra_fields: Sequence[Any], keys: Sequence[str], *, row_names: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Columns ``{key: (N,) float64}`` from V1 TransferQueue ``extra_fields`` rows.

    Each row is a dict (or a TensorDict ``NonTensorData`` whose ``.data`` is one) holding
    ``reward_extra_info``, the dict the reward manager built from ``compute_score``'s return value.
    """
    columns: dict[str, list[float]] = {k: [] for k in keys}
    for i, row in enumerate(extra_fields):
        row = getattr(row, "data", row)
        info = row.get("reward_extra_info") if isinstance(row, Mapping) else None
        name = row_names[i] if row_names is not None else str(i)
        if not isinstance(info, Mapping):
            raise ConfigError(
                f"trajectory {name} carries no reward_extra_info in its extra_fields; reward "
                "components come from compute_score returning a dict (reward loop managers "
                "naive, dapo or gdpo copy every key into reward_extra_info)"
            )
        missing = [k for k in keys if k not in info]
        if missing:
            raise ConfigError(
                f"reward key(s) {missing} not found in reward_extra_info of trajectory {name}; "
                f"keys present: {sorted(map(str, info))}"
            )
        for k in keys:
            columns[k].append(info[k])
    return {k: _column(v, k) for k, v in columns.items()}


def _column(values: Any, key: str) -> np.ndarray:
    try:
        column = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(
            f"reward component {key!r} holds non-numeric values, e.g. {list(values)[:3]}"
        ) from None
    if column.ndim != 1:
        raise ConfigError(
            f"reward component {key!r} must hold one number per response, got shape {column.shape}"
        )
    return column


def component_matrix(
    values: Mapping[str, Any], keys: Sequence[str], n_rows: int, *, origin: str
) -> np.ndarray:
    """Stack the configured components into an ``(N, K)`` float64 score matrix."""
    missing = [k for k in keys if k not in values]
    if missing:
        raise ConfigError(
            f"reward key(s) {missing} not found in {origin}; keys present: {sorted(map(str, values))}"
        )
    columns = [_column(values[k], k) for k in keys]
    for k, column in zip(keys, columns, strict=True):
        if column.shape[0] != n_rows:
            raise ConfigError(
                f"reward component {k!r} has {column.shape[0]} values for a batch of {n_rows} "
                f"responses ({origin})"
            )
    return np.stack(columns, axis=1)


def group_ids(index: Any) -> np.ndarray:
    """verl's ``uid`` values (any hashable, any order, mixed types as verl's own dict allows) -> integer
    group ids, numbered in order of first appearance.

    ``corrgrpo_core.group_labels``: ids in runs (verl's layout) hash one id per run, scattered ids
    go through a dict; neither sorts the strings as ``numpy.unique`` would.
    """
    if index is None:
        raise ConfigError(
            "the advantage call got no 'uid' index; corrgrpo estimators group responses by "
            "verl's non_tensor_batch['uid']"
        )
    uids = np.asarray(index, dtype=object).reshape(-1)
    try:
        return np.asarray(group_labels(uids))
    except TypeError:  # unhashable uids (lists, arrays): group by their text, as a log would show them
        return np.asarray(group_labels(np.array([repr(u) for u in uids], dtype=object)))


def _scores(
    spec: RewardSpec, token_level_rewards: torch.Tensor, non_tensor_batch: Mapping[str, Any] | None
) -> np.ndarray | torch.Tensor:
    """(N, K) scores: float64 numpy components, or for one component verl's sequence reward as an
    (N, 1) tensor in the token rewards' dtype and device (the core computes there)."""
    n_rows = token_level_rewards.shape[0]
    if not spec.keys:
        # One component: the sequence reward verl's own GRPO uses (in-reward KL included, if enabled).
        return token_level_rewards.detach().sum(-1).unsqueeze(-1)
    source = active_source()
    if non_tensor_batch is not None:
        values, origin = non_tensor_batch, "non_tensor_batch"
    elif source is not None and source.values is not None:
        values, origin = source.values, source.origin
    else:
        raise ConfigError(
            f"algorithm.adv_estimator={spec.verl_name} needs reward components {list(spec.keys)} but verl "
            "passed none to the estimator. On the V1 trainer set trainer.v1.trainer_mode=corrgrpo (or "
            "corrgrpo_colocate_async / corrgrpo_separate_async); on the legacy trainer (trainer.use_v1=False) "
            "make sure the corrgrpo plugin loaded (python -m corrgrpo_adapters.verl)"
        )
    return component_matrix(values, spec.keys, n_rows, origin=origin)


def _host(scores: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(scores, torch.Tensor):
        return np.asarray(scores.to("cpu", torch.float64).numpy())
    return scores


def reward_metrics(scores: np.ndarray, ids: np.ndarray, spec: RewardSpec) -> dict[str, float]:
    """The core's diagnostics plus each component's batch mean/std (missing values left out), under
    ``corrgrpo/``. The diagnostics take exactly the options of the advantages that the core's registry
    says they share (``EstimatorSpec.diagnostic_kwargs``): a floor, an eps or ``nan_policy="ignore"``
    apply to both."""
    names = list(spec.keys) or ["reward"]
    options = get_estimator(spec.core_estimator).diagnostic_kwargs(spec.core_kwargs)
    weights = None if spec.weights is None else np.asarray(spec.weights)
    stats = advantage_stats(scores, ids, weights=weights, **options)
    metrics = logged_summary(stats, names)
    for j, name in enumerate(names):
        present = scores[:, j][~np.isnan(scores[:, j])]
        metrics[f"{METRICS_PREFIX}reward/{name}/mean"] = float(np.mean(present)) if present.size else math.nan
        metrics[f"{METRICS_PREFIX}reward/{name}/std"] = float(np.std(present)) if present.size else math.nan
    return metrics


def _check_missing(scores: np.ndarray | torch.Tensor, spec: RewardSpec) -> None:
    """Missing rewards (None or NaN) name their key, unless nan_policy='ignore' leaves them out."""
    if spec.core_kwargs.get("nan_policy", "raise") != "raise":
        return
    if isinstance(scores, torch.Tensor):  # one reduction where it lives; rows only when some are missing
        if bool(torch.isfinite(scores.sum())):  # NaN propagates through a sum (inf is the core's error)
            return
        scores = _host(scores)
    missing = np.isnan(scores)
    if not missing.any():
        return
    names = list(spec.keys) or ["the summed token_level_rewards"]
    parts = []
    for j, name in enumerate(names):
        rows = np.flatnonzero(missing[:, j])
        if rows.size:
            more = f" and {rows.size - 10} more" if rows.size > 10 else ""
            parts.append(f"{name!r} in rows {', '.join(map(str, rows[:10]))}{more}")
    raise ConfigError(
        f"reward component(s) missing (None or NaN): {'; '.join(parts)}. Return a number from "
        "compute_score, or set +algorithm.estimator_kwargs.nan_policy=ignore to leave missing rewards out "
        "of the statistics"
    )


def advantages_for_verl(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    index: Any = None,
    estimator: str,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One corrgrpo estimator in verl's calling convention; returns ``(advantages, returns)``, both (N, T).

    Outcome rewards only: verl's extra keyword arguments for other estimators (``reward_baselines`` when the
    batch has them, ``epsilon``) are accepted and not used; the core's ``eps`` comes from
    ``algorithm.estimator_kwargs``.
    """
    spec = reward_spec(config if config is not None else {}, estimator)
    if index is None:
        group_ids(index)  # raises, naming the missing uid
    scores = _scores(spec, token_level_rewards, non_tensor_batch)
    _check_missing(scores, spec)
    source = active_source()
    final_row = source.final_row if source is not None else None
    weights = None if spec.weights is None else np.asarray(spec.weights)
    run = dense_group_size(np.asarray(index, dtype=object).reshape(-1)) if final_row is None else 0
    ids: np.ndarray | None = None
    host: np.ndarray | None = None
    if run:  # verl's layout, groups of one size in runs: dense groups, no labels, no host copy of scores
        dense = scores.reshape(-1, run, scores.shape[-1])
        adv = compute_advantages(dense, estimator=spec.core_estimator, weights=weights, **spec.core_kwargs)
        adv = adv.reshape(-1)
        if source is not None:
            host = _host(scores)
    else:
        ids, host = group_ids(index), _host(scores)
        if final_row is not None:
            finals, to_final = np.unique(final_row, return_inverse=True)
            ids, host = group_ids(np.asarray(index, dtype=object).reshape(-1)[finals]), host[finals]
        # Memory: from here the host copy is the scores (the torch sum it came from is freed).
        del scores
        adv = compute_advantages(
            host, ids, estimator=spec.core_estimator, weights=weights, **spec.core_kwargs
        )
        if final_row is not None:
            adv = np.asarray(adv)[to_final.reshape(-1)]
    adv_t = torch.as_tensor(adv, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
    del adv  # the (float64) host advantages, before the token tensor is made
    if source is not None:
        assert host is not None
        source.metrics.update(reward_metrics(host, group_ids(index) if ids is None else ids, spec))
    del ids, host  # before the token tensor is made
    tokens = broadcast_to_tokens(adv_t, response_mask)
    return tokens, tokens
