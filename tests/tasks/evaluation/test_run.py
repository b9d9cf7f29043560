"""The run folder and the generate-then-score loop without a model: records reach the disk as each case
is scored, a rerun resumes without building the model, a kill mid-line costs that line only, a run with
other settings is refused; the bar advances once per case and names the phase; the paired comparison
matches hand-computed McNemar and bootstrap values. No framework needed."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corrgrpo_tasks.evaluation import _run
from corrgrpo_tasks.evaluation._compare import compare_runs, mcnemar_exact, paired_bootstrap
from corrgrpo_tasks.evaluation._run import Case, RunContext, generate_and_score
from corrgrpo_tasks.evaluation._store import RECORDS_FILE, RunStore

SETTINGS = {"benchmark": "humaneval", "model": "m", "options": {"timing_rounds": 8}}


class Model:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def generate(self, conversations: Any, tools: Any = None) -> list[str]:
        self.calls.append(len(conversations))
        return [f"reply to {c[0]['content']}" for c in conversations]


def context(folder: Path, model: Any, **kwargs: Any) -> RunContext:
    def build() -> Any:
        if model is None:
            raise AssertionError("the model was built although every case was already scored")
        return model

    return RunContext(
        build,
        folder,
        open_store=lambda: RunStore.open(folder, SETTINGS),
        options={"batch_size": 2},
        **kwargs,
    )


def cases(n: int) -> list[Case]:
    return [Case(f"p{i}", [{"role": "user", "content": f"q{i}"}]) for i in range(n)]


@pytest.mark.parametrize("background", [False, True])
def test_each_record_is_on_disk_as_soon_as_it_is_scored(tmp_path: Path, background: bool) -> None:
    on_disk: list[int] = []

    def score(case: Case, text: str) -> dict[str, Any]:
        on_disk.append(len((tmp_path / RECORDS_FILE).read_text().splitlines()))
        return {"passed": case.id != "p1", "echo": text}

    ctx = context(tmp_path, model := Model())
    records = generate_and_score(ctx, cases(3), score, background=background)
    ctx.close()
    assert on_disk == [0, 1, 2]  # record k is written before case k + 1 is scored
    assert model.calls == [2, 1]  # batches of --batch-size
    assert [r["id"] for r in records] == ["p0", "p1", "p2"]
    assert records[1] == {"id": "p1", "completion": "reply to q1", "passed": False, "echo": "reply to q1"}
    lines = [json.loads(x) for x in (tmp_path / RECORDS_FILE).read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == ["p0", "p1", "p2"]


def test_a_rerun_resumes_says_so_and_loads_no_model(tmp_path: Path) -> None:
    ctx = context(tmp_path, Model(), limit=2)
    generate_and_score(ctx, ctx.select(cases(4)), lambda c, t: {"n": 1})
    ctx.close()
    with (tmp_path / RECORDS_FILE).open("a") as handle:
        handle.write('{"id": "p2", "completion": "cut sho')  # a kill mid-line
    said: list[str] = []
    again = context(tmp_path, model := Model(), log=said.append)
    records = generate_and_score(again, again.select(cases(4)), lambda c, t: {"n": 2})
    again.close()
    assert said == [f"resuming {tmp_path}: 2 of 4 cases already scored, 2 to go"]
    assert model.calls == [2]
    assert [r["n"] for r in records] == [1, 1, 2, 2]
    assert len((tmp_path / RECORDS_FILE).read_text().splitlines()) == 4
    done = context(tmp_path, None)  # everything scored: the model is never built
    assert len(generate_and_score(done, cases(4), lambda c, t: {})) == 4
    done.close()


def test_offset_and_limit_select_a_slice(tmp_path: Path) -> None:
    ctx = context(tmp_path, Model(), offset=1, limit=2)
    assert [r["id"] for r in generate_and_score(ctx, ctx.select(cases(5)), lambda c, t: {})] == ["p1", "p2"]
    ctx.close()


def test_a_folder_of_another_run_is_refused_in_one_line(tmp_path: Path) -> None:
    RunStore.open(tmp_path, SETTINGS).close()
    other = {**SETTINGS, "options": {"timing_rounds": 2}}
    with pytest.raises(ValueError, match=r"holds a run with options \{'timing_rounds': 8\}, not") as err:
        RunStore.open(tmp_path, other)
    assert "\n" not in str(err.value)
    fresh = RunStore.open(tmp_path, other, fresh=True)
    assert fresh.done == {}
    fresh.close()


def test_the_bar_advances_per_case_and_names_the_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[Any, ...]] = []

    @contextlib.contextmanager
    def bar(total: int, *, enabled: bool, label: str) -> Iterator[Any]:
        seen.append(("open", total, label))
        yield lambda n=1, description=None: seen.append(("tick", n, description))

    monkeypatch.setattr(_run, "progress", bar)
    ctx = context(tmp_path, Model(), label="humaneval")
    generate_and_score(ctx, cases(3), lambda c, t: {}, background=False)
    ctx.close()
    assert seen[0] == ("open", 3, "humaneval")
    assert sum(n for kind, n, _ in seen[1:] if kind == "tick") == 3
    phases = [d for _, _, d in seen[1:] if d]
    assert phases == [
        "humaneval: generating 1-2 of 3",
        "humaneval: scoring 1-2 of 3",
        "humaneval: generating 3-3 of 3",
        "humaneval: scoring 3-3 of 3",
    ]
    seen.clear()
    ctx = context(tmp_path / "bg", Model(), label="humaneval")
    generate_and_score(ctx, cases(3), lambda c, t: {}, background=True)
    ctx.close()
    assert sum(n for kind, n, _ in seen[1:] if kind == "tick") == 3
    phases = [d for _, _, d in seen[1:] if d]
    assert phases[0] == "humaneval: generating 1-2 of 3"
    assert all(p.startswith(("humaneval: generating", "humaneval: scoring the last")) for p in phases)


def test_mcnemar_and_bootstrap_by_hand() -> None:
    # 9 discordant pairs one way, 1 the other: 2 * (1 + 10) / 2**10.
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar_exact(3, 3) == 1.0
    low, high = paired_bootstrap([1.0, 0.0, 0.0, -1.0] * 25, resamples=2000)
    assert low < 0.0 < high
    assert paired_bootstrap([0.5] * 10) == (0.5, 0.5)


def _folder(root: Path, name: str, passed: list[int], model: str) -> Path:
    folder = root / name
    folder.mkdir()
    ids = [f"HumanEval/{i}" for i in range(len(passed))]
    records = [{"id": i, "accuracy_reward": float(p)} for i, p in zip(ids, passed, strict=True)]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = {"pass@1": 100.0 * sum(passed) / len(passed), "n": len(passed)}
    payload = {"benchmark": "humaneval", "metrics": metrics, "ids": ids, "config": {"model": model}}
    (folder / "metrics.json").write_text(json.dumps(payload))
    return folder


def test_compare_prints_both_runs_and_the_paired_difference(tmp_path: Path) -> None:
    a = _folder(tmp_path, "a", [1, 1, 1, 0, 1, 1], "ckpt-a")
    b = _folder(tmp_path, "b", [0, 0, 1, 0, 1], "ckpt-b")  # one problem fewer: paired on 5
    text = compare_runs(a, b, resamples=1000)
    assert "| pass@1 | 83.33 | 40.00 | 43.33 |" in text
    assert "Paired on the 5 problems both runs scored" in text
    assert "80.00 vs 40.00, difference +40.00" in text
    assert f"2 pass only in `a`, 0 only in `b`, p = {mcnemar_exact(2, 0):.4g}" in text
    assert math.isclose(mcnemar_exact(2, 0), 0.5)


def test_compare_refuses_two_benchmarks(tmp_path: Path) -> None:
    a = _folder(tmp_path, "a", [1], "m")
    b = _folder(tmp_path, "b", [1], "m")
    payload = json.loads((b / "metrics.json").read_text())
    (b / "metrics.json").write_text(json.dumps({**payload, "benchmark": "mbpp"}))
    with pytest.raises(ValueError, match="is a mbpp run, not humaneval"):
        compare_runs(a, b)


def test_a_failing_scorer_stops_the_run_and_keeps_what_was_scored(tmp_path: Path) -> None:
    def score(case: Case, text: str) -> dict[str, Any]:
        if case.id == "p1":
            raise RuntimeError("the sandbox is gone")
        return {}

    ctx = context(tmp_path, Model())
    with pytest.raises(RuntimeError, match="the sandbox is gone"):
        generate_and_score(ctx, cases(6), score, background=True)
    ctx.close()
    kept = [json.loads(x)["id"] for x in (tmp_path / RECORDS_FILE).read_text().splitlines()]
    assert kept[0] == "p0"
    assert "p1" not in kept
    assert len(kept) < 6
