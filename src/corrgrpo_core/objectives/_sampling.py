"""DAPO's data-side parts: the dynamic-sampling filter and the soft overlong penalty."""

from __future__ import annotations

from typing import Any

from .._lib._compat import Array, device, namespace
from .._validation import (
    NAN_POLICIES,
    FilterCriterion,
    NanPolicy,
    check_choice,
    check_int,
    check_number,
    choices,
)

__all__ = ["FilterCriterion", "informative_groups", "overlong_penalty"]


def informative_groups(
    scores: Array,
    group_ids: Array | None = None,
    /,
    *,
    criterion: FilterCriterion = "total",
    weights: Array | None = None,
    atol: float = 1e-6,
    zero_variance_rtol: float | None = None,
    nan_policy: NanPolicy = "raise",
) -> Array:
    r"""Which groups carry a learning signal: DAPO's dynamic-sampling filter, per row.

    DAPO drops a prompt group when its reward does not vary (all correct or all wrong): every
    group-centred advantage is then zero. With several reward components there are two readings:

    ``criterion="total"`` (DAPO's, verl's ``filter_groups``)
        keep a group when the weighted total :math:`R^i=\sum_k w_k R^i_k` varies in it
        (group std > ``atol``). Right for GRPO, Dr.GRPO, RLOO and CorrGRPO, whose advantage
        numerator is the centred weighted total: a group with tied totals gets zero advantage
        from them, so ``"dapo+corrgrpo"`` filters on the (weighted) total.
    ``criterion="any_component"``
        keep a group when at least one component varies in it. Right for estimators that
        normalise each component before summing (GDPO, GDPO-corr, MO-GRPO, DARA): they give
        non-zero advantages to groups whose components vary but whose totals tie, which the
        ``total`` rule would throw away. :func:`filter_criterion_for` picks the right one.

    A group of one response is never informative (every estimator gives it zero advantage;
    verl keeps such groups). Component variation uses the core's zero-variance rule
    (:func:`corrgrpo_core.advantage_stats`), the total uses ``atol``.

    Parameters
    ----------
    scores : array, shape (n, K), (B, n, K) or (N, K)
        Reward components, in the layouts of :func:`corrgrpo_core.compute_advantages`.
    group_ids : array, shape (N,), optional
        Integer group label per row for the ragged layout.
    criterion : {"total", "any_component"}, default "total"
        See above.
    weights : array, shape (K,), optional
        Component weights for the total (default: all ones).
    atol : float, default 1e-6
        A group whose total has std at most this counts as tied (absorbs round-off such as
        0.1 + 0.2 != 0.3; scale it with the rewards).
    zero_variance_rtol, nan_policy
        As in :func:`corrgrpo_core.corrgrpo_advantage`: the component rule for
        ``"any_component"`` and the handling of missing rewards.

    Returns
    -------
    array of bool, shape ``scores.shape[:-1]``
        True on every row of a group to keep; constant within a group. Use it as a mask
        (``xp.where``), or take one row per group; its shape never depends on values, so it
        works under ``jax.jit``.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import informative_groups
    >>> scores = np.asarray([[1.0, 0.0], [0.0, 1.0],    # group 0: components vary, totals tie
    ...                      [1.0, 1.0], [1.0, 1.0]])   # group 1: nothing varies
    >>> gid = np.asarray([0, 0, 1, 1])
    >>> informative_groups(scores, gid).tolist()
    [False, False, False, False]
    >>> informative_groups(scores, gid, criterion="any_component").tolist()
    [True, True, False, False]
    """
    import corrgrpo_core as cc

    check_choice("criterion", criterion, choices(FilterCriterion))
    check_choice("nan_policy", nan_policy, NAN_POLICIES)
    check_number("atol", atol)
    stats = cc.advantage_stats(
        scores, group_ids, weights=weights, zero_variance_rtol=zero_variance_rtol, nan_policy=nan_policy
    )
    if criterion == "total":
        return stats.total_std > atol
    n_components = scores.shape[-1]
    return stats.zero_variance_count < n_components


def overlong_penalty(
    lengths: Array,
    /,
    *,
    max_length: int,
    cache_length: int,
    penalty_factor: float = 1.0,
    dtype: Any | None = None,
) -> Array:
    r"""DAPO's soft overlong punishment, to be added to the reward.

    .. math::

        R_{len}(L) = c \cdot \begin{cases}
            0 & L \le L_{max} - L_{cache} \\
            \frac{(L_{max} - L_{cache}) - L}{L_{cache}} & L_{max} - L_{cache} < L \le L_{max} \\
            -1 & L > L_{max}
        \end{cases}

    Continuous in :math:`L`, linear across the buffer of length :math:`L_{cache}`. verl's
    ``dapo`` reward manager computes the same thing without the -1 floor (its lengths never
    pass the limit); paper values :math:`L_{max}=20480`, :math:`L_{cache}=4096`.

    Parameters
    ----------
    lengths : array
        Response lengths in tokens (integer or floating), any shape.
    max_length : int
        :math:`L_{max}`, the hard limit.
    cache_length : int
        :math:`L_{cache}`, the soft buffer below the limit; ``0 < cache_length <= max_length``.
    penalty_factor : float, default 1.0
        :math:`c`, the penalty at and past the limit (verl's ``overlong_buffer.penalty_factor``).
    dtype : dtype, optional
        Output dtype; default ``lengths``' dtype if floating, else the namespace's default
        floating dtype.

    Returns
    -------
    array
        Non-positive penalties, same shape and namespace as ``lengths``.

    Examples
    --------
    >>> import numpy as np
    >>> from corrgrpo_core.objectives import overlong_penalty
    >>> overlong_penalty(np.asarray([10, 16, 18, 20, 25]), max_length=20, cache_length=4).tolist()
    [0.0, 0.0, -0.5, -1.0, -1.0]
    """
    xp = namespace(lengths)
    check_int("max_length", max_length, minimum=1)
    if check_int("cache_length", cache_length, minimum=1) > max_length:
        raise ValueError(f"cache_length must be at most max_length ({max_length}), got {cache_length!r}")
    check_number("penalty_factor", penalty_factor)
    if dtype is None:
        if xp.isdtype(lengths.dtype, "real floating"):
            dtype = lengths.dtype
        else:
            info = xp.__array_namespace_info__()
            dtype = info.default_dtypes(device=device(lengths))["real floating"]
    length = xp.astype(lengths, dtype)
    slope = (float(max_length - cache_length) - length) / float(cache_length)
    return penalty_factor * xp.clip(slope, -1.0, 0.0)
