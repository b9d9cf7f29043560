"""No import circle in ``corrgrpo_tasks``: the module graph, read from the source with ``ast`` (nothing is
imported), has no cycle, counting imports inside functions like those at the top of a module.

A package's ``__init__`` importing its submodules is an edge like any other, so a submodule that imports
its own package back (``from corrgrpo_tasks.x import y`` inside ``x/_z.py``) closes a circle.
Entry points resolved from strings (``corrgrpo_tasks.domains.resolve``) are not imports and are not
counted. A known circle is listed in ``KNOWN`` with its reason and is an error once it is gone.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "corrgrpo_tasks"
FOLDER = ROOT / "tasks" / PACKAGE

# Strongly connected sets of modules (sorted tuples) -> why they are allowed for now.
KNOWN: dict[tuple[str, ...], str] = {}


def _name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(FOLDER).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(FOLDER.rglob("*.py"))}


def _resolve(target: str, known: dict[str, Path]) -> str | None:
    """The module of ours that ``target`` (a module or a name in one) is, or ``None``."""
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None


def imports(module: str) -> set[str]:
    """Our modules ``module`` imports (``from pkg import sub`` counts ``pkg.sub`` when it is a module)."""
    known = modules()
    path = known[module]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".") if is_package else module.split(".")[:-1]
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join([*base, node.module] if node.module else base)
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            ours = _resolve(target, known)
            if ours is not None and ours != module:
                found.add(ours)
    return found


def _edges() -> dict[str, set[str]]:
    return {m: imports(m) for m in modules()}


def cycles() -> list[tuple[str, ...]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    graph = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                members.append(top)
                if top == node:
                    break
            if len(members) > 1:
                found.append(tuple(sorted(members)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_is_read() -> None:
    assert "corrgrpo_tasks.domains" in imports("corrgrpo_tasks.recipes._builders")
    assert "corrgrpo_tasks.evaluation._benchmarks" in imports("corrgrpo_tasks.pipeline._steps")


def test_no_import_circle_in_the_tasks() -> None:
    found = cycles()
    unexpected = [c for c in found if c not in KNOWN]
    assert not unexpected, "import circles: " + "; ".join(" <-> ".join(c) for c in unexpected)
    gone = [c for c in KNOWN if c not in found]
    assert not gone, f"no longer circular, remove from KNOWN: {gone}"


def test_each_benchmark_family_has_one_home() -> None:
    """The agent-security benchmarks' runners (AgentDojo, ASB, InjecAgent) live in one package,
    ``evaluation.agent_security``, which the runners' dispatch reads; the reward side they share stays in
    ``corrgrpo_tasks.agent_security`` and imports none of them."""
    home = f"{PACKAGE}.evaluation.agent_security"
    families = ("agentdojo", "asb", "injecagent")
    named = [m for m in modules() if any(f in part for part in m.split(".")[1:] for f in families)]
    assert named
    assert [m for m in named if not m.startswith(home + ".")] == []
    assert {f"{home}._agentdojo", f"{home}.asb", f"{home}.injecagent"} <= imports(
        f"{PACKAGE}.evaluation._benchmarks"
    )
    reward = [m for m in modules() if m.startswith(f"{PACKAGE}.agent_security")]
    assert not [(m, i) for m in reward for i in imports(m) if i.startswith(home)]


def test_the_spec_module_imports_no_domain_and_no_framework() -> None:
    """``corrgrpo_tasks.domains`` is the lowest layer: everything reads it, it reads nothing of ours."""
    assert imports("corrgrpo_tasks.domains") == set()
