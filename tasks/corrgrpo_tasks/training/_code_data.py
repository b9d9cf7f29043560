"""Synthetic code task: write a one-line Python function body from its docstring and examples.

The prompt is the function's signature and docstring (a sentence and two doctest examples); the
target is the whole function in one fenced block, which is what the code reward's format component
asks for. The ground truth is a ``check``-kind verifier: four hidden asserts (two beyond the shown
examples), the entry point, and the reference solution (for AST similarity and efficiency).
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._examples import Example, split_examples

__all__ = ["FAMILIES", "audit_code_samples", "code_pieces", "make_code_examples"]

_NAMES = (
    "solve",
    "compute",
    "transform",
    "calc",
    "apply",
    "process",
    "convert",
    "handle",
    "evaluate",
    "make",
)
_SUFFIXES = ("it", "value", "one", "item", "data", "input", "thing", "case", "task", "step")
_WORDS = ("ab", "cat", "dog", "sun", "hello", "zip", "moon", "tree", "abc", "xy")


@dataclass(frozen=True)
class Family:
    """A family of one-line functions: the argument name, a (doc, body, implementation) sampler and an
    input sampler."""

    arg: str
    sample: Callable[[random.Random], tuple[str, str, Callable[[Any], Any]]]
    inputs: Callable[[random.Random], Any]


def _k(rng: random.Random, low: int = 2, high: int = 9) -> int:
    return rng.randint(low, high)


def _ints(rng: random.Random) -> int:
    return rng.randint(-20, 40)


def _strs(rng: random.Random) -> str:
    return rng.choice(_WORDS)


def _lists(rng: random.Random) -> list[int]:
    return [rng.randint(0, 9) for _ in range(rng.randint(1, 4))]


def _int_family(doc: str, body: str, fn: Callable[[int, int], Any]) -> Family:
    def sample(rng: random.Random) -> tuple[str, str, Callable[[Any], Any]]:
        k = _k(rng)
        return doc.format(k=k), body.format(k=k), lambda x: fn(x, k)

    return Family("x", sample, _ints)


def _fixed(
    arg: str, doc: str, body: str, fn: Callable[[Any], Any], inputs: Callable[[random.Random], Any]
) -> Family:
    return Family(arg, lambda rng: (doc, body, fn), inputs)


FAMILIES: tuple[Family, ...] = (
    _int_family("Return x plus {k}.", "x + {k}", lambda x, k: x + k),
    _int_family("Return x minus {k}.", "x - {k}", lambda x, k: x - k),
    _int_family("Return x times {k}.", "x * {k}", lambda x, k: x * k),
    _int_family("Return x divided by {k}, rounded down.", "x // {k}", lambda x, k: x // k),
    _int_family("Return the remainder of x divided by {k}.", "x % {k}", lambda x, k: x % k),
    _int_family("Return the larger of x and {k}.", "max(x, {k})", lambda x, k: max(x, k)),
    _int_family("Return the smaller of x and {k}.", "min(x, {k})", lambda x, k: min(x, k)),
    _int_family("Return whether x is greater than {k}.", "x > {k}", lambda x, k: x > k),
    _int_family("Return the distance between x and {k}.", "abs(x - {k})", lambda x, k: abs(x - k)),
    _fixed("x", "Return the square of x.", "x * x", lambda x: x * x, _ints),
    _fixed("x", "Return whether x is even.", "x % 2 == 0", lambda x: x % 2 == 0, _ints),
    _fixed("s", "Return s in upper case.", "s.upper()", lambda s: s.upper(), _strs),
    _fixed("s", "Return s reversed.", "s[::-1]", lambda s: s[::-1], _strs),
    _fixed("s", "Return the length of s.", "len(s)", len, _strs),
    _fixed("s", "Return the first character of s.", "s[0]", lambda s: s[0], _strs),
    _fixed("xs", "Return the sum of xs.", "sum(xs)", sum, _lists),
    _fixed("xs", "Return the largest item of xs.", "max(xs)", max, _lists),
    _fixed("xs", "Return the last item of xs.", "xs[-1]", lambda xs: xs[-1], _lists),
    _fixed("xs", "Return xs sorted.", "sorted(xs)", sorted, _lists),
    _fixed("xs", "Return the number of items in xs.", "len(xs)", len, _lists),
)


def _one(rng: random.Random) -> Example:
    index = rng.randrange(len(FAMILIES))
    family = FAMILIES[index]
    doc, body, fn = family.sample(rng)
    name = f"{rng.choice(_NAMES)}_{rng.choice(_SUFFIXES)}"
    inputs: list[Any] = []
    while len(inputs) < 4:  # distinct inputs, so the examples are informative
        value = family.inputs(rng)
        if value not in inputs or len(inputs) > 20:
            inputs.append(value)
    shown = "".join(f"    >>> {name}({v!r})\n    {fn(v)!r}\n" for v in inputs[:2])
    header = f"def {name}({family.arg}):\n"
    prompt = f'{header}    """{doc}\n{shown}    """'
    code = f"{header}    return {body}\n"
    test = "def check(candidate):\n" + "".join(f"    assert candidate({v!r}) == {fn(v)!r}\n" for v in inputs)
    verifier = {"kind": "check", "prompt": "", "test": test, "entry_point": name, "reference_solution": code}
    return Example(
        [{"role": "user", "content": prompt}],
        json.dumps(verifier, sort_keys=True),
        f"```python\n{code}```",
        str(index),
    )


def make_code_examples(n_train: int, n_eval: int, *, seed: int = 0) -> tuple[list[Example], list[Example]]:
    """``n_train`` training and ``n_eval`` held-out examples (distinct prompt texts); an example's
    ``label`` is its family's index in :data:`FAMILIES`.

    >>> train, held = make_code_examples(3, 2)
    >>> train[0].completion.startswith("```python")
    True
    """
    return split_examples(_one, n_train, n_eval, name="code", seed=seed)


def code_pieces() -> list[str]:
    """Whole tokens for the tiny tokenizer: the fence and the function scaffolding."""
    # No piece may start with a character that can end the prompt ("\n"): SFTTrainer needs the prompt's
    # tokens to be a prefix of prompt + completion.
    pieces = ["```python\ndef ", "```", "    return ", "):\n", '    """', "    >>> "]
    pieces += sorted({f"{n}_" for n in _NAMES}) + sorted(set(_SUFFIXES))
    return pieces


