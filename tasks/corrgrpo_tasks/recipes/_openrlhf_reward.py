"""OpenRLHF ``--reward.remote_url`` functions: components in ``extra_logs``, their weighted sum as reward."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._decoding import completion_text, reward_profile


def make_reward_func(
    score: Callable[..., dict[str, float]], data_source: str, components: Sequence[str]
) -> Callable[..., dict[str, Any]]:
    """An OpenRLHF ``reward_func(queries, prompts, labels, **kw)`` built on a domain ``compute_score``.

    OpenRLHF passes the full text (prompt + completion, special tokens kept) as ``queries``; the
    completion handed to ``score`` is :func:`completion_text` of it, with ``profile=`` from
    :data:`PROFILE_ENV`. Every component lands in ``extra_logs`` (OpenRLHF logs them and our launcher's
    estimator reads them); ``rewards`` and ``scores`` are the component sum.
    """

    def reward_func(
        queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **_: Any
    ) -> dict[str, Any]:
        import torch

        profile = reward_profile()
        rows = [
            score(data_source, completion_text(query, prompt), label, None, profile=profile)
            for query, prompt, label in zip(queries, prompts, labels, strict=True)
        ]
        logs = {c: torch.tensor([r[c] for r in rows], dtype=torch.float32) for c in components}
        total = torch.stack(list(logs.values())).sum(0) if logs else torch.zeros(len(rows))
        return {"rewards": total, "scores": total, "extra_logs": logs}

    return reward_func
