"""Side-by-side benchmark of the corrgrpo_core estimators (run ``python -m benchmarks --help``).

Every ratio in a table is measured in the same process and run as the row itself:

- against a per-group Python loop with the reference semantics (:mod:`benchmarks._loop`),
- against the frameworks' own functions in their own input formats, end to end:
  ``python -m benchmarks.frameworks verl|trl`` (:mod:`benchmarks.frameworks`),
- against the memory floor: one copy of the input array on the same backend.
"""

from ._data import LAYOUTS, make_case
from ._run import BACKENDS, ESTIMATORS, Row, run

__all__ = ["BACKENDS", "ESTIMATORS", "LAYOUTS", "Row", "make_case", "run"]
