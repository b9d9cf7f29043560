"""Run a function right after a given module finishes importing (or now, if it already has).

The plugin is loaded while ``verl/__init__`` runs, long before the trainer modules exist, and importing
them eagerly would pull the whole V1 trainer (TransferQueue, agent loop, workers) into every Ray worker
that merely imports verl. A meta-path finder defers each registration to the moment its target module
is imported, in whichever process that happens.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Hook = Callable[[ModuleType], None]


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}
        self._lock = threading.Lock()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.hooks:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader: Any = spec.loader
        real_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            with self._lock:
                hooks = self.hooks.pop(fullname, [])
            for hook in hooks:
                hook(module)

        # Patch this spec's own loader instance (a fresh one per find_spec), so module.__loader__ stays the
        # real loader and resource lookups on the package keep working.
        loader.exec_module = exec_module
        return spec


_FINDER = _AfterImportFinder()


def after_import(module_name: str, hook: Hook) -> None:
    """Call ``hook(module)`` once ``module_name`` is fully imported; at once if it already is."""
    module = sys.modules.get(module_name)
    if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False) is False:
        hook(module)
        return
    with _FINDER._lock:
        _FINDER.hooks.setdefault(module_name, []).append(hook)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
