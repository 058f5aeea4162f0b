"""Patches of torch's compiler wait for the module they patch: :func:`when_imported`."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any, Callable

__all__ = ["COMPILER_MODULES", "when_compiler_loads", "when_imported", "wrap_once"]

#: torch's compiler: the modules whose import may load compiled code (from Inductor's or
#: AOTAutograd's on-disk caches, or a saved export: its deserializer) that names an op without
#: tracing it, on every release (one that loads compiled code from a new module adds it here).
#: ``import torch`` imports none of them (it does import ``torch.export``, 2.4-2.15, and the
#: ``torch._inductor`` package with its config, 2.5: not what loads code).
COMPILER_MODULES = (
    "torch._dynamo",
    "torch._inductor.codecache",
    "torch._functorch.aot_autograd",
    "torch._export.serde",
)

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
    """Call ``install`` now if torch's compiler is imported, else once the first of its modules
    (:data:`COMPILER_MODULES`) is, and after each one that follows; never while one
    of them is still executing its own import.

    ``install`` drains a queue of its own, so a later call finds nothing left to do; pass
    the same function every time (a waiting install is registered once per module).
    """
    waiting = [name for name in COMPILER_MODULES if name not in sys.modules]
    if len(waiting) < len(COMPILER_MODULES) and (not waiting or not _compiler_half_imported()):
        install(None)
        return
    once_loaded = _ONCE_LOADED.setdefault(install, _OnceLoaded(install))
    for name in waiting:
        when_imported(name, once_loaded)


def _compiler_half_imported(but: str | None = None) -> bool:
    """Whether one of the compiler's modules (other than ``but``, whose import is finishing) is in
    ``sys.modules`` but still executing: they import each other (2.5.1: aot_autograd imports
    Inductor's codecache before its own submodules), so a patch installed when the inner one
    is done would miss what the outer one has yet to import."""
    return any(  # importlib marks a module's spec ``_initializing`` while its code runs
        getattr(getattr(sys.modules.get(name), "__spec__", None), "_initializing", False)
        for name in COMPILER_MODULES
        if name != but
    )


class _OnceLoaded:
    """``install``, skipped while the compiler is half imported (a later module's import calls it again)."""

    def __init__(self, install: Callable[[ModuleType | None], None]) -> None:
        self.install = install

    def __call__(self, module: ModuleType) -> None:
        if not _compiler_half_imported(but=module.__name__):
            self.install(module)


_ONCE_LOADED: dict[Callable[[ModuleType | None], None], _OnceLoaded] = {}


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

    A finder and a loader by their methods alone: ``importlib.abc`` costs 10 ms to import.
    It leaves ``sys.meta_path`` when the module is executed, not when it is found: a
    ``find_spec`` that imports nothing (a probe of whether a module exists) must not take
    the waiting patches with it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._finding = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name or self._finding:
            return None
        self._finding = True  # the real finders find it, past this one
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RunAfter(spec.loader, self)  # type: ignore[assignment]
        return spec


class _RunAfter:
    def __init__(self, loader: Any, finder: _AfterImport) -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for install in _WAITING.pop(self.finder.name, []):
            install(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ... as the real loader
        return getattr(self.loader, name)
