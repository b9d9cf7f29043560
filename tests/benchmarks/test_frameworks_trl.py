"""The framework benchmark's TRL suite on a tiny grid, against TRL's own code (runs in the trl env)."""

from __future__ import annotations

import pytest

from benchmarks import frameworks as fw


def test_trl_suite_runs_and_our_grpo_equals_trls_lines():
    pytest.importorskip("trl")
    rows = fw.run_trl([64], [1, 3], repeats=1)
    ours = [r for r in rows if r.call == "ours grpo"]
    assert len(ours) == 2
    assert all(r.max_abs_diff is not None for r in ours)
    assert all(r.max_abs_diff <= 1e-5 for r in ours)
    floors = [r for r in rows if r.call == fw.FLOOR]
    assert len(floors) == 2
    assert all(r.x_floor == 1.0 for r in floors)
    assert all(r.x_floor is not None and r.x_floor > 0 for r in rows)
    table = fw.markdown(rows)
    assert table.startswith("| suite | case |")
