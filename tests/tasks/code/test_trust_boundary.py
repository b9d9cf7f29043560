"""The trust boundary on the file list: ``corrgrpo_tasks/code/sandboxed/`` holds the code that runs inside the
code task's sandboxes, and nothing else; the host imports none of it but the uses listed in ``ALLOWED``.

Read from the source with ``ast`` (nothing is imported):

* every host module (the three packages, ``benchmarks/`` and ``tools/``) imports no module of the folder,
  except the pairs in ``ALLOWED``, each with its reason (a pair that is gone is an error too);
* every module of the folder imports only the standard library and its siblings (by bare name, as inside
  the sandbox, or relatively, as when the tests import it), so no host code of the project can end up
  running inside a sandbox, or be needed there;
* ``code/_lanes.py`` ships exactly the folder's modules (``__init__`` aside, which has no code);
* the folder's ``__init__`` is a docstring only, so importing a module of it runs nothing else.

Tests import the folder's modules to test them: they are not host code and are not scanned.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = {
    "corrgrpo_core": ROOT / "src" / "corrgrpo_core",
    "corrgrpo_adapters": ROOT / "adapters" / "corrgrpo_adapters",
    "corrgrpo_tasks": ROOT / "tasks" / "corrgrpo_tasks",
    "benchmarks": ROOT / "benchmarks",
    "tools": ROOT / "tools",
}
FOLDER = PACKAGES["corrgrpo_tasks"] / "code" / "sandboxed"
SANDBOXED = "corrgrpo_tasks.code.sandboxed"
SHIPPER = PACKAGES["corrgrpo_tasks"] / "code" / "_lanes.py"

# (host module, sandboxed module it imports) -> why.
ALLOWED: dict[tuple[str, str], str] = {
    ("corrgrpo_tasks.code._reward", f"{SANDBOXED}._syntax"): (
        "the reference's AST tokens and the similarity score are computed on the host by the very "
        "definition the judge uses for the candidate's tokens (one definition, not a copy)"
    ),
}


def _name(path: Path) -> tuple[str, bool]:
    """The dotted name of a file of one of the folders and whether it is a package's ``__init__``."""
    package, folder = next((p, f) for p, f in PACKAGES.items() if path.is_relative_to(f))
    parts = [package, *path.relative_to(folder).with_suffix("").parts]
    is_init = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_init else parts), is_init


def imported(path: Path) -> set[str]:
    """Every dotted name ``path`` imports, anywhere in the file (``from a import b`` gives ``a.b``)."""
    name, is_init = _name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            prefix = node.module or ""
            if node.level:
                base = name.split(".") if is_init else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join([*base, node.module] if node.module else base)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


def _host_files() -> list[Path]:
    files = [p for folder in PACKAGES.values() for p in folder.rglob("*.py")]
    return sorted(p for p in files if not p.is_relative_to(FOLDER))


def _inside(target: str) -> bool:
    return target == SANDBOXED or target.startswith(SANDBOXED + ".")


def _sandboxed_modules() -> set[str]:
    return {p.stem for p in FOLDER.glob("*.py")} - {"__init__"}


def test_the_host_imports_no_sandboxed_module_but_the_listed_ones() -> None:
    found: set[tuple[str, str]] = set()
    for path in _host_files():
        who = _name(path)[0]
        # ``from corrgrpo_tasks.code.sandboxed._syntax import f`` names ``..._syntax.f``: the module.
        found |= {(who, ".".join(t.split(".")[:4])) for t in imported(path) if _inside(t)}
    unexpected = sorted(found - set(ALLOWED))
    assert not unexpected, f"host modules importing code that runs in the sandbox: {unexpected}"
    gone = sorted(set(ALLOWED) - found)
    assert not gone, f"no longer imported, remove from ALLOWED: {gone}"


def test_sandboxed_modules_import_only_the_standard_library_and_each_other() -> None:
    siblings = _sandboxed_modules()
    assert {"_judge", "_server", "_wire", "_zygote", "_syntax"} <= siblings
    for path in sorted(FOLDER.glob("*.py")):
        for target in imported(path):
            top = target.split(".")[0]
            sibling = target.split(".")[3] if _inside(target) and target != SANDBOXED else None
            ok = top in sys.stdlib_module_names or top in siblings or sibling in siblings
            assert ok, f"{path.name} imports {target}: only the standard library and its siblings"


def test_the_shipping_code_ships_exactly_the_folder() -> None:
    source = SHIPPER.read_text(encoding="utf-8")
    shipped = {
        node.value[: -len(".py")]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"_\w+\.py", node.value)
    }
    assert shipped == _sandboxed_modules(), "shipped by _lanes.py vs the files of sandboxed/"
    assert '"sandboxed"' in source


def test_the_folders_init_runs_nothing() -> None:
    body = ast.parse((FOLDER / "__init__.py").read_text(encoding="utf-8")).body
    assert len(body) == 1, "sandboxed/__init__.py: a docstring and nothing else"
    assert isinstance(body[0], ast.Expr)
    assert isinstance(body[0].value, ast.Constant)


def test_the_reader_sees_relative_and_absolute_imports() -> None:
    judge = imported(FOLDER / "_judge.py")
    assert {"_wire", f"{SANDBOXED}._wire", "_ast"} <= judge
    assert f"{SANDBOXED}._syntax.similarity" in imported(PACKAGES["corrgrpo_tasks"] / "code" / "_reward.py")
