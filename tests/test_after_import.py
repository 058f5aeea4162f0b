"""Patches wait for the part of torch's compiler they patch (``_fixes/_after_import.py``).

Shown on stand-in modules: a patch waiting for a module runs once it is imported, not when
someone only asks whether it exists; and a patch waiting for the compiler runs once the
compiler's modules are done importing each other, not when the innermost one is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

from tagged_ops._fixes import _after_import


@pytest.fixture
def modules(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A folder on sys.path for stand-in modules, named after the test; forgotten afterwards."""
    prefix = f"after_import_{request.node.name}"
    sys.path.insert(0, str(tmp_path))
    yield prefix
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith(prefix)]:
        del sys.modules[name]


def test_a_probe_of_whether_a_module_exists_leaves_the_patch_waiting(tmp_path: Path, modules: str) -> None:
    (tmp_path / f"{modules}_target.py").write_text("VALUE = 1\n")
    seen: list[ModuleType] = []
    _after_import.when_imported(f"{modules}_target", seen.append)
    assert importlib.util.find_spec(f"{modules}_target") is not None  # a probe, no import
    assert seen == []
    module = importlib.import_module(f"{modules}_target")
    assert seen == [module]


def test_the_compiler_patch_waits_for_the_outermost_import(
    tmp_path: Path, modules: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on torch 2.5.1: aot_autograd imports Inductor's codecache, then its own submodules."""
    outer, inner = f"{modules}_outer", f"{modules}_inner"
    (tmp_path / f"{inner}.py").write_text("VALUE = 1\n")
    (tmp_path / f"{outer}.py").write_text(f"import {inner}\nDEFINED_AFTER_THE_INNER_IMPORT = 2\n")
    monkeypatch.setattr(_after_import, "COMPILER_MODULES", (outer, inner))
    calls: list[bool] = []

    def install(module: ModuleType | None) -> None:
        calls.append(hasattr(sys.modules[outer], "DEFINED_AFTER_THE_INNER_IMPORT"))

    _after_import.when_compiler_loads(install)
    importlib.import_module(outer)
    assert calls == [True]  # not when the inner one finished, while the outer one was half executed
    _after_import.when_compiler_loads(install)  # the compiler loaded: at once
    assert calls == [True, True]
