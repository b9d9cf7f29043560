"""The options a whole-call kernel takes, declared once for every backend's kernels."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["KernelOptions"]


class KernelOptions(NamedTuple):
    """An estimator's options as its public function checked them (a tuple: built in well under a
    microsecond, which matters at the sizes TRL hands over).

    ``zero_variance_rtol`` None means the generic path's default (64 epsilons of its working
    dtype); each kernel resolves it for its device. The last five are for the estimators that
    take them (CorrGRPO's floor; GDPO-corr's group placement; DARA's variant, base and cap).
    """

    eps: float
    eps_placement: str
    ddof: int
    zero_variance_rtol: float | None
    singleton: str
    min_correlation_sum: float = 0.0
    group_eps_placement: str = "outside"
    variant: str = "asym"
    base: str = "gdpo"
    max_weight: float = 5.0
