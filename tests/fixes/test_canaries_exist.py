"""Every fix names its canary, and the canary is there: ``tests/...py::test_name`` in its docstring exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tagged_ops import _fixes

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path(_fixes.__file__).parent
NAMED = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+))?")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test")}


@pytest.mark.parametrize("fix", _fixes.FIXES)
def test_each_fix_names_a_canary_that_exists(fix: str) -> None:
    doc = ast.get_docstring(ast.parse((FOLDER / f"{fix}.py").read_text())) or ""
    text = " ".join(doc.split())
    named = NAMED.findall(text) if "Canar" in text else []
    assert named, f"_fixes/{fix}.py: its docstring names no canary (``Canary: tests/...py::test_...``)"
    for path, test in named:
        module = ROOT / path
        assert module.is_file(), f"_fixes/{fix}.py names {path}, which does not exist"
        if test:
            assert test in _tests_in(module), f"_fixes/{fix}.py names {path}::{test}, which does not exist"
