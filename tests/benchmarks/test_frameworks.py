"""The framework benchmark (``python -m benchmarks.frameworks``): its measuring helpers (tiny verl and TRL
runs are in test_frameworks_verl.py and test_frameworks_trl.py). Checks what the tables claim, not the speed."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import frameworks as fw


def test_interleaved_minimum_calls_every_function_each_round_and_slow_ones_less():
    seen: list[str] = []
    calls = {
        "a": lambda: seen.append("a"),
        "b": lambda: seen.append("b"),
        "slow": lambda: seen.append("slow"),
    }
    best = fw.interleaved_min(calls, 4, slow=["slow"], slow_repeats=2)
    assert seen == ["a", "b", "slow"] + ["a", "b", "slow"] * 2 + ["a", "b"] * 2  # warm-up, then rounds
    assert set(best) == {"a", "b", "slow"}
    assert all(t >= 0 for t in best.values())


def test_peak_extra_sees_a_large_temporary():
    peak = fw.peak_extra(lambda: np.ones(2**23).sum())  # a 64 MiB temporary, freed before returning
    if peak is None:
        pytest.skip("this kernel's VmHWM cannot be reset or misses freed blocks")
    assert peak >= 32 * 2**20


def test_peak_extra_is_none_where_the_probe_misses_a_freed_block(monkeypatch):
    # A kernel that updates VmHWM only when it is read reports ~0 for a 64 MiB temporary.
    monkeypatch.setattr(fw, "_hwm_sees_temporaries", None)
    monkeypatch.setattr(fw, "_status", lambda field: 100 * 2**20)
    assert fw.peak_extra(lambda: np.ones(2**23).sum()) is None
    assert fw.peak_extra(lambda: None) is None  # decided once per process


def test_reference_corrgrpo_matches_the_core_on_a_verl_batch():
    torch = pytest.importorskip("torch")
    import corrgrpo_core as cc
    from benchmarks._reference import reference_corrgrpo

    batch = fw.verl_batch(256, 5, shuffled=True)
    adv, _ = reference_corrgrpo(batch["mask"], batch["index"], batch["non_tensor_batch"], fw.KEYS)
    scores = np.stack([batch["non_tensor_batch"][k] for k in fw.KEYS], axis=1)
    want = cc.corr_normalized_advantage(scores, cc.group_labels(batch["index"]))
    got = adv.sum(-1) / batch["mask"].sum(-1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
    assert adv.dtype == torch.float32


def test_traffic_floor_is_the_sequence_reward_times_the_mask():
    torch = pytest.importorskip("torch")
    batch = fw.verl_batch(600, 700, shuffled=False)  # several pieces of rows
    got = fw.traffic_floor(batch["rewards"], batch["mask"])
    want = batch["rewards"].sum(-1, keepdim=True) * batch["mask"]
    assert got.dtype == torch.float32
    assert torch.equal(got, want)


def test_memory_floor_is_a_fresh_copy_of_the_input():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = fw.memory_floor(x)
    assert torch.equal(out, x)
    assert out.data_ptr() != x.data_ptr()


def test_fixed_cost_profile_reports_shares_of_the_call():
    from benchmarks import fixed_cost

    lines = fixed_cost.profile("grpo", 1, calls=20)
    shares = [int(line.rsplit("|", 2)[1].strip().rstrip("%")) for line in lines if line.endswith("% |")]
    assert shares
    assert 90 <= sum(shares) <= 101  # the twelve largest of a total of 100%
    assert any("corrgrpo_core/" in line for line in lines)
