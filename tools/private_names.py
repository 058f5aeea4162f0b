"""The private torch names tagged_ops' source reads, found by reading it (no torch needed).

A private name is a dotted path from ``torch`` with a component that starts with an
underscore: ``torch._C._functorch``, ``torch.library._validate_out_schema``, or a
module imported as ``torch._inductor.lowering`` (by ``import``, ``from ... import``
or ``importlib.import_module("...")``). A private attribute is one read off an object
(``op._schema``, ``t._base``, ``getattr(x, "_cdata")``) that tagged_ops' own source never
defines: torch's, listed as ``._schema``.

    python tools/private_names.py            # name -> modules that read it
    python tools/private_names.py --check    # fail if a module outside _compat*/_fixes reads one

tests/test_layers.py runs the check; docs/ARCHITECTURE.md lists the names with the
releases where each resolves (recorded by the suite into results/*.json).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tagged_ops"

#: Modules allowed to read private torch names: the probe and its backports, and the fixes.
ALLOWED = (
    "_compat.py",
    "_compat_infer_schema.py",
    "_compat_functorch.py",
    "_compat_compiler.py",
    "_compat_dtensor.py",
    "_fixes/",
)


def _dotted(node: ast.AST) -> str | None:
    """``torch._C.x`` and ``getattr(getattr(torch, "_library", None), "utils", None)`` alike -> a dotted path."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif _is_getattr(node):
            parts.append(node.args[1].value)  # type: ignore[attr-defined]
            node = node.args[0]  # type: ignore[attr-defined]
        else:
            break
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_getattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _private(dotted: str) -> str | None:
    """``dotted`` if it is a torch path with a private component, else None."""
    parts = dotted.split(".")
    if parts[0] != "torch" or not any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
        return None
    return dotted


def names_in(path: Path) -> set[str]:
    """Every private torch name ``path`` reads (as written in the source)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _private(node.value):
            if " " not in node.value:  # a module path written as a string (importlib)
                found.add(node.value)
        elif isinstance(node, ast.Attribute) or _is_getattr(node):
            dotted = _dotted(node)
            # the longest chain only: skip ``torch._C`` inside ``torch._C._functorch``
            if dotted is not None and _private(dotted):
                found.add(dotted)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if _private(a.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _private(node.module):
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif node.module.split(".")[0] == "torch":
                found.update(f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_"))
    # keep only maximal chains: torch._C._functorch.x makes torch._C._functorch and torch._C redundant
    return {n for n in found if not any(o != n and o.startswith(n + ".") for o in found)}


def _defined_names() -> set[str]:
    """Every attribute tagged_ops' source defines: of its classes, and those it sets on objects. (Its
    modules' own names are read as ``module.name`` only for modules it imports by name, never torch's.)"""
    defined: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):  # methods, class attributes
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    defined.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    defined.update(t.id for t in item.targets if isinstance(t, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                    defined.add(str(node.args[1].value))
    return defined


def attributes_in(path: Path, defined: set[str]) -> set[str]:
    """The private attributes of torch's objects ``path`` reads (``._schema``): read off an object
    other than ``self`` / ``cls`` and defined nowhere in tagged_ops."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name, base = node.attr, node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls", "torch"):  # torch.x: a name, above
                continue
            if _dotted(node) and (_dotted(node) or "").startswith("torch."):
                continue
        elif isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("attrgetter") and node.args:
            if not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                continue
            name = node.args[0].value
        elif _is_getattr(node):
            name = node.args[1].value  # type: ignore[attr-defined]
            if (_dotted(node.args[0]) or "").split(".")[0] == "torch":  # type: ignore[attr-defined]
                continue
        else:
            continue
        if name.startswith("_") and not name.startswith("__") and name not in defined:
            found.add(f".{name}")
    return found


def scan() -> dict[str, set[str]]:
    """Module path (relative to the package) -> the private torch names and attributes it reads."""
    result = {}
    defined = _defined_names()
    for path in sorted(PACKAGE.rglob("*.py")):
        names = names_in(path) | attributes_in(path, defined)
        if names:
            result[path.relative_to(PACKAGE).as_posix()] = names
    return result


def outside_allowed(found: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: n for m, n in found.items() if not any(m == a or m.startswith(a) for a in ALLOWED)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    found = scan()
    if args.check:
        bad = outside_allowed(found)
        for module, names in bad.items():
            print(f"{module}: reads private torch names outside _compat/_fixes: {', '.join(sorted(names))}")
        return 1 if bad else 0
    by_name: dict[str, list[str]] = {}
    for module, names in found.items():
        for name in names:
            by_name.setdefault(name, []).append(module)
    for name in sorted(by_name):
        print(f"{name}: {', '.join(by_name[name])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
