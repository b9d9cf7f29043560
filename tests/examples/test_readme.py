"""The README's snippet runs when pasted, and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_snippet_prints_what_its_comments_say() -> None:
    snippet = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert snippet is not None
    code = snippet.group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - our own README
    printed = out.getvalue().splitlines()
    promised = [
        line.split("#", 1)[1].split(":", 1)[-1].strip()
        for line in code.splitlines()
        if "print(" in line and "#" in line
    ]
    for got, want in zip(printed, promised, strict=False):
        assert got == want
    assert len(printed) == code.count("print(")
