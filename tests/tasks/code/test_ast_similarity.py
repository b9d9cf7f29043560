"""AST similarity is the reference's: its node sequence (contexts included) and difflib's ratio, exact up to
20,000 tokens; past the cap or the work budget, a flagged prefix."""

from __future__ import annotations

import ast
import difflib
import inspect
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrgrpo_tasks.code import compute_score
from corrgrpo_tasks.code.sandboxed._syntax import WORK_BUDGET, ast_tokens, similarity
from corrgrpo_tasks.sandbox import Sandbox

REFERENCE = "class Solution:\n    def solve(self, value):\n        return value + 1\n"
GT = {
    "prompt": "",
    "test": "def check(candidate):\n    assert candidate(1) == 2\n",
    "entry_point": "Solution().solve",
    "reference_solution": REFERENCE,
}


def _visit(node: ast.AST) -> list[str]:
    name = type(node).__name__
    return [name, *(token for child in ast.iter_child_nodes(node) for token in _visit(child)), "/" + name]


def recursive_tokens(code: str) -> list[str]:
    """The reference's walk: type name, children by ast.iter_child_nodes, closing marker (recursive, so
    RecursionError past ~1000 levels, as there)."""
    return _visit(ast.parse(code))


def stdlib_sources() -> list[str]:
    import collections
    import fractions
    import heapq
    import statistics
    import textwrap

    return [inspect.getsource(m) for m in (collections, fractions, heapq, statistics, textwrap)]


@pytest.mark.parametrize("index", range(5))
def test_node_sequence_is_the_references_walk(index: int) -> None:
    source = stdlib_sources()[index]
    expected = recursive_tokens(source)
    assert ast_tokens(ast.parse(source), 10**7) == expected
    assert {"Load", "/Load", "Store", "/Store"} <= set(expected)
    assert ast_tokens(ast.parse(source), 1000) == expected[:1000]


def test_the_references_own_cases() -> None:
    """Renamed identifiers and changed literals are the same structure; a loop is partly similar."""
    ref = ast_tokens(ast.parse(REFERENCE), 10**6)
    for variant in (
        "class Solution:\n    def solve(self, x):\n        return x + 1\n",
        "class Solution:\n    def solve(self, value):\n        return value + 999\n",
    ):
        assert similarity(ast_tokens(ast.parse(variant), 10**6), ref) == (1.0, False)
    loop = "class Solution:\n    def solve(self, v):\n        t = 0\n        for i in range(v):\n            t += i\n        return t\n"
    assert 0.0 < similarity(ast_tokens(ast.parse(loop), 10**6), ref)[0] < 1.0


symbols = st.lists(st.sampled_from(["Name", "Load", "/Load", "/Name", "Expr", "/Expr", "Call"]), max_size=120)


@settings(max_examples=500, deadline=None)
@given(symbols, symbols)
def test_ratio_is_difflibs_to_the_bit(a: list[str], b: list[str]) -> None:
    assert similarity(a, b) == (difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), False)


def test_ratio_on_real_programs_is_difflibs() -> None:
    sources = stdlib_sources()
    for x, y in [(0, 1), (2, 3), (4, 2)]:
        a = ast_tokens(ast.parse(sources[x]), 6000)
        b = ast_tokens(ast.parse(sources[y]), 1500)
        assert similarity(a, b) == (difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), False)


def test_a_crafted_sequence_is_cut_to_fit_the_budget_deterministically() -> None:
    name_load = ["Name", "Load", "/Load", "/Name"]
    crafted = name_load * 5000  # 20,000 tokens, every one of them frequent in any reference
    reference = ["Module", "Expr", *name_load, "/Expr", "Assign", *name_load, "/Assign"] * 150
    first = similarity(crafted, reference)
    assert first[1] is True
    assert similarity(crafted, reference) == first
    # Within budget nothing is cut: the same pair with a budget large enough is exact.
    assert similarity(crafted[:400], reference, budget=10 * WORK_BUDGET) == (
        difflib.SequenceMatcher(None, crafted[:400], reference, autojunk=False).ratio(),
        False,
    )


def _long_program(functions: int) -> str:
    body = "".join(
        f"\n    def m{i}(self, nums, target):\n        seen = {{}}\n        for i, x in enumerate(nums):\n"
        f"            if target - x in seen:\n                return [seen[target - x], i]\n"
        f"            seen[x] = i\n"
        for i in range(functions)
    )
    return "class Solution:\n    def solve(self, value):\n        return value + 1\n" + body


@pytest.fixture(scope="module")
def long_programs(box: Sandbox) -> dict[int, tuple[int, dict[str, float]]]:
    del box
    out = {}
    for functions in (10, 175, 200):
        program = _long_program(functions)
        tokens = len(ast_tokens(ast.parse(program), 10**7))
        out[functions] = tokens, compute_score("x", f"```python\n{program}```", GT)
    return out


