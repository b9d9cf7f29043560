"""The code reward against its reference (``code_rl/leetcodedataset_train_rl/reward.py``), read as rules.

``Reference`` below is this project's own reading of the reference reward, written from its documented
behaviour (docs/tasks/code.md, *Differences from the reference reward*): its fence pattern, its block
choice, its substring format rule, its recursive node walk, its one-source compile, its exec of that
source. Nothing of the reference is imported. The tests check, on generated completions, that the reward's
static components (format, syntax, AST similarity) equal the reading wherever no documented deviation
applies, and pin each deviation with both values (test_fidelity_rows.py).

Run as a script to measure the agreement of all seven components end to end (real sandbox, real
subprocesses for the reading), over generated completions of the LeetCodeDataset fixtures::

    python tests/tasks/code/test_fidelity_reference.py [--samples 600] [--seed 0]
    python tests/tasks/code/test_fidelity_reference.py --fuzz 20000   # static components, fuzzed text
    python tests/tasks/code/test_fidelity_reference.py --cheats      # what non-solutions earn
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from corrgrpo_tasks.code._extract import entry_name, extract_code
from corrgrpo_tasks.code._reward import _format
from corrgrpo_tasks.code.sandboxed import _syntax

FIXTURES = Path(__file__).resolve().parents[3] / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"


def leetcode_rows() -> list[dict[str, Any]]:
    rows = []
    for split in ("train", "test"):
        for line in (FIXTURES / f"leetcode_{split}.jsonl").read_text().splitlines():
            row = json.loads(line)
            rows.append(
                {
                    "prompt": row["prompt"],
                    "test": row["test"],
                    "entry_point": row["entry_point"],
                    "reference_solution": row["completion"],
                }
            )
    return rows


class Reference:
    """The reference reward's rules (its documented behaviour, in this project's own code)."""

    # ```, then optionally python or py (any case), spaces, one optional newline; the body runs lazily to
    # the next three backticks.
    FENCE = re.compile(r"```(?:python|py)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)

    @classmethod
    def extract(cls, completion: str) -> tuple[str, bool]:
        text = completion.strip()
        blocks = cls.FENCE.findall(text)
        if blocks:
            return max(blocks, key=lambda b: ("class Solution" in b, len(b))).strip(), True
        if "</think>" in text:
            text = text.rsplit("</think>", 1)[-1].strip()
        start = text.find("class Solution")
        return (text[start:] if start >= 0 else text), False

    @staticmethod
    def parses(code: str) -> bool:
        try:
            ast.parse(code)
        except (SyntaxError, ValueError, TypeError, MemoryError):
            return False
        return True

    @classmethod
    def tokens(cls, code: str) -> list[str] | None:
        """The recursive walk: RecursionError escapes (past ~1000 levels), as in the reference."""
        if not code or not cls.parses(code):
            return None

        def visit(node: ast.AST) -> list[str]:
            name = type(node).__name__
            return [
                name,
                *(token for child in ast.iter_child_nodes(node) for token in visit(child)),
                "/" + name,
            ]

        return visit(ast.parse(code))

    @classmethod
    def similarity(cls, code: str, reference: str) -> tuple[float, float]:
        text = reference.strip()
        ref_code = cls.extract(text)[0] if cls.FENCE.search(text) else text
        ref = cls.tokens(ref_code) if ref_code else None
        if not ref:
            return 0.0, 0.0
        mine = cls.tokens(code) if code else None
        if not mine:
            return 0.0, 1.0
        return difflib.SequenceMatcher(None, mine, ref, autojunk=False).ratio(), 1.0

    @staticmethod
    def source(code: str, verifier: dict[str, Any]) -> str:
        parts = (verifier["prompt"].rstrip(), code.rstrip(), verifier["test"].rstrip())
        return "\n\n".join((*parts, f"check({verifier['entry_point']})")) + "\n"

    RUNNER = (
        "import sys, io, contextlib\n"
        "src = sys.stdin.read()\n"
        "try:\n"
        "    code = compile(src, '<candidate>', 'exec')\n"
        "except BaseException:\n"
        "    print('compile_error'); raise SystemExit\n"
        "try:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        exec(code, {'__name__': '__candidate__'})\n"
        "    print('passed')\n"
        "except AssertionError:\n"
        "    print('assertion_failed')\n"
        "except MemoryError:\n"
        "    print('memory_error')\n"
        "except BaseException:\n"
        "    print('runtime_error')\n"
    )

    @classmethod
    def run(cls, source: str, seconds: float = 5.0) -> str:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", cls.RUNNER],
                input=source,
                capture_output=True,
                text=True,
                timeout=seconds + 1.0,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return "timeout"
        lines = done.stdout.strip().splitlines()
        return lines[-1] if done.returncode == 0 and lines else "worker_error"

    @classmethod
    def static(cls, completion: str, verifier: dict[str, Any]) -> dict[str, float]:
        """format, syntax, compile and AST similarity (nothing executed)."""
        code, fenced = cls.extract(completion)
        out = {"format_reward": float(fenced and "class Solution" in code)}
        out["syntax_reward"] = float(bool(code) and cls.parses(code))
        out["compile_reward"] = 0.0
        out["ast_similarity_reward"] = out["ast_reference_available"] = 0.0
        try:
            sim, available = cls.similarity(code, str(verifier.get("reference_solution", "")))
            out["ast_similarity_reward"], out["ast_reference_available"] = sim, available
            if out["syntax_reward"]:
                compile(cls.source(code, verifier), "<candidate_with_tests>", "exec")
                out["compile_reward"] = 1.0
        except Exception:  # noqa: BLE001 - the reference's own catch-all: any failure is a compile failure
            out["compile_reward"] = 0.0
        out["_code"] = code  # type: ignore[assignment]
        return out

    @classmethod
    def score(cls, completion: str, verifier: dict[str, Any]) -> dict[str, float]:
        out = cls.static(completion, verifier)
        code = out.pop("_code")
        status = cls.run(cls.source(str(code), verifier)) if out["compile_reward"] else "compile_error"
        out["runtime_reward"] = float(status in ("passed", "assertion_failed"))
        out["accuracy_reward"] = float(status == "passed")
        return out


def ours_static(completion: str, verifier: dict[str, Any], cap: int = 20_000) -> dict[str, float]:
    """The reward's format, syntax and AST similarity computed in process the way the judge and the scorer
    compute them (the judge's parse, ``syntax_facts``, the scorer's ``_format`` and ``similarity``)."""
    name = entry_name(verifier)
    code, fenced = extract_code(completion, entry_name=name)
    syntax: dict[str, Any] = {"ok": False}
    if code.strip():
        try:
            tree = compile(code, "<unknown>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
        else:
            syntax = {"ok": True, **_syntax.syntax_facts(tree, {"ast_token_cap": cap, "entry_top": name})}
    out = {"format_reward": _format(fenced, code, name, syntax), "syntax_reward": float(syntax["ok"])}
    ref_tokens = _syntax.ast_tokens(ast.parse(verifier["reference_solution"]), cap)
    out["ast_similarity_reward"] = (
        _syntax.similarity(syntax["tokens"], ref_tokens)[0] if syntax["ok"] else 0.0
    )
    return out


# Generated completions: a program (honest, wrong, broken) in a wrapper (fences, prose, other languages).
ROWS = leetcode_rows()
BODIES = {
    "correct": lambda ref: ref,
    "renamed": lambda ref: re.sub(r"\b(nums|seen|total|best|prev|head)\b", lambda m: m.group(1) + "_", ref),
    "wrong": lambda ref: ref.split("\n")[0] + "\n" + ref.split("\n")[1] + "\n        return None\n",
    "crash": lambda ref: ref.split("\n")[0] + "\n" + ref.split("\n")[1] + "\n        return 1 // 0\n",
    "no_colon": lambda ref: ref.replace("class Solution:", "class Solution", 1),
    "helper": lambda ref: "import math\n\n\ndef helper(x):\n    return math.floor(x)\n\n\n" + ref,
    "typed_import": lambda ref: "from typing import List, Optional\n" + ref,
    "no_class": lambda ref: "def solve(x):\n    return x\n",
    "main_guard": lambda ref: ref + '\n\nif __name__ == "__main__":\n    print(input())\n',
    "top_level_print": lambda ref: ref + "\n\nprint(Solution())\n",
    "exits": lambda ref: ref + "\n\nexit(0)\n",
    "tabs": lambda ref: ref.replace("    ", "\t"),
    "long": lambda ref: (
        ref + "".join(f"\n\ndef h{i}(a, b):\n    c = a + b\n    return c * {i}\n" for i in range(60))
    ),
}
WRAPPERS = {
    "python": lambda c: f"Here is the solution.\n```python\n{c}\n```\n",
    "py": lambda c: f"```py\n{c}\n```",
    "bare": lambda c: f"```\n{c}\n```\nThis runs in O(n).",
    "think": lambda c: f"<think>\nI should use a dictionary.\n</think>\n```python\n{c}\n```",
    "unfenced": lambda c: f"Solution:\n{c}",
    "unfenced_think": lambda c: f"<think>draft</think>\n{c}",
    "starter_first": lambda c: (
        f"Starter:\n```python\nclass Solution:\n    pass\n```\nAnswer:\n```python\n{c}\n```"
    ),
    "usage_after": lambda c: f"```python\n{c}\n```\nUsage:\n```python\nprint(Solution())\n```",
    "two_python": lambda c: f"```python\nx = 1\n```\n```python\n{c}\n```",
    "upper_tag": lambda c: f"```Python\n{c}\n```",
    "fence_line": lambda c: "```python " + c + "\n```",
    "list_item": lambda c: (
        "1. Code:\n   ```python\n" + "\n".join("   " + x if x else x for x in c.split("\n")) + "\n   ```"
    ),
    "unfenced_indented": lambda c: "Here it is:\n" + "\n".join("    " + x if x else x for x in c.split("\n")),
    "crlf": lambda c: f"```python\n{c}\n```".replace("\n", "\r\n"),
    "closing_on_code_line": lambda c: f"```python\n{c.rstrip()}```",
}


ROW_COMBOS = {  # (body, wrapper) pairs that are rows of the table: the reference keeps an indent
    **{(b, "unfenced_indented"): "after" for b in ("main_guard", "top_level_print", "exits", "long")},
    **{
        (b, "list_item"): "any"
        for b in ("main_guard", "top_level_print", "exits", "long", "helper", "typed_import")
    },
}


def test_static_components_equal_the_reference_outside_the_deviations() -> None:
    """Every program variant in every wrapper on every fixture (outside ROW_COMBOS): format, syntax and
    AST similarity equal the reference's."""
    checked = 0
    for row in ROWS:
        for body, make_body in BODIES.items():
            for wrapper, wrap in WRAPPERS.items():
                if (body, wrapper) in ROW_COMBOS:
                    continue
                completion = wrap(make_body(row["reference_solution"]))
                ref, ours = Reference.static(completion, row), ours_static(completion, row)
                for key in ("format_reward", "syntax_reward", "ast_similarity_reward"):
                    assert ours[key] == ref[key], (body, wrapper, key)
                checked += 1
    assert checked == len(ROWS) * (len(BODIES) * len(WRAPPERS) - len(ROW_COMBOS))