_ASSERT = re.compile(r"^    assert candidate\((?P<arg>.*)\) == (?P<expected>.*)$", re.MULTILINE)
_PROBE = """
import json as _json, sys as _sys
_out = []
for _arg in {args!r}:
    try:
        _out.append(repr({entry}(_arg)))
    except BaseException as _exc:
        _out.append("error: " + type(_exc).__name__)
_sys.stdout.write("\\n" + {marker!r} + _json.dumps(_out))
"""


def _independent_pass(code: str, verifier: dict[str, Any], box: Any) -> bool:
    """Run the candidate on the test inputs in a fresh sandbox with our own probe (not the reward's
    harness) and compare its return values with the expected ones here, outside the sandbox."""
    from corrgrpo_tasks.sandbox import Limits

    cases = [
        (ast.literal_eval(m["arg"]), ast.literal_eval(m["expected"]))
        for m in _ASSERT.finditer(verifier["test"])
    ]
    marker = "@@probe@@"
    source = (
        code + "\n" + _PROBE.format(args=[a for a, _ in cases], entry=verifier["entry_point"], marker=marker)
    )
    run = box.run(source, limits=Limits(wall_seconds=5.0))
    if marker not in run.stdout:
        return False
    try:
        got = [ast.literal_eval(v) for v in json.loads(run.stdout.rsplit(marker, 1)[1])]
    except (ValueError, SyntaxError, TypeError):
        return False
    return len(got) == len(cases) and all(
        g == e and type(g) is type(e) for g, (_, e) in zip(got, cases, strict=True)
    )


def audit_code_samples(kept: list[tuple[str, str, dict[str, float]]]) -> dict[str, Any]:
    """Findings over the RL samples a run scored: execution reward without passing the tests.

    Every distinct sample the reward credited with ``accuracy_reward`` 1 is re-run by an independent
    probe; one that fails it, and any sample with efficiency reward but no accuracy, is a finding
    (``runtime_reward`` without accuracy is by design: it pays for running without an exception).
    """
    from corrgrpo_tasks.code import extract_code
    from corrgrpo_tasks.sandbox import Sandbox

    box = Sandbox()
    seen: dict[tuple[str, str], dict[str, float]] = {}
    for text, truth, scores in kept:
        seen.setdefault((text, truth), scores)
    passed = [(t, g) for (t, g), s in seen.items() if s.get("accuracy_reward") == 1.0]
    false_pass = []
    for text, truth in passed:
        verifier = json.loads(truth)
        if not _independent_pass(extract_code(text, entry_name=verifier["entry_point"])[0], verifier, box):
            false_pass.append(text)
    efficiency_only = [
        t
        for (t, _), s in seen.items()
        if s.get("efficiency_reward", 0.0) > 0 and s.get("accuracy_reward") != 1.0
    ]
    return {
        "samples": len(kept),
        "distinct": len(seen),
        "accuracy_1": len(passed),
        "runtime_without_accuracy": sum(
            1 for s in seen.values() if s.get("runtime_reward") == 1.0 and s.get("accuracy_reward") != 1.0
        ),
        "efficiency_positive": sum(1 for s in seen.values() if s.get("efficiency_reward", 0.0) > 0),
        "accuracy_without_independent_pass": len(false_pass),
        "efficiency_without_accuracy": len(efficiency_only),
        "examples": [*false_pass[:3], *efficiency_only[:3]],
    }
