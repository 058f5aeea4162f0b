"""Patches of torch's compiler wait for the module they patch: :func:`when_imported`."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any, Callable

from .._compat_compiler import COMPILER_MODULES

__all__ = ["when_compiler_loads", "when_imported", "wrap_once"]

_WAITING: dict[str, list[Callable[[ModuleType], None]]] = {}


def when_imported(name: str, install: Callable[[ModuleType], None]) -> None:
    """Call ``install(module)`` once module ``name`` is imported: now if it is, else right after its import.

    How a fix patches part of torch's compiler only in processes that load it: the
    patch waits on ``sys.meta_path`` (a finder that answers for ``name`` alone and
    leaves once it has), so eager code, which never imports that module, pays nothing.
    """
    module = sys.modules.get(name)
    if module is not None:
        install(module)
        return
    if name not in _WAITING:
        _WAITING[name] = []
        sys.meta_path.insert(0, _AfterImport(name))
    if install not in _WAITING[name]:  # asked once per op: one patch waits once
        _WAITING[name].append(install)


def when_compiler_loads(install: Callable[[ModuleType | None], None]) -> None:
    """Call ``install`` now if any of torch's compiler is imported, else right after the first of
    its modules (``_compat_compiler.COMPILER_MODULES``) is, and after each one that follows.

    ``install`` drains a queue of its own, so a later call finds nothing left to do; pass
    the same function every time (a waiting install is registered once per module).
    """
    if any(name in sys.modules for name in COMPILER_MODULES):
        install(None)
        return
    for name in COMPILER_MODULES:
        when_imported(name, install)


def wrap_once(owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
    """Replace ``owner.name`` with ``wrap(original)``: not where it is missing, nor twice.

    How every fix patches a function of torch's: the wrapper is marked, so however
    many ops install the fix, torch's function is wrapped once.
    """
    original = getattr(owner, name, None)
    if original is None or getattr(original, "__tagged_ops_fix__", False):
        return
    wrapper = wrap(original)
    wrapper.__tagged_ops_fix__ = True
    setattr(owner, name, wrapper)


class _AfterImport:
    """Finds nothing itself: wraps the real loader of one module so that waiting patches run after it.

    A finder and a loader by their methods alone: ``importlib.abc`` costs 10 ms to import."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # the real finders find it; this one is done
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RunAfter(spec.loader, _WAITING.pop(fullname, []))  # type: ignore[assignment]
        return spec


class _RunAfter:
    def __init__(self, loader: Any, installs: list[Callable[[ModuleType], None]]) -> None:
        self.loader = loader
        self.installs = installs

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        for install in self.installs:
            install(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ... as the real loader
        return getattr(self.loader, name)
