"""What the reward reads from a completion and a verifier: the program a reader would run, and the tests.

Every function here is linear in its input (no backtracking pattern), never runs the program, and never
raises on model output.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["entry_name", "extract_code", "parse_verifier"]

# The optional language and its trailing space are one group, so a long run of spaces is matched once
# (``[^\S\n]*(?:python3?|py)?[^\S\n]*`` splits it two ways at every length: quadratic).
_FENCE = re.compile(r"```[^\S\n]*(?:(?:python3?|py)[^\S\n]*)?\n(.*?)```", re.IGNORECASE | re.DOTALL)
# A real completion has a handful of code blocks; beyond this many the rest are not looked at.
_MAX_BLOCKS = 256


def extract_code(text: str, *, entry_name: str | None = "Solution") -> tuple[str, bool]:
    """The program in a completion: ``(code, fenced)``.

    Among fenced blocks (```` ``` ````, ```` ```python ````, ```` ```py ````) the one that defines
    ``entry_name`` wins, then the longest. Without fences: the text after the last ``</think>``, from
    the first definition of ``entry_name`` when there is one. Linear in the text's length (no
    backtracking pattern: a megabyte of unclosed fences or blank lines costs milliseconds).
    """
    blocks = _fenced_blocks(text)
    if blocks:
        by_length = sorted(blocks, key=len, reverse=True)  # stable: the first of equally long blocks wins
        return next((b for b in by_length if _defines(b, entry_name)), by_length[0]), True
    tail = text.rsplit("</think>", 1)[-1]
    if entry_name:
        start = _definition(tail, entry_name)
        if start >= 0:
            tail = tail[start:].lstrip("\n")
    return tail.strip("\n"), False


def _fenced_blocks(text: str) -> list[str]:
    """Bodies of the closed Python fences, left to right, at most ``_MAX_BLOCKS``.

    One pass of a pattern without nested quantifiers: a fence that finds no closing backticks has no
    fence after it either (every fence opening contains backticks), so no body is scanned twice.
    """
    return [match.group(1) for match in itertools.islice(_FENCE.finditer(text), _MAX_BLOCKS)]


@functools.lru_cache(maxsize=256)
def _definition_pattern(name: str) -> re.Pattern[str]:
    # Horizontal space only (``\s`` would run across lines and make the search quadratic on blank lines).
    return re.compile(rf"^[ \t\f\v\r]*(?:class|def)[ \t]+{re.escape(name)}(?!\w)", re.MULTILINE)


def _definition(code: str, name: str) -> int:
    """Offset of the first line that defines ``name`` (``class name`` / ``def name``, indented or not),
    else -1."""
    if name not in code:
        return -1
    match = _definition_pattern(name).search(code)
    return -1 if match is None else match.start()


def _defines(code: str, name: str | None) -> bool:
    return bool(name) and str(name) in code and _definition(code, str(name)) >= 0


def entry_name(verifier: Mapping[str, Any]) -> str | None:
    """Top-level name the candidate must define: ``Solution`` for ``Solution().twoSum``."""
    entry = verifier.get("entry_point")
    if not entry:
        return None
    return re.split(r"[.(]", str(entry).strip(), maxsplit=1)[0] or None


def parse_verifier(ground_truth: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    """Validate a ground-truth verifier (JSON text, bytes or mapping); returns a new dict."""
    if isinstance(ground_truth, (bytes, bytearray)):
        ground_truth = ground_truth.decode()
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as exc:
            raise ValueError(f"ground_truth is not valid JSON: {exc}") from None
    if not isinstance(ground_truth, Mapping):
        raise TypeError(f"ground_truth must be a JSON object or mapping, got {type(ground_truth).__name__}")
    verifier = dict(ground_truth)
    kind = verifier.setdefault("kind", "check")
    if kind == "check":
        missing = [
            k for k in ("test", "entry_point") if not isinstance(verifier.get(k), str) or not verifier[k]
        ]
        if missing:
            raise ValueError(f"ground_truth of kind 'check' needs non-empty string fields {missing}")
    elif kind == "stdio":
        tests = verifier.get("tests")
        if (
            not isinstance(tests, list)
            or not tests
            or not all(isinstance(t, Mapping) and "input" in t and "output" in t for t in tests)
        ):
            raise ValueError(
                "ground_truth of kind 'stdio' needs 'tests': a non-empty list of {input, output}"
            )
    else:
        raise ValueError(f"ground_truth 'kind' must be 'check' or 'stdio', got {kind!r}")
    return verifier
