"""Shared helpers for the tool-calling tests."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _call_block(*calls: tuple[str, dict[str, object]], think: str = "plan") -> str:
    """A well-formed completion calling ``calls`` in order."""
    body = "\n".join(json.dumps({"name": n, "parameters": p}) for n, p in calls)
    return f"<think>{think}</think>\n<tool_call>\n{body}\n</tool_call>"


@pytest.fixture
def call_block():  # type: ignore[no-untyped-def]
    return _call_block
