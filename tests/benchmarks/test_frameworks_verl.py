"""The framework benchmark's verl suite on a tiny grid, against verl's own code (runs in the verl env)."""

from __future__ import annotations

import pytest

from benchmarks import frameworks as fw


def test_verl_suite_runs_and_our_grpo_equals_verls():
    pytest.importorskip("verl")
    rows = fw.run_verl([256], [1, 5], ["runs", "shuffled"], repeats=1)
    by = {(r.case, r.size, r.call): r for r in rows}
    for layout in ("runs", "shuffled"):
        for length in (1, 5):
            ours = by[(layout, length, "ours core_grpo")]
            assert ours.diff_against == "verl grpo_vectorized"
            assert ours.max_abs_diff is not None
            assert ours.max_abs_diff <= 1e-5
            assert by[(layout, length, "ours corrgrpo (K=3)")].max_abs_diff <= 1e-4
            assert by[(layout, length, "verl grpo_vectorized")].x_baseline == 1.0
            assert any(call.startswith("traffic floor") for (_, _, call) in by)