def _generated(samples: int, seed: int) -> list[tuple[str, dict[str, Any], str]]:
    import random

    from test_fidelity_rows import ROW_CASES  # the documented deviations, also measured

    rng = random.Random(seed)
    combos = [(r, b, w) for r in range(len(ROWS)) for b in sorted(BODIES) for w in sorted(WRAPPERS)]
    rng.shuffle(combos)
    out = [
        (
            WRAPPERS[w](BODIES[b](ROWS[r]["reference_solution"])),
            ROWS[r],
            f"{'row:' * ((b, w) in ROW_COMBOS)}{b}/{w}",
        )
        for r, b, w in combos[:samples]
    ]
    for name, make in ROW_CASES.items():
        for row in ROWS:
            out.append((make(row["reference_solution"]), row, f"row:{name}"))
    return out


def _signature(ref: str) -> str:
    return "\n".join(ref.split("\n")[:2])


# Completions that do not solve the problem, against honest ones: what the paper's definitions pay them.
CHEATS: dict[str, Any] = {
    "honest correct": lambda ref: ref,
    "honest crash (solves, then 1 // 0)": lambda ref: _crash_after(ref),
    "honest crash wrapped in try/except": lambda ref: _wrapped(_crash_after(ref)),
    "stub: return None": lambda ref: _signature(ref) + "\n        return None\n",
    "skeleton: loop, if, return": lambda ref: (
        _signature(ref)
        + "\n        res = 0\n        for i in range(10):\n            if i % 2 == 0:\n                res += i\n"
        "        return res\n"
    ),
    "stub + dead copy of a typical solution": lambda ref: (
        _signature(ref) + "\n        return None\n        seen = {}\n        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n                return [seen[target - x], i]\n"
        "            seen[x] = i\n"
    ),
}


