"""What the reward reads from a program's parse tree (standard library only): the AST node sequence and its
similarity score, and the facts ``syntax_facts`` reports.

Copied into the judge's sandbox as ``/sandbox/_syntax.py``: the judge parses the candidate there and
reports ``syntax_facts(tree, job)`` in its ``syntax`` record, so nothing of the candidate is parsed in the
scorer's process. The scorer imports it for the reference solution, so both sides use one definition.

The node sequence is the paper's (``reward.py``'s ``_ast_structure_tokens``): every node of the tree in
pre-order, its type name on entry and ``"/" + name`` on exit, children in ``ast.iter_child_nodes`` order,
operators and expression contexts (``Load``, ``Store``, ``Del``) included, identifiers and literal values
left out. ``similarity`` is ``difflib.SequenceMatcher(None, candidate, reference, autojunk=False).ratio()``.
"""

from __future__ import annotations

import _ast

TYPE_CHECKING = False
if TYPE_CHECKING:  # no typing import at the judge's start-up
    from typing import Any

__all__ = ["ast_tokens", "children", "entry_defined", "similarity", "syntax_facts"]

#: Work of one similarity (``difflib``'s inner-loop steps, see ``similarity``) before it is recomputed on
#: shorter prefixes: 0.2-0.5 s of a loaded core (measured in docs/tasks/code.md). Every pair of realistic
#: programs measured (20,000 tokens against a 1,000-token reference, 5,000 against 2,000) fits.
WORK_BUDGET = 5_000_000
_DEFINITIONS = (_ast.ClassDef, _ast.FunctionDef, _ast.AsyncFunctionDef)


def children(node: _ast.AST) -> list[_ast.AST]:
    """``ast.iter_child_nodes`` without importing ``ast`` (and its imports) into the judge."""
    found: list[_ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, _ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, _ast.AST))
    return found


def ast_tokens(tree: _ast.AST, cap: int) -> list[str]:
    """The first ``cap`` tokens of the tree's node sequence (pre-order type names with closing markers).

    An explicit stack, so any depth the parser accepts is fine (the reference's recursive walk raises
    ``RecursionError`` past ~1000 levels).

    >>> ast_tokens(compile("x = 1", "<s>", "exec", _ast.PyCF_ONLY_AST), 100)  # doctest: +NORMALIZE_WHITESPACE
    ['Module', 'Assign', 'Name', 'Store', '/Store', '/Name', 'Constant', '/Constant', '/Assign', '/Module']
    """
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
        stack.extend((child, False) for child in reversed(children(node)))
    return tokens


_ENDS = (_ast.Return, _ast.Raise, _ast.Continue, _ast.Break)
_DEFS = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)
_BODIES = ("body", "orelse", "finalbody")


def statement_lists(tree: _ast.AST) -> list[tuple[_ast.AST, str]]:
    """Every (node, field) whose value is a list of statements, handlers' bodies included."""
    found: list[tuple[_ast.AST, str]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        for field in _BODIES:
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], _ast.stmt):
                found.append((node, field))
        stack.extend(children(node))
    return found


def _live(statements: list[_ast.stmt]) -> list[_ast.stmt]:
    """The statements that can run: none after a ``return``/``raise``/``continue``/``break``; an ``if`` or
    ``while`` on a constant reduced to the branch that runs; no bare constants (docstrings, padding)."""
    out: list[_ast.stmt] = []
    for statement in statements:
        if isinstance(statement, _ast.Expr) and isinstance(statement.value, _ast.Constant):
            continue
        test = getattr(statement, "test", None)
        if isinstance(statement, (_ast.If, _ast.While)) and isinstance(test, _ast.Constant):
            if isinstance(statement, _ast.If):
                out.extend(statement.body if test.value else statement.orelse)
            elif not test.value:
                out.extend(statement.orelse)
            else:
                out.append(statement)
            continue
        out.append(statement)
        if isinstance(statement, _ENDS):
            break
    return out


