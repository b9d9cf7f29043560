"""Programs that take the harness's work over to look faster (issue 34, item 6), against replay mode.

A timed round replays the verdict run: the server reads the whole batch of requests before it forks the
session, the session answers them from memory and sends every answer after the last call, and the judge
compares the answers with the verdict run's byte for byte. Each program below is the reference's own
algorithm plus a takeover, scored against its identical twin (the same text with the takeover switched
off, so loading costs both the same):

* ``SERVES_ITS_SOCKET`` finds its socket among its descriptors and answers the judge's requests with a
  faster loop of its own (the attack issue 34 measured at efficiency 0.3-0.5): in replay mode no request
  is pending, and its first answer is not the round's answers, so the round diverges: efficiency 0;
* ``TAKES_THE_BATCH`` walks up its stack to the replay loop, computes every remaining answer in a loop
  of its own, writes the round's answers to its socket and sleeps: the answers are right, and what it
  saves is the harness's share of a call, which the replay loop keeps at the shortest Python has: its
  efficiency against its twin is noise (the mean within the rounds' own standard error);
* the same with ``SKEW = 1`` answers wrongly in the timed rounds only (proof that the takeover runs where
  it is timed), and ``DETECTS_THE_TIMED_ROUND`` answers 0 without computing once it sees a batch in its
  caller's frame: a timed round whose answers differ from the verdict run's pays no efficiency, whatever
  the program's verdict (it stays passed).

``python tests/tasks/code/test_hostile_replay.py`` prints each takeover's mean efficiency against its
twin on the tree it imports (``PYTHONPATH=<tree>/tasks`` scores an older tree).
"""

from __future__ import annotations

import math
import statistics
import sys
from typing import Any

from corrgrpo_tasks.code import compute_score, score_batch
from corrgrpo_tasks.sandbox import Sandbox

CALLS = 300
TRUTH_TEST = (
    f"def check(candidate):\n    for n in range({CALLS}):\n        assert candidate(n) == n * (n + 1) // 2\n"
)
HONEST = "def tri(n):\n    return n * (n + 1) // 2\n"

SERVES_ITS_SOCKET = """import os, stat, struct

SERVE = True


def tri(n):
    if SERVE:
        _serve(n)
    return n * (n + 1) // 2


def _socket_fd():
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass
    return -1


def _read(fd, size):
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            os._exit(0)
        data += chunk
    return data


def _serve(n):
    global SERVE
    SERVE = False
    fd = _socket_fd()
    reply = b'["t",2,"s","v","i",%d]' % (n * (n + 1) // 2)
    while True:  # the judge's requests are ("call", handle, (n,), {}): the 10th token is n
        os.write(fd, struct.pack(">I", len(reply)) + reply)
        (size,) = struct.unpack(">I", _read(fd, 4))
        k = int(_read(fd, size).split(b",")[9])
        reply = b'["t",2,"s","v","i",%d]' % (k * (k + 1) // 2)
"""

TAKES_THE_BATCH = """import os, stat, struct, sys, time

TAKE_OVER = True
SKEW = 0


def tri(n):
    if TAKE_OVER:
        _take_over(n)
    return n * (n + 1) // 2


def _take_over(n):
    global TAKE_OVER
    TAKE_OVER = False
    frame = sys._getframe(2)
    while frame is not None and "requests" not in frame.f_locals:
        frame = frame.f_back
    if frame is None:
        return  # the verdict run: served live, no batch to take
    local = frame.f_locals
    requests, current = local["requests"], local["item"]
    rest = requests[[i for i, r in enumerate(requests) if r is current][0] + 1 :]
    out = list(local["session"].outbox)
    out.append(b'["t",2,"s","v","i",%d]' % (n * (n + 1) // 2 + SKEW))
    for item in rest:
        k = item[1][0]
        out.append(b'["t",2,"s","v","i",%d]' % (k * (k + 1) // 2 + SKEW))
    payload = b"\\n".join(out)
    fd = next(fd for fd in range(3, 256) if _is_socket(fd))
    view = memoryview(struct.pack(">I", len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]
    while True:  # the judge has its answers; sleeping costs no processor time
        time.sleep(3600)


def _is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
"""

DETECTS_THE_TIMED_ROUND = """import sys


def tri(n):
    if "requests" in sys._getframe(1).f_locals:  # called from the replay loop: a timed round
        return 0
    total = 0
    for i in range(n + 1):
        total += i
    return total
"""
# The reference of the control below: O(n), twenty times over, so that an O(1) program's gain (about 0.9)
# stands far above what a loaded machine does to five rounds of a few milliseconds each (with a single
# O(n) pass the reference took 5 ms of CPU against the O(1) program's 3 ms of session cost, a gain of
# 0.35 whose lower bound a loaded CI run once put at 0).
SLOW = """def tri(n):
    for _ in range(20):
        total = 0
        for i in range(n + 1):
            total += i
    return total
"""


