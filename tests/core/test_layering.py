"""The import layering of docs/architecture.md, read from the source with ``ast`` (nothing is imported).

An import inside a function counts like one at the top of a module, except where a rule says so.
A known exception is listed in ``KNOWN`` with its reason, and is an error once it no longer occurs,
so the list only shrinks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "corrgrpo_core": Path("src/corrgrpo_core"),
    "corrgrpo_adapters": Path("adapters/corrgrpo_adapters"),
    "corrgrpo_tasks": Path("tasks/corrgrpo_tasks"),
}

# The core's private modules, lowest layer first: each imports only from layers below its own.
CORE_LAYERS: list[set[str]] = [
    {"_lib"},  # array-API compatibility: namespaces, devices, dtypes, masked helpers
    {"_kernels", "_validation", "_oracles"},  # backend kernels; argument checks; reference loops
    {"_groups", "_registry"},  # group layouts over a kernel; the estimator registry and its facts
    {"_stats", "_batch"},  # moments of a group or the batch; batch preparation and layouts
    {"_estimators"},  # the advantage formulas
    {"_diagnostics", "_tokens"},  # advantage_stats; token broadcast
    {"_api"},  # the public functions: validation, dispatch, registration of the built-ins
    {"_group_stats"},  # advantage_stats per group over slices of a host batch of any size
]
# What the public sub-packages may take from the private core besides its public API.
SHARED = {"_lib", "_validation", "_registry", "_oracles"}
BACKENDS = {"torch", "jax", "jaxlib", "cupy", "array_api_strict", "dask", "sparse", "tensorflow"}
FRAMEWORKS = {"trl", "verl", "openrlhf"}

# (rule, importing module, imported module) -> why it is allowed for now.
KNOWN: dict[tuple[str, str, str], str] = {}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (or package)
    lazy: bool  # inside a function
    line: int

    @property
    def where(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def _module_name(package: str, path: Path) -> str:
    parts = [package, *path.with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the three packages under ``root``, by dotted name."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            found[_module_name(package, path.relative_to(root / folder))] = path
    return found


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, node.module] if node.module else base)
    else:
        prefix = node.module or ""
    # `from pkg import name` imports the module pkg.name where there is one.
    subs = [f"{prefix}.{alias.name}" for alias in node.names if f"{prefix}.{alias.name}" in known]
    return subs or [prefix]


@cache
def imports(root: Path = ROOT) -> tuple[Import, ...]:
    known = modules(root)
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        lazy_lines = {id(n) for f in functions for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, module, path.name == "__init__.py", known):
                    found.append(Import(module, target, id(node) in lazy_lines, node.lineno))
    return tuple(found)


def _private_core(name: str) -> str | None:
    """``_stats`` for ``corrgrpo_core._stats`` (or any module below it), else None."""
    parts = name.split(".")
    if parts[0] != "corrgrpo_core" or len(parts) < 2 or not parts[1].startswith("_"):
        return None
    return parts[1]


def _layer(part: str) -> int:
    for i, layer in enumerate(CORE_LAYERS):
        if part in layer:
            return i
    raise AssertionError(
        f"corrgrpo_core.{part} is in no layer: add it to CORE_LAYERS here and to docs/architecture.md"
    )


def _top(name: str) -> str:
    return name.split(".")[0]


def violations(root: Path = ROOT) -> dict[tuple[str, str, str], str]:
    """(rule, module, target) -> the offending import, for every rule."""
    found: dict[tuple[str, str, str], str] = {}

    def add(rule: str, imp: Import, target: str | None = None) -> None:
        found.setdefault((rule, imp.module, target or imp.target), imp.where)

    for imp in imports(root):
        src, dst = _private_core(imp.module), _private_core(imp.target)
        in_core = _top(imp.module) == "corrgrpo_core"
        # The private core: lower layers only, and nothing above it.
        if src is not None:
            if dst is not None and dst != src and _layer(dst) >= _layer(src):
                add("layers", imp, f"corrgrpo_core.{dst}")
            if _top(imp.target) in {"corrgrpo_adapters", "corrgrpo_tasks"} or (
                _top(imp.target) == "corrgrpo_core" and dst is None
            ):
                add("layers", imp)
        # Backends are imported by their kernels only (and _lib, which names their namespaces).
        if in_core and _top(imp.target) in BACKENDS and src not in {"_kernels", "_lib"}:
            add("backends", imp, _top(imp.target))
        # numpy is a hard dependency: imported once at the top, never inside a function.
        if in_core and _top(imp.target) == "numpy" and imp.lazy and src not in {"_kernels"}:
            add("numpy", imp, "numpy")
        # The public sub-packages (objectives, testing, cli) build on the public API and the shared
        # infrastructure, not on the maths modules.
        if (
            in_core
            and src is None
            and dst is not None
            and dst not in SHARED
            and imp.module != "corrgrpo_core"
        ):
            add("subpackages", imp, f"corrgrpo_core.{dst}")
        # The core needs neither an adapter nor a task, lazily or not: the tasks' commands reach the CLI
        # through the ``corrgrpo.commands`` entry points (corrgrpo_core.cli.plugin).
        if in_core and _top(imp.target) in {"corrgrpo_adapters", "corrgrpo_tasks"}:
            add("core", imp)
        if in_core and _top(imp.target) in FRAMEWORKS:
            add("core", imp, _top(imp.target))
        # Adapters and tasks use the core's public modules only; adapters do not use tasks or each other.
        if not in_core and dst is not None:
            add("public", imp)
        if _top(imp.module) == "corrgrpo_adapters":
            family, target_family = imp.module.split(".")[1:2], imp.target.split(".")[1:2]
            if _top(imp.target) == "corrgrpo_tasks" or (
                _top(imp.target) == "corrgrpo_adapters" and target_family and family != target_family
            ):
                add("public", imp)
    return found


RULES = ("layers", "backends", "numpy", "subpackages", "core", "public")


@pytest.mark.parametrize("rule", RULES)
def test_imports_follow_the_layering(rule: str) -> None:
    bad = [
        where
        for (r, module, target), where in violations().items()
        if r == rule and (r, module, target) not in KNOWN
    ]
    assert not bad, "imports that break the layering (docs/architecture.md):\n" + "\n".join(sorted(bad))


def test_known_exceptions_still_occur() -> None:
    stale = sorted(set(KNOWN) - set(violations()))
    assert not stale, f"fixed, so remove from KNOWN in {Path(__file__).name}: {stale}"


# Code that shows users how the library is used, or measures what they get, uses what they can use.
SCRIPTS = (Path("benchmarks"), Path("examples"))
# Private imports a script needs, with the reason; an error once it no longer occurs (the list only shrinks).
SCRIPT_KNOWN: dict[tuple[str, str], str] = {
    ("benchmarks/explain_file.py", "corrgrpo_core._group_stats"): (
        "--stages times the command's parts inside group_stats (where the time goes); the timed "
        "figures run the public command"
    ),
}


def _private_in_package(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The private modules or names of the three packages that ``node`` imports (absolute imports only)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level or node.module is None:
        return []  # a script's own package (benchmarks._loop) is its own business
    else:
        names = [f"{node.module}.{alias.name}" for alias in node.names]
    return [
        name
        for name in names
        if _top(name) in PACKAGES and any(part.startswith("_") for part in name.split(".")[1:])
    ]


def test_benchmarks_and_examples_use_public_modules_only() -> None:
    """A benchmark times what users call, by the name they call it; a private import would keep working
    after the public name changes what it does (or goes), and the figure would no longer be the user's."""
    bad, seen = [], set()
    for folder in SCRIPTS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for name in _private_in_package(node):
                        key = (path.relative_to(ROOT).as_posix(), name)
                        if key in SCRIPT_KNOWN:
                            seen.add(key)
                        else:
                            bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not bad, "private imports in benchmarks or examples (use the public name):\n" + "\n".join(bad)
    assert seen == set(SCRIPT_KNOWN), f"fixed, so remove from SCRIPT_KNOWN: {set(SCRIPT_KNOWN) - seen}"


def test_every_package_and_private_module_is_seen() -> None:
    found = modules()
    for package in PACKAGES:
        assert package in found
    for module in found:
        part = _private_core(module)
        if part is not None:
            _layer(part)  # raises for a private module that no layer names
    assert any(i.target == "corrgrpo_core._api" for i in imports())  # relative imports are resolved
