"""Package attributes that load on first use (PEP 562): importing the package imports no torch."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_attributes(package: str, homes: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, importing ``name`` from ``homes[name]`` when first asked."""
    namespace = vars(importlib.import_module(package))

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value  # later lookups are plain module attributes
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