def nodes(tree: _ast.AST) -> list[_ast.AST]:
    """Every node of the tree (an explicit stack: any depth)."""
    found: list[_ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(children(node))
    return found


def _used_names(tree: _ast.AST) -> set[str]:
    used: set[str] = set()
    for node in nodes(tree):
        if isinstance(node, _ast.Name) and not isinstance(node.ctx, _ast.Store):
            used.add(node.id)
        elif isinstance(node, _ast.Attribute):
            used.add(node.attr)
    return used


def _unused(statement: _ast.stmt, used: set[str]) -> bool:
    if isinstance(statement, _DEFS):
        return statement.name not in used and not statement.name.startswith("__")
    if isinstance(statement, (_ast.Assign, _ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, _ast.Assign) else [statement.target]
        return all(isinstance(t, _ast.Name) and t.id not in used for t in targets)
    return False


def prune(tree: _ast.AST, keep: set[str]) -> _ast.AST:
    """``tree`` (changed in place) without the code that cannot run or is never used: statements after a
    ``return``, ``raise``, ``continue`` or ``break``; the branch of an ``if``/``while`` on a constant that
    never runs; bare constant statements; definitions and assignments of names nothing reads (``keep``:
    the entry point's names, which the tests read), to a fixed point. For the hardened profile's AST
    similarity (issue 35): padding a program with dead code moves nothing."""
    for _ in range(8):
        changed = False
        for node, field in statement_lists(tree):
            statements = getattr(node, field)
            live = _live(statements)
            if len(live) != len(statements) or any(
                a is not b for a, b in zip(live, statements, strict=False)
            ):
                setattr(node, field, live or [_ast.Pass()])
                changed = True
        used = _used_names(tree) | keep
        for node, field in statement_lists(tree):
            statements = getattr(node, field)
            live = [statement for statement in statements if not _unused(statement, used)]
            if len(live) != len(statements):
                setattr(node, field, live or [_ast.Pass()])
                changed = True
        if not changed:
            break
    return tree


def entry_defined(tree: _ast.AST, name: str) -> bool:
    """Whether ``name`` is bound by a ``class`` or ``def`` statement at the module's top level.

    Not a definition: a line in a string literal or a comment, one under ``if``/``try``/``with``, one nested
    in a function or class, an assignment.
    """
    body = getattr(tree, "body", None)
    return isinstance(body, list) and any(
        isinstance(node, _DEFINITIONS) and node.name == name for node in body
    )


def syntax_facts(tree: _ast.AST, job: dict[str, Any]) -> dict[str, Any]:
    """Plain data about the candidate's parse tree for the judge's ``syntax`` record (JSON-ready).

    ``tokens``: the node sequence, its first ``job["ast_token_cap"]`` tokens (0: not needed);
    ``tokens_truncated``: the sequence was longer; ``entry_defined``: ``job["entry_top"]`` is a top-level
    ``class``/``def`` (``entry_defined``).
    """
    cap = max(0, int(job.get("ast_token_cap") or 0))
    tokens = ast_tokens(tree, cap + 1) if cap else []
    entry = job.get("entry_top")
    facts: dict[str, Any] = {
        "tokens": tokens[:cap],
        "tokens_truncated": len(tokens) > cap,
        "entry_defined": isinstance(entry, str) and bool(entry) and entry_defined(tree, entry),
    }
    keep = job.get("ast_prune")
    if cap and isinstance(keep, list):  # the hardened profile: the tokens of the live code too
        pruned = ast_tokens(prune(tree, {str(name) for name in keep}), cap + 1)
        facts["tokens_pruned"] = pruned[:cap]
    return facts


def similarity(
    candidate: list[str] | tuple[str, ...],
    reference: list[str] | tuple[str, ...],
    *,
    budget: int = WORK_BUDGET,
) -> tuple[float, bool]:
    """``(ratio, truncated)``: ``SequenceMatcher(None, candidate, reference, autojunk=False).ratio()``.

    The ratio is 2M / T (M: elements in the matching blocks, T: both lengths). The matching blocks are
    ``get_matching_blocks``'s: the same queue of ranges, each searched by the stdlib's own
    ``find_longest_match``, so the value is the stdlib's to the bit. Its cost is the number of steps of
    that search's inner loop (row ``i`` visits every position of ``b`` holding ``a[i]`` below the range's
    end), counted exactly before each search: a crafted sequence can make it cubic (20,000 ``Name Load
    /Load /Name`` tokens against a 2,000-token reference: seconds). Past ``budget`` steps the comparison
    starts again with the longer sequence halved, until it fits; ``truncated`` says so.
    Nothing here depends on time: the same pair always gets the same value.

    >>> similarity(["Module", "Pass", "/Pass", "/Module"], ["Module", "Expr", "/Expr", "/Module"])
    (0.5, False)
    """
    a, b = list(candidate), list(reference)
    attempt = 0
    while True:
        # Each retry gets half the steps of the one before (at least an eighth of the budget): a crafted
        # pair costs at most about 3x the budget in all.
        ratio = _bounded_ratio(a, b, max(budget >> attempt, budget >> 3))
        if ratio is not None:
            return ratio, attempt > 0
        attempt += 1
        if len(a) >= len(b):
            a = a[: len(a) // 2]
        else:
            b = b[: len(b) // 2]


def _bounded_ratio(a: list[str], b: list[str], budget: int) -> float | None:
    """The ratio, or None once ``budget`` inner-loop steps would be exceeded."""
    import bisect
    import difflib  # the judge never calls this; keep its start-up free of difflib

    total = len(a) + len(b)
    if not total:
        return 1.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    b_at: dict[str, list[int]] = {}
    for j, token in enumerate(b):
        b_at.setdefault(token, []).append(j)
    a_at: dict[str, list[int]] = {}
    for i, token in enumerate(a):
        if token in b_at:
            a_at.setdefault(token, []).append(i)
    shared = list(a_at)
    matched = 0
    queue = [(0, len(a), 0, len(b))]
    left = budget
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        # Steps of find_longest_match on this range: a row per i, and for each i every j of a[i] below bhi.
        steps = ahi - alo
        if steps <= len(shared):  # count row by row
            for token in a[alo:ahi]:
                positions = b_at.get(token)
                if positions:
                    steps += bisect.bisect_left(positions, bhi)
        else:  # count token by token: rows holding it times its positions below bhi
            for token in shared:
                rows = bisect.bisect_left(a_at[token], ahi) - bisect.bisect_left(a_at[token], alo)
                if rows:
                    steps += rows * bisect.bisect_left(b_at[token], bhi)
        left -= steps + min(ahi - alo, len(shared))
        if left < 0:
            return None
        i, j, k = matcher.find_longest_match(alo, ahi, blo, bhi)
        if k:
            matched += k
            if alo < i and blo < j:
                queue.append((alo, i, blo, j))
            if i + k < ahi and j + k < bhi:
                queue.append((i + k, ahi, j + k, bhi))
    return 2.0 * matched / total