def _crash_after(ref: str) -> str:
    """The honest solution with one bug: it divides by zero before returning."""
    lines = ref.rstrip("\n").split("\n")
    return "\n".join([*lines[:2], "        _ = 1 // 0", *lines[2:]]) + "\n"


def _wrapped(ref: str) -> str:
    """The method body under ``try: ... except Exception: return None``."""
    lines = ref.rstrip("\n").split("\n")
    body = [
        "        try:",
        *("    " + line for line in lines[2:]),
        "        except Exception:",
        "            return None",
    ]
    return "\n".join([*lines[:2], *body]) + "\n"


def cheats() -> None:
    """Mean over the LeetCodeDataset fixtures of the weighted score (GRPO's scalar), the unweighted sum
    (what the paper's CorrGRPO run optimised) and each component, under both profiles."""
    import statistics

    from corrgrpo_tasks.code import COMPONENTS, compute_score

    names = list(CHEATS)
    texts = [f"```python\n{CHEATS[n](row['reference_solution'])}```" for n in names for row in ROWS]
    truths = [row for _ in names for row in ROWS]
    head = " ".join(f"{k.split('_')[0][:6]:>6s}" for k in COMPONENTS)
    for profile in ("paper", "hardened"):
        results = [compute_score("x", t, v, profile=profile) for t, v in zip(texts, truths, strict=True)]
        print(f"\nprofile={profile}\n{'completion':40s} {'score':>6s} {'sum':>6s} {head}")
        for index, name in enumerate(names):
            mine = results[index * len(ROWS) : (index + 1) * len(ROWS)]
            unweighted = statistics.mean(sum(r[k] for k in COMPONENTS) for r in mine)
            values = [statistics.mean(r[k] for r in mine) for k in ("score", *COMPONENTS)]
            print(
                f"{name:40s} {values[0]:6.3f} {unweighted:6.3f} " + " ".join(f"{v:6.3f}" for v in values[1:])
            )