def truth(reference: str) -> dict[str, Any]:
    return {"prompt": "", "test": TRUTH_TEST, "entry_point": "tri", "reference_solution": reference}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def twin(program: str, switch: str) -> str:
    """The same program with its takeover switched off (``SERVE = False``): identical text otherwise."""
    honest = program.replace(f"{switch} = True", f"{switch} = False")
    assert honest != program
    return honest


def score(program: str, reference: str, **options: Any) -> dict[str, Any]:
    options = {"timeout_seconds": 5.0, "keep_error": True, "keep_timing": True, **options}
    return compute_score(None, fenced(program), truth(reference), **options)


def _paired_noise(candidate: list[float], reference: list[float]) -> float:
    gains = [1.0 - c / r for c, r in zip(candidate, reference, strict=False)]
    return statistics.stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else 0.0


def against_twin(program: str, switch: str, scorings: int) -> tuple[list[dict[str, Any]], float, float]:
    """``scorings`` scorings of ``program`` against its twin: the results, the mean efficiency and the
    mean standard error of the rounds' paired speed-ups (what noise alone could show)."""
    reference = twin(program, switch)
    results = score_batch(
        [fenced(program)] * scorings,
        [truth(reference)] * scorings,
        max_workers=2,
        keep_timing=True,
        keep_error=True,
        timeout_seconds=5.0,
    )
    timed = [r for r in results if "_timing" in r]
    noise = statistics.mean(_paired_noise(*r["_timing"]) for r in timed) if timed else 0.0
    mean = statistics.mean(r["efficiency_reward"] for r in results)
    return results, mean, noise


def test_a_program_that_serves_its_own_socket_gains_nothing(box: Sandbox) -> None:
    """It passes (it serves the verdict run live, correctly), but a timed round has no request on the
    socket to answer: its answer is not the round's, and the sample pays no efficiency."""
    del box
    result = score(SERVES_ITS_SOCKET, twin(SERVES_ITS_SOCKET, "SERVE"))
    assert result["accuracy_reward"] == 1.0, result
    assert result["efficiency_reward"] == 0.0, result
    assert "answers differ from the verdict run's" in result["_error"], result


def test_a_program_that_takes_the_batch_over_is_noise_against_its_twin(box: Sandbox) -> None:
    """12 scorings against the identical program without the takeover: the mean efficiency stays within
    the rounds' own standard error (``SERVES_ITS_SOCKET``, before replay mode: a mean of 0.36 against a
    standard error of 0.04, docs/tasks/code.md)."""
    del box
    results, mean, noise = against_twin(TAKES_THE_BATCH, "TAKE_OVER", 12)
    assert all(r["accuracy_reward"] == 1.0 for r in results), results
    assert sum("_timing" in r for r in results) >= 9, results  # its answers were right: rounds counted
    assert mean <= noise, (mean, noise)


def test_the_takeover_runs_in_the_timed_rounds(box: Sandbox) -> None:
    """The same takeover with wrong answers: it is what answers the timed rounds (and so no efficiency)."""
    del box
    skewed = TAKES_THE_BATCH.replace("SKEW = 0", "SKEW = 1")
    result = score(skewed, twin(TAKES_THE_BATCH, "TAKE_OVER"))
    assert result["accuracy_reward"] == 1.0, result
    assert result["efficiency_reward"] == 0.0, result
    assert "answers differ from the verdict run's" in result["_error"], result


def test_timed_answers_that_differ_from_the_verdict_run_pay_no_efficiency(box: Sandbox) -> None:
    """Honest (O(n)) when judged, 0 without computing when timed, against the O(n) reference: an honest
    O(1) program earns efficiency here (control), this one none."""
    del box
    control = score(HONEST, SLOW)
    assert control["efficiency_reward"] > 0.0, control
    result = score(DETECTS_THE_TIMED_ROUND, SLOW)
    assert result["accuracy_reward"] == 1.0, result  # the verdict run passed: the verdict stands
    assert result["efficiency_reward"] == 0.0, result
    assert result["efficiency_applied"] == 0.0, result
    assert "answers differ from the verdict run's" in result["_error"], result


def _report(scorings: int = 12) -> None:
    for name, program, switch in (
        ("serves_its_socket", SERVES_ITS_SOCKET, "SERVE"),
        ("takes_the_batch", TAKES_THE_BATCH, "TAKE_OVER"),
    ):
        results, mean, noise = against_twin(program, switch, scorings)
        passed = sum(r["accuracy_reward"] == 1.0 for r in results)
        print(
            f"{name}: passed {passed} of {scorings}; efficiency against its twin: mean {mean:.3f}, "
            f"min {min(r['efficiency_reward'] for r in results):.3f}, "
            f"max {max(r['efficiency_reward'] for r in results):.3f}; rounds' standard error {noise:.3f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    _report(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
