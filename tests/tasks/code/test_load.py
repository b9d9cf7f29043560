"""Under load: 500 mixed samples scored in parallel; throughput is printed and bounded."""

from __future__ import annotations

import json
import os
import time

import pytest

from corrgrpo_tasks.code import score_batch
from corrgrpo_tasks.sandbox import Sandbox

GT = json.dumps(
    {
        "prompt": "",
        "entry_point": "Solution().solve",
        "test": "def check(candidate):\n    for n in range(50):\n        assert candidate(n) == n * n\n",
        "reference_solution": "class Solution:\n    def solve(self, n):\n        return n * n\n",
    }
)
KINDS = {
    "correct": "```python\nclass Solution:\n    def solve(self, n):\n        return n * n\n```",
    "wrong": "```python\nclass Solution:\n    def solve(self, n):\n        return n + n\n```",
    "syntax": "```python\nclass Solution:\n    def solve(self, n)\n        return n\n```",
    "crash": "```python\nclass Solution:\n    def solve(self, n):\n        raise ValueError(n)\n```",
    "memory": "```python\nclass Solution:\n    def solve(self, n):\n        return len(bytearray(1 << 40))\n```",
    "prose": "I don't know.",
}


def test_500_samples_in_parallel(box: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    del box
    names = [list(KINDS)[i % len(KINDS)] for i in range(498)] + ["hang", "hang"]
    texts = [
        KINDS.get(n, "```python\nclass Solution:\n    def solve(self, n):\n        while True: pass\n```")
        for n in names
    ]
    start = time.monotonic()
    scores = score_batch(texts, [GT] * len(texts), timeout_seconds=2.0)
    elapsed = time.monotonic() - start
    rate = len(texts) / elapsed
    with capsys.disabled():
        print(
            f"\n[load] {len(texts)} samples in {elapsed:.1f} s on {len(os.sched_getaffinity(0))} cores: "
            f"{rate:.1f} samples/s"
        )
    for name, score in zip(names, scores, strict=False):
        assert score["accuracy_reward"] == float(name == "correct"), (name, score)
        assert score["sandbox_error"] == 0.0
    assert elapsed < 150, f"500 samples took {elapsed:.0f} s"
