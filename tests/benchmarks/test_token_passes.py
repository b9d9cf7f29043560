"""``python -m benchmarks.token_passes``: every pass runs on a tiny verl batch and the table names its bytes."""

from __future__ import annotations

import pytest

from benchmarks import token_passes


def test_every_pass_runs_and_is_reported_with_its_bytes(capsys):
    pytest.importorskip("verl")
    assert token_passes.main(["--n", "512", "--length", "1024", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| pass")]
    assert len(rows) == 12
    moved = {r.split("|")[1].strip(): (r.split("|")[2].strip(), r.split("|")[3].strip()) for r in rows}
    assert moved["sum of the token rewards over L"] == ("2", "0")  # 512 x 1024 float32
    assert moved["one read of the mask (its sum)"] == ("4", "0")  # int64, as verl's
    assert moved["ours: broadcast_to_tokens (fresh output)"] == ("4", "2")
    assert "THP_MEM_ALLOC_ENABLE=" in out
