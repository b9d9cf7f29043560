"""Lanes: a sandbox failure is never the candidate's score, batches back to back, named packages."""

from __future__ import annotations

import time

import pytest

from corrgrpo_tasks.code import _lanes, score_batch
from corrgrpo_tasks.sandbox import Sandbox

ADD = {
    "prompt": "",
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 7) == 12\n",
    "reference_solution": "def add(a, b):\n    return a + b\n",
}
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
MIX = [
    GOOD,
    "```python\ndef add(a, b):\n    return a - b\n```",
    "```python\ndef add(a, b):\n    raise ValueError(a)\n```",
    "I cannot solve this.",
]


def _job(code: str) -> dict[str, object]:
    return {
        "kind": "check",
        "code": code,
        "prompt": "",
        "test": ADD["test"],
        "entry_point": "add",
        "entry_top": "add",
        "tests": None,
        "reference": None,
        "seconds": 3.0,
        "ast_token_cap": 0,
        "timing": None,
    }


def test_many_batches_back_to_back_keep_every_honest_verdict(box: Sandbox) -> None:
    """Issue 25 saw about one run in five of a mixed 80-sample batch, right after an earlier batch, score
    the first correct ``return a + b`` as 0 with sandbox_error 1: the earlier batch's pool threads had
    started the lanes, and bubblewrap's --die-with-parent follows the thread."""
    del box
    texts = [MIX[i % len(MIX)] for i in range(40)]
    expected = [float(text == GOOD) for text in texts]
    for _ in range(6):
        scores = score_batch(texts, [ADD] * len(texts), max_workers=2, timeout_seconds=3.0)
        assert [s["accuracy_reward"] for s in scores] == expected
        assert [s["sandbox_error"] for s in scores] == [0.0] * len(texts)


def test_idle_lanes_outlive_the_threads_that_asked_for_them(box: Sandbox) -> None:
    del box
    score_batch([GOOD] * 4, [ADD] * 4, max_workers=2)  # its pool's threads are gone when it returns
    time.sleep(0.3)
    idle = [lane for group in _lanes._LANES.idle.values() for lane in group]
    assert idle
    assert all(lane.alive() for lane in idle)


@pytest.mark.parametrize("which", [0, 2], ids=["candidate_server", "judge"])
def test_a_lane_dead_before_the_job_is_replaced_and_the_job_run_again(
    which: int, box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lanes._LANES.close()
    records, clean = _lanes.run_job(
        _job("def add(a, b):\n    return a + b\n"), sandbox=box, memory_mb=1024, seconds=3.0
    )
    assert (records["run"]["status"], clean) == ("passed", True)
    (lane,) = _lanes._LANES.idle[(id(box), 1024)]
    lane.running[which].kill()  # a sandbox of the idle lane dies (not the next candidate's doing)
    lane.running[which].wait()
    monkeypatch.setattr(_lanes._Lane, "alive", lambda self: True)  # and nobody notices in time
    records, _ = _lanes.run_job(
        _job("def add(a, b):\n    return a + b\n"), sandbox=box, memory_mb=1024, seconds=3.0
    )
    assert records["run"]["status"] == "passed"
    assert "lane" not in records
    assert lane not in _lanes._LANES.idle.get((id(box), 1024), [])


def test_a_lane_that_keeps_failing_gives_no_records(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = []

    class Broken:
        uid = None
        jobs = 0

        def score(self, job: object, seconds: float) -> tuple[bytes, bool]:
            attempts.append(1)
            return b'{"stage":"lane","error":"the server is gone"}\n', True

    monkeypatch.setattr(_lanes._LANES, "acquire", lambda sandbox, memory_mb: Broken())
    monkeypatch.setattr(_lanes._LANES, "release", lambda *args: None)
    assert _lanes.run_job(_job("x = 1"), sandbox=box, memory_mb=1024, seconds=1.0) == ({}, False)
    assert len(attempts) == _lanes._ATTEMPTS


def test_named_packages_reach_the_candidate_only_when_named(box: Sandbox) -> None:
    pytest.importorskip("numpy")
    code = "import numpy\ndef add(a, b):\n    return int(numpy.add(a, b))\n"
    plain = _lanes.sandbox_for(False, (), ())
    with_numpy = _lanes.sandbox_for(False, (), ("numpy",))
    assert plain is not with_numpy
    records, _ = _lanes.run_job(_job(code), sandbox=with_numpy, memory_mb=1024, seconds=5.0)
    assert records["run"]["status"] == "passed", records
    records, _ = _lanes.run_job(_job(code), sandbox=plain, memory_mb=1024, seconds=5.0)
    assert records["run"]["status"] == "runtime_error"
    assert "numpy" in records["run"]["error"]
    del box