FUZZ_TOKENS = [
    *("```", "```python", "```py", "```Python3", "```java", "```text", "``` python", "`", "\n", "\n", "\n"),
    *(" ", "    ", "\t", "x = 1", "class Solution:", "class Solution", "    def twoSum(self, nums, target):"),
    *("        return [0, 1]", "        pass", "</think>", "<think>", "Here is the code:", "import heapq"),
    *("def helper():", "return", "# class Solution", "if True:", "print(1)"),
]


def _tagged(text: str) -> bool:
    """Whether a fence opens with something the reference reads as code: a word other than python/py
    (```` ```java ````, ```` ```Python3 ````), a space before the tag, or more than three backticks."""
    from corrgrpo_tasks.code._extract import _FENCE, _INFO

    for fence in _FENCE.finditer(text):
        info = _INFO.match(text, fence.end())
        word = info.group(1).lower() if info else ""
        if (word and word not in ("python", "py")) or text[fence.end() : fence.end() + 1] in (" ", "\t"):
            return True
        if len(fence.group()) > 3:
            return True
    return False


def fuzz(samples: int, seed: int) -> None:
    """Static components (format, syntax, AST similarity) on random concatenations of fence, code and
    prose fragments, against the reading; differences split by cause."""
    import collections
    import random
    import warnings

    warnings.simplefilter("ignore", SyntaxWarning)
    rng = random.Random(seed)
    keys = ("format_reward", "syntax_reward", "ast_similarity_reward")
    agree: collections.Counter[str] = collections.Counter()
    causes: collections.Counter[str] = collections.Counter()
    examples: list[str] = []
    for _ in range(samples):
        text = "".join(rng.choice(FUZZ_TOKENS) for _ in range(rng.randint(1, 16)))
        theirs, mine = Reference.static(text, ROWS[0]), ours_static(text, ROWS[0])
        differ = [k for k in keys if theirs[k] != mine[k]]
        tagged = _tagged(text)
        for key in keys:
            agree[key] += key not in differ
        agree["untagged"] += not tagged
        agree["untagged, all three equal"] += not tagged and not differ
        if not differ:
            continue
        if tagged:
            causes["a fence tag the reference reads as code (other language, python3, space, ````)"] += 1
        elif differ == ["format_reward"] and mine["syntax_reward"]:
            causes["format from the parse tree (no top-level class)"] += 1
        else:
            causes["other (dedent, cut at the next fence, ...)"] += 1
            examples.append(text)
    print(f"{samples} fuzzed completions (seed {seed}):")
    for key in keys:
        print(f"  {key:24s} {100 * agree[key] / samples:5.1f}%")
    untagged = agree["untagged"]
    print(
        f"  without such a tag ({untagged} texts): all three equal on "
        f"{100 * agree['untagged, all three equal'] / max(1, untagged):.2f}%"
    )
    for cause, n in causes.most_common():
        print(f"  differ: {n:5d}  {cause}")
    for text in examples[:5]:
        print("   ", repr(text))


