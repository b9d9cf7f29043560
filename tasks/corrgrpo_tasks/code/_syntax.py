"""What the reward reads from a program's parse tree (standard library only): the AST node sequence for
the similarity score, and the facts ``syntax_facts`` reports.

Copied into the judge's sandbox as ``/sandbox/_syntax.py``: the judge parses the candidate there and
reports ``syntax_facts(tree, job)`` in its ``syntax`` record, so nothing of the candidate is parsed in the
scorer's process. The scorer imports it for the reference solution, so both sides use one definition.
"""

from __future__ import annotations

import _ast

TYPE_CHECKING = False
if TYPE_CHECKING:  # no typing import at the judge's start-up
    from typing import Any

__all__ = ["ast_tokens", "similarity", "syntax_facts"]


def _children(node: _ast.AST) -> list[_ast.AST]:
    """``ast.iter_child_nodes`` without ``ast`` (and its imports), expression contexts left out."""
    found = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, _ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, _ast.AST))
    return [child for child in found if not isinstance(child, _ast.expr_context)]


def ast_tokens(tree: _ast.AST, cap: int) -> list[str]:
    """Pre-order node types with closing markers, identifiers and literals left out."""
    tokens: list[str] = []
    stack: list[tuple[_ast.AST, bool]] = [(tree, False)]
    while stack and len(tokens) < cap:
        node, closing = stack.pop()
        name = type(node).__name__
        if closing:
            tokens.append("/" + name)
            continue
        tokens.append(name)
        stack.append((node, True))
        children = _children(node)
        stack.extend((child, False) for child in reversed(children))
    return tokens


def syntax_facts(tree: _ast.AST, job: dict[str, Any]) -> dict[str, Any]:
    """Plain data about the candidate's parse tree for the judge's ``syntax`` record (JSON-ready).

    ``tokens``: the node sequence, capped at ``job["ast_token_cap"]`` (0: not needed).
    """
    return {"tokens": ast_tokens(tree, int(job.get("ast_token_cap", 0)))}


def similarity(candidate: list[str] | tuple[str, ...], reference: list[str] | tuple[str, ...]) -> float:
    """``difflib.SequenceMatcher(None, candidate, reference, autojunk=False).ratio()``: 2M / T."""
    import difflib  # the judge never calls this; keep its start-up free of difflib

    return difflib.SequenceMatcher(None, candidate, reference, autojunk=False).ratio()
