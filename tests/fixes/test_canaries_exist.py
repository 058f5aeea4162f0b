"""Every fix names its canary, and the canary is there: ``tests/...py::test_name`` in its docstring exists;
a fix for old releases only is kept while one of them is in the matrix."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from tagged_ops import _fixes

from ._confined import CONFINED, minor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
try:
    import releases
finally:
    sys.path.pop(0)
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


@pytest.mark.parametrize("fix", sorted(CONFINED))
def test_a_fix_for_old_releases_retires_with_them(fix: str) -> None:
    """A fix whose bug only some old releases have (tests/fixes/_confined.py) is kept while one of
    them is in the matrix; its canary checks, release by release, that exactly those have it."""
    assert fix in _fixes.FIXES, f"tests/fixes/_confined.py lists {fix}, which is no fix"
    in_the_matrix = {minor(version) for version in releases.RELEASES}
    assert set(CONFINED[fix]) & in_the_matrix, (
        f"no release of the matrix has _fixes/{fix}.py's bug (only {', '.join(CONFINED[fix])} do): delete the "
        "fix, its line in _fixes.FIXES, its tests and its entry in tests/fixes/_confined.py"
    )