def main(argv: list[str]) -> None:
    import argparse
    import collections
    import time

    from corrgrpo_tasks.code import COMPONENTS, compute_score

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cheats", action="store_true", help="what non-solutions earn instead")
    parser.add_argument("--fuzz", type=int, default=0, help="static components on N fuzzed texts")
    args = parser.parse_args(argv)
    if args.cheats:
        cheats()
        return
    if args.fuzz:
        fuzz(args.fuzz, args.seed)
        return
    cases = _generated(args.samples, args.seed)
    started = time.monotonic()
    ours = [compute_score("leetcodedataset", c, v) for c, v, _ in cases]
    refs = [Reference.score(c, v) for c, v, _ in cases]
    # A lane that fails under load (issue 25, item 7) is not the reward's definition: score those again.
    failed = [i for i, r in enumerate(ours) if r["sandbox_error"] or r["timeout"]]
    again = [compute_score("leetcodedataset", cases[i][0], cases[i][1]) for i in failed]
    for i, result in zip(failed, again, strict=True):
        ours[i] = result
    print(
        f"{len(failed)} samples met a failing lane or a timeout and were scored again; "
        f"{sum(1 for r in again if r['sandbox_error'] or r['timeout'])} did again"
    )
    compared = [k for k in COMPONENTS if k != "efficiency_reward"]
    agree = collections.Counter()
    differ: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for (_, _, label), mine, theirs in zip(cases, ours, refs, strict=True):
        for key in compared:
            if mine[key] == theirs[key]:
                agree[key] += 1
            else:
                differ[key][f"{label} {theirs[key]:.3g}->{mine[key]:.3g}"] += 1
        agree["all six"] += all(mine[k] == theirs[k] for k in compared)
    generated = sum(1 for _, _, label in cases if not label.startswith("row:"))
    clean = [i for i, (_, _, label) in enumerate(cases) if not label.startswith("row:")]
    for key in compared:
        agree[f"{key} outside rows"] = sum(ours[i][key] == refs[i][key] for i in clean)
    agree["all six outside rows"] = sum(all(ours[i][k] == refs[i][k] for k in compared) for i in clean)
    print(
        f"{len(cases)} completions ({generated} generated, the rest the deviation rows), "
        f"{time.monotonic() - started:.0f} s"
    )
    for key in [*compared, "all six"]:
        print(
            f"{key:24s} {agree[key]:4d}/{len(cases)} = {100 * agree[key] / len(cases):5.1f}%   outside rows: "
            f"{agree.get(f'{key} outside rows', 0)}/{len(clean)}"
        )
    for key, counts in differ.items():
        print(f"\n{key} differs:")
        for what, n in counts.most_common():
            print(f"  {n:3d}  {what}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1:])
