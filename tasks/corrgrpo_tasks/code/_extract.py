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

# A fence is a run of three or more backticks; fences pair up left to right (opening, closing, opening,
# ...), as the reference's non-greedy pattern pairs them, wherever they stand in a line.
_FENCE = re.compile(r"`{3,}")
# The opening fence's info string: an optional language word (after optional horizontal space).
_INFO = re.compile(r"[ \t]*([A-Za-z0-9_+#.\-]*)")
_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "ipython", "ipython3", "sage"})
# Words that name another language even when text follows them on the fence line (```` ```java class
# Solution { ````); any other single word alone on the fence line names a language too.
_OTHER_TAGS = frozenset(
    {
        *("bash", "c", "c++", "cpp", "cs", "csharp", "console", "go", "java", "javascript", "js", "json"),
        *("kotlin", "markdown", "md", "none", "output", "php", "plaintext", "rb", "ruby", "rust", "scala"),
        *("sh", "shell", "sql", "swift", "text", "ts", "txt", "typescript", "xml", "yaml"),
    }
)
# A real completion has a handful of code blocks; beyond this many the rest are not looked at.
_MAX_BLOCKS = 256


def extract_code(text: str, *, entry_name: str | None = "Solution") -> tuple[str, bool]:
    """The program in a completion: ``(code, fenced)``.

    Fenced blocks: runs of three or more backticks pair up left to right. A block is Python when its
    opening line carries ``python``/``py``/``python3`` (any case, spaces allowed before it) or no word at
    all; code on the opening line after the tag (```` ```python class Solution: ````) or in place of it
    (```` ```class Solution: ````) belongs to the block. A block in another language (```` ```text ````,
    ```` ```json ````, ```` ```cpp ````) is never the program. Among the Python blocks the one that
    mentions ``class``/``def`` ``entry_name`` wins, then the longest (the first of equals): the
    reference's choice. Without a Python block: the text after the last ``</think>``, from the first line
    outside other-language blocks that defines ``entry_name`` (else its first mention, as in ``Answer:
    class Solution:``) to the next fence. Either way the code is dedented (the leading whitespace all its
    lines share) and stripped. Linear in the text's length (a megabyte of fences or blank lines costs
    milliseconds).

    >>> extract_code("Example:\\n```text\\n[1, 2]\\n```\\n```python\\nclass Solution:\\n    pass\\n```")
    ('class Solution:\\n    pass', True)
    >>> extract_code("Here it is:\\n    class Solution:\\n        pass\\n")
    ('class Solution:\\n    pass', False)
    """
    blocks = _python_blocks(text)
    if blocks:
        defining = [b for b in blocks if _defines(b, entry_name)] or blocks
        return _clean(max(defining, key=len)), True  # max keeps the first of equally long blocks
    tail = text.rsplit("</think>", 1)[-1]
    if entry_name:
        spans = _outside_blocks(tail)
        for find in (_definition, _mention):  # a line that defines it, else its first mention
            for begin, end in spans:
                start = find(tail[begin:end], entry_name)
                if start >= 0:
                    return _clean(tail[begin + start : end]), False
    return _clean(tail), False


def _outside_blocks(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` outside its closed fenced blocks (and apart from an unclosed fence's line
    opening), left to right."""
    fences = [m.span() for m in itertools.islice(_FENCE.finditer(text), 2 * _MAX_BLOCKS + 1)]
    spans, begin = [], 0
    for index, (opening, closing) in enumerate(fences):
        if index % 2 == 0:
            spans.append((begin, opening))
            if index == len(fences) - 1:  # unclosed: its body runs to the end
                newline = text.find("\n", closing)
                begin = len(text) if newline < 0 else newline + 1
        else:
            begin = closing
    spans.append((begin, len(text)))
    return spans


def _python_blocks(text: str) -> list[str]:
    """Bodies of the closed Python (or untagged) blocks, left to right, among the first ``_MAX_BLOCKS``.

    One pass: every character is looked at a bounded number of times (the fence scan, then at most once
    more inside its own block's opening line and body).
    """
    fences = [m.span() for m in itertools.islice(_FENCE.finditer(text), 2 * _MAX_BLOCKS)]
    found = []
    for (_, opened), (closing, _) in zip(fences[::2], fences[1::2], strict=False):
        newline = text.find("\n", opened, closing)
        line_end = closing if newline < 0 else newline
        info = _INFO.match(text, opened, line_end)
        word = info.group(1) if info else ""
        rest = text[info.end() if info else opened : line_end]
        tag = word.lower()
        if tag in _PYTHON_TAGS or not word:
            first = rest
        elif not rest.strip() or tag in _OTHER_TAGS:
            continue  # another language
        else:
            first = text[opened:line_end]  # code in place of a tag: ```class Solution:
        body = text[line_end + 1 : closing] if newline >= 0 else ""
        if first.strip():
            body = first.lstrip(" \t") + ("\n" + body if newline >= 0 else "")
        found.append(body)
    return found


_UNINDENTED = re.compile(r"^\S", re.MULTILINE)
# The indentation of a line whose first character after spaces and tabs is visible; of one where it is
# other white space (``\r``, ``\f``, ...: counted when something visible follows on the line). Each
# pattern tries a line start once and fails after one character (no lookahead to the line's end, which
# made one long blank line quadratic).
_INDENT = re.compile(r"^([ \t]*)\S", re.MULTILINE)
_ODD_INDENT = re.compile(r"^([ \t]*)(?=[^\S \t\n])", re.MULTILINE)


def _clean(code: str) -> str:
    """The code without the leading whitespace all its lines share, stripped (blank lines do not count)."""
    if _UNINDENTED.search(code):  # a line starts at column 0: nothing to dedent
        return code.strip()
    indents = _INDENT.findall(code)
    for odd in _ODD_INDENT.finditer(code):
        end = code.find("\n", odd.end())
        if not code[odd.end() : end if end >= 0 else len(code)].isspace():
            indents.append(odd.group(1))
    # The common prefix of all of them is that of the least and the greatest.
    low, high = (min(indents), max(indents)) if indents else ("", "")
    margin = low[: next((i for i, (x, y) in enumerate(zip(low, high, strict=False)) if x != y), len(low))]
    if not margin:
        return code.strip()
    # Each line loses the margin (every line with something on it starts with it); a blank line that
    # does not loses its leading spaces and tabs.
    return re.sub(rf"^(?:{re.escape(margin)}|[ \t]+)", "", code, flags=re.MULTILINE).strip()


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


def _mention(code: str, name: str) -> int:
    """Offset of the first ``class name`` (else ``def name``) anywhere, as plain text: the reference's
    ``text.find("class Solution")`` for any entry name. -1 when there is none."""
    found = code.find(f"class {name}")
    return found if found >= 0 else code.find(f"def {name}")


def _defines(code: str, name: str | None) -> bool:
    """Whether ``code`` mentions ``class name`` / ``def name`` anywhere (the reference's ``"class Solution"
    in code``, for any entry name): how a block is chosen, and the format rule of a program that does not
    parse."""
    return bool(name) and _mention(code, str(name)) >= 0


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
