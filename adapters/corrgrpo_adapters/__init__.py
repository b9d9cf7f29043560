"""Adapters that bring corrgrpo_core estimators into TRL, verl and OpenRLHF.

This module holds the two facts every adapter shares, and imports no framework (the adapters live in
the subpackages, which do not import each other):

* the framework releases each adapter supports (:data:`RANGES`). The extras in ``pyproject.toml``
  declare the same ranges (``tests/ci/test_version_ranges.py`` checks it), and CI runs each adapter's
  tests at both ends: the newest in ``ci/envs/NAME``, with the framework's own suites, the oldest in
  ``ci/envs/NAME-oldest`` (where the range has two ends). Inside a range an adapter says nothing; outside it, it warns, naming the
  range (or raises, when the hooked code itself moved);
* what every adapter logs, under the same names (:func:`logged_summary`): the core's
  ``AdvantageStats.summary()`` under ``corrgrpo/``, for every estimator (TRL's trainer metrics, verl's
  step metrics, OpenRLHF's ``Experience.info``), among them ``corrgrpo/zero_signal_groups``, the share
  of groups where no reward component varies (every estimator's advantages are 0 there), computed the
  same way whatever the estimator.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = [
    "METRIC_PREFIX",
    "RANGES",
    "ZERO_SIGNAL",
    "SupportedRange",
    "installed_version",
    "logged_summary",
    "warn_outside_range",
]


@dataclass(frozen=True)
class SupportedRange:
    """``framework>=oldest,<below``; CI tests ``oldest`` and ``newest``."""

    framework: str
    oldest: str
    newest: str
    below: str

    @property
    def requirement(self) -> str:
        """The requirement string of the extra, e.g. ``trl>=1.4.0,<1.17``."""
        return f"{self.framework}>={self.oldest},<{self.below}"

    def describe(self) -> str:
        tested = self.newest if self.oldest == self.newest else f"{self.oldest} and {self.newest}"
        return f"{self.requirement} (CI tests {tested})"

    def contains(self, installed: str) -> bool:
        release = _release(installed)
        return _release(self.oldest) <= release < _release(self.below)


#: framework -> the releases its adapter supports.
RANGES: dict[str, SupportedRange] = {
    "trl": SupportedRange("trl", oldest="1.4.0", newest="1.16.0", below="1.17"),
    "verl": SupportedRange("verl", oldest="0.9.0", newest="0.9.1", below="0.10"),
    "openrlhf": SupportedRange("openrlhf", oldest="0.10.3", newest="0.11.2", below="0.12"),
}


def _release(text: str) -> tuple[int, ...]:
    """The leading release numbers of a version string ('1.17.0.dev0' -> (1, 17, 0)), padded to 3."""
    match = re.match(r"\d+(?:\.\d+)*", text.strip().lstrip("v"))
    numbers = tuple(int(part) for part in match.group(0).split(".")) if match else ()
    return (*numbers, 0, 0, 0)[: max(3, len(numbers))]


def installed_version(framework: str) -> str | None:
    """The installed distribution's version, or None when it is not installed."""
    try:
        return version(framework)
    except PackageNotFoundError:
        return None


def warn_outside_range(framework: str, installed: str | None = None, *, stacklevel: int = 2) -> bool:
    """Warn when the installed ``framework`` (or ``installed``) is outside its supported range; True
    when it is inside, or not installed (which the adapter reports on its own)."""
    supported = RANGES[framework]
    found = installed if installed is not None else installed_version(framework)
    if found is None or supported.contains(found):
        return True
    warnings.warn(
        f"corrgrpo_adapters.{framework} supports {supported.describe()}; the installed {framework} {found} "
        f"is outside that range and untested (pip install '{supported.requirement}')",
        UserWarning,
        stacklevel=stacklevel + 1,
    )
    return False


#: The prefix of every metric an adapter adds to its framework's logs.
METRIC_PREFIX = "corrgrpo/"
#: The summary key of the zero-signal-group metric (TRL's adapter logs it in place of TRL's
#: frac_reward_zero_std, even with its other diagnostics off).
ZERO_SIGNAL = "zero_signal_groups"


def logged_summary(stats: Any, component_names: Sequence[str]) -> dict[str, float]:
    """``stats.summary(component_names)`` (an ``AdvantageStats``) as the metrics an adapter logs."""
    return {
        METRIC_PREFIX + k: float(v) for k, v in stats.summary(component_names=list(component_names)).items()
    }
