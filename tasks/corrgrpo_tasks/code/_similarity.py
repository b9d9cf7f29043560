"""AST similarity: the node sequence of a program and the ratio of two sequences (standard library only).

Copied into the judge's sandbox as ``/sandbox/_similarity.py`` (the judge tokenises the candidate's parse
tree there) and imported by the scorer for the reference solution, so both sides use one definition.
"""

from __future__ import annotations

import _ast

__all__ = ["ast_tokens", "similarity"]


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


def similarity(candidate: list[str] | tuple[str, ...], reference: list[str] | tuple[str, ...]) -> float:
    """``difflib.SequenceMatcher(None, candidate, reference, autojunk=False).ratio()``: 2M / T."""
    import difflib  # the judge never calls this; keep its start-up free of difflib

    return difflib.SequenceMatcher(None, candidate, reference, autojunk=False).ratio()