def test_up_to_20000_tokens_the_value_is_exact(
    long_programs: dict[int, tuple[int, dict[str, float]]],
) -> None:
    for functions in (10, 175):
        tokens, result = long_programs[functions]
        assert tokens <= 20_000
        exact = difflib.SequenceMatcher(
            None, recursive_tokens(_long_program(functions)), recursive_tokens(REFERENCE), autojunk=False
        ).ratio()
        assert result["ast_similarity_reward"] == exact
        assert result["ast_truncated"] == 0.0


def test_past_20000_tokens_a_flagged_prefix(long_programs: dict[int, tuple[int, dict[str, float]]]) -> None:
    tokens, result = long_programs[200]
    assert tokens > 20_000
    prefix = ast_tokens(ast.parse(_long_program(200)), 20_000)
    expected = difflib.SequenceMatcher(None, prefix, recursive_tokens(REFERENCE), autojunk=False).ratio()
    assert result["ast_similarity_reward"] == expected
    assert result["ast_truncated"] == 1.0
    assert result["accuracy_reward"] == 1.0


def test_no_reference_or_no_parse(box: Sandbox) -> None:
    del box
    broken = compute_score("x", "```python\nclass Solution\n```", GT)
    assert (broken["ast_similarity_reward"], broken["ast_reference_available"]) == (0.0, 1.0)
    for reference in ("", "class Solution"):
        result = compute_score("x", f"```python\n{REFERENCE}```", {**GT, "reference_solution": reference})
        assert (result["ast_similarity_reward"], result["ast_reference_available"]) == (0.0, 0.0)
    fenced_ref = compute_score(
        "x", f"```python\n{REFERENCE}```", {**GT, "reference_solution": f"```python\n{REFERENCE}```"}
    )
    assert fenced_ref["ast_similarity_reward"] == 1.0


def test_deep_programs_are_walked(box: Sandbox) -> None:
    """The reference's recursive walk overflows past ~1000 levels; the explicit stack does not."""
    del box
    deep = "class Solution:\n    def solve(self, value):\n        return value + 1" + " + 0" * 1500 + "\n"
    tokens = ast_tokens(ast.parse(deep), 10**6)
    assert len(tokens) > 6000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(RecursionError):
            recursive_tokens(deep)
    finally:
        sys.setrecursionlimit(limit)
    result = compute_score("x", f"```python\n{deep}```", GT)
    assert result["accuracy_reward"] == 1.0
    assert 0.0 < result["ast_similarity_reward"] < 1.0
    assert json.dumps(result)


def cost() -> None:
    """What the 20,000-token cap and the work budget cost: the judge's walk and record, the scorer's ratio
    (processor time, min of 2-3), for realistic and crafted candidates against references of several sizes.

    Run: ``python tests/tasks/code/test_ast_similarity.py``."""
    import time

    from corrgrpo_tasks.code.sandboxed._syntax import syntax_facts

    def best(f: object, repeat: int = 3) -> float:
        times = []
        for _ in range(repeat):
            start = time.process_time()
            f()  # type: ignore[operator]
            times.append(time.process_time() - start)
        return min(times)

    program = _long_program(178)
    tree = ast.parse(program)
    job = {"ast_token_cap": 20_000, "entry_top": "Solution"}
    facts = syntax_facts(tree, job)
    record = json.dumps(facts)
    print(
        f"judge: {len(facts['tokens'])} tokens, walk {1e3 * best(lambda: syntax_facts(tree, job)):.1f} ms, "
        f"record {len(record) / 1024:.0f} KiB, decode {1e3 * best(lambda: json.loads(record)):.1f} ms"
    )
    sources = "\n\n".join(stdlib_sources())
    pool = ast_tokens(ast.parse(sources), 200_000)
    name_load = ["Name", "Load", "/Load", "/Name"]
    candidates = {
        "real program": pool[-20_000:],
        "reference repeated": None,
        "Name Load /Load /Name x5000": name_load * 5000,
    }
    print(f"{'reference tokens':>16s} " + " ".join(f"{k:>28s}" for k in candidates))
    for size in (200, 500, 1000, 2000, 4000):
        reference = pool[:size]
        cells = []
        for candidate in candidates.values():
            a = candidate if candidate is not None else (reference * (20_000 // size + 1))[:20_000]
            seconds = best(lambda a=a, reference=reference: similarity(a, reference), 2)
            cells.append(f"{seconds:7.3f} s cut={similarity(a, reference)[1]!s:5s}")
        print(f"{size:16d} " + " ".join(f"{c:>28s}" for c in cells))


if __name__ == "__main__":
    cost()
