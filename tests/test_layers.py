"""The package's shape: layers that import only downward, private torch names in two rooms, small modules.

Read from the source (no import of the package needed), so a change that breaks
the shape fails here whatever torch is installed. docs/ARCHITECTURE.md describes
the same layers.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tagged_ops"
sys.path.insert(0, str(ROOT / "tools"))
import private_names  # noqa: E402

#: The layers, lowest first: a module imports only from its own layer or lower ones.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_switches", "_lazy", "_version"),  # no torch
    (
        "_compat",
        "_compat_infer_schema",
        "_compat_functorch",
        "_compat_compiler",
        "_compat_dtensor",
    ),  # what torch offers: probes and backports
    ("_contract", "_signature", "_inference"),  # the contract both paths keep
    ("_fixes",),  # torch's bugs, one module each
    ("_anchor", "_codegen", "_calls", "_registration"),  # one op on the dispatcher
    ("_functional", "_transforms", "_autograd", "_tracing"),  # what a definition is made of
    (
        "_sharding",
        "_definition",
        "_names",
    ),  # one definition; one name's life (what torch.library finds by it included)
    ("_native", "_fallback"),  # the two paths
    ("_handle", "_define", "_classic"),  # the public handle, decorators, adopted classic ops
    ("__init__", "__main__", "_opcheck", "_selfcheck", "cpp_extension", "testing", "audit"),  # tools on top
)
MAX_LINES = 400
#: Modules let past MAX_LINES: the infer_schema backport stays diffable against torch's own.
LONGER = {"_compat_infer_schema.py"}


def _unit(path: Path) -> str:
    """The layer unit of a module: its top-level name in the package (``_fixes``, ``testing``, ``_handle``)."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _layer(unit: str) -> int:
    for i, units in enumerate(LAYERS):
        if unit in units:
            return i
    raise AssertionError(f"{unit}: not in any layer of tests/test_layers.py; place it")


def _imported_units(path: Path) -> set[str]:
    """The package's units ``path`` imports, anywhere in it (``TYPE_CHECKING`` blocks and functions too)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0 for the package's own modules
    units = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.startswith("tagged_ops."):
                    units.add(node.module.split(".")[1])
                continue
            up = node.level - 1  # how many folders above this module's own
            if up < depth:  # inside the same subpackage: the unit is the subpackage itself
                units.add(_unit(path))
                continue
            if node.module:
                units.add(node.module.split(".")[0])
            else:
                units.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            units.update(a.name.split(".")[1] for a in node.names if a.name.startswith("tagged_ops."))
    return units


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_in_a_layer_and_imports_only_downward() -> None:
    upward = []
    for path in _modules():
        unit = _unit(path)
        for imported in _imported_units(path) - {unit}:
            if _layer(imported) > _layer(unit):
                upward.append(
                    f"{path.relative_to(PACKAGE)} imports {imported} (layer {_layer(imported)} > {_layer(unit)})"
                )
    assert upward == []


def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in _modules():
        graph.setdefault(_unit(path), set()).update(_imported_units(path) - {_unit(path)})
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles = []

    def visit(unit: str, stack: list[str]) -> None:
        state[unit] = 1
        for nxt in sorted(graph.get(unit, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[unit] = 2

    for unit in sorted(graph):
        if unit not in state:
            visit(unit, [unit])
    assert cycles == []


def test_private_torch_names_only_in_the_probe_and_the_fixes() -> None:
    assert private_names.outside_allowed(private_names.scan()) == {}


def test_private_attributes_of_torch_objects_are_found(tmp_path: Path) -> None:
    """``op._schema`` and ``getattr(t, "_base")`` are torch's; ``self._x`` and attributes tagged_ops sets are its own."""
    module = tmp_path / "reads.py"
    module.write_text(
        "import operator\n"
        "def f(op, t, h):\n"
        "    h._mine = 1\n"
        "    return op._schema, getattr(t, '_base'), operator.attrgetter('_cdata'), h._mine, op.__name__\n"
    )
    found = private_names.attributes_in(module, {"_mine"})
    assert found == {"._schema", "._base", "._cdata"}


def test_which_private_names_this_torch_has(record_property: pytest.RecordProperty) -> None:
    """Recorded per release for docs/ARCHITECTURE.md; every name the probe reads unconditionally resolves."""
    present = {}
    for name in sorted({n for names in private_names.scan().values() for n in names if n.startswith("torch")}):
        present[name] = _resolves(name)
    record_property("private_names", present)
    # read at import, without a probe around them: every supported release has these
    for name in (
        "torch._C._functorch",
        "torch._C._increment_version",
        "torch._C.parse_schema",
        "torch._ops.OpOverload",
    ):
        assert present[name], name


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
        try:
            value = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(value, attr):
                return False
            value = getattr(value, attr)
        return True
    return False


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_are_small_and_say_what_they_own(module: Path) -> None:
    text = module.read_text()
    if module.name not in LONGER:
        assert len(text.splitlines()) <= MAX_LINES, f"{module.relative_to(PACKAGE)}: split it by what it owns"
    if module.name != "__main__.py":
        docstring = ast.get_docstring(ast.parse(text))
        assert docstring, f"{module.relative_to(PACKAGE)} has no module docstring"
