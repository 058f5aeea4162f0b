"""Makes Inductor read a written view of an intermediate from the intermediate, under v1 (2.3-2.5).

With ``auto_functionalized`` v1 (2.3-2.5; later with ``enable_auto_functionalized_v2 =
False``) Inductor copies an argument the op writes with ``clone_preserve_strides``:
``as_strided(arg, (n,), (1,), 0)`` over the argument's whole storage, then ``clone``.
Where the argument is a view of a tensor the graph computes (``h = w * 2; op_(h[:, 1:])``),
Inductor computes the view alone into a buffer of its own (8 elements of 12) and
reads all 12 from it: uninitialised memory, wrong values (NaN, garbage). A
hand-written mutable op gets the same; ``auto_functionalized_v2`` (2.6+) does not
take this route.

The fix, two parts. Every such ``as_strided`` reads the view's base instead:
``as_strided`` ignores the view it is given (it addresses the storage), so the values
are the same, and Inductor computes the base whole; no copy is added, and a direct
``torch.ops`` call compiles right (installed at the first trace, once Inductor's
post-grad passes are imported). And a handle's call that writes a view goes through
the op's functional twin under v1 (:func:`reroutes`, read at trace time like the
config it reads): v1 copies the view's whole base twice, the twin allocates one
buffer of the view's size. Canary:
tests/test_compile_right_by_default.py::test_canary_a_mutated_view_of_an_intermediate_is_read_out_of_bounds.
Breakpoint: pytorch/pytorch#134409 (auto_functionalized_v2, on by default from 2.6).
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

from .. import _compat_compiler
from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op


def compiler_lowers_mutated_views() -> bool:
    """Whether Inductor functionalizes a mutating custom op's views with ``auto_functionalized_v2``."""
    config = importlib.import_module("torch._inductor.config")
    return bool(getattr(config, "enable_auto_functionalized_v2", False))


@_compat_compiler.assume_constant_result
def _v1() -> bool:
    return not compiler_lowers_mutated_views()


def reroutes(op: Op, values: dict[str, Any], written: list[Any]) -> bool:
    for t in written:
        if t._base is not None and _v1():
            return True
    return False


def at_first_trace(op: Op) -> None:
    when_imported("torch._inductor.fx_passes.post_grad", _install)


def _install(module: ModuleType) -> None:
    wrap_once(module, "decompose_auto_functionalized", _reading_bases)


def _is_view(node: Any) -> bool:
    """Whether ``node`` calls an op whose result aliases its first argument without writing it."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None or not schema.returns or not node.args:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write and isinstance(node.args[0], torch.fx.Node)


def _tensor(node: Any) -> torch.Tensor | None:
    value = node.meta.get("val")
    return value if isinstance(value, torch.Tensor) else None


def _base(node: Any) -> Any:
    """The node the chain of views ending at ``node`` starts from, if it has the same storage and dtype."""
    base = node
    while _is_view(base):
        base = base.args[0]
    view, root = _tensor(node), _tensor(base)
    if base is node or view is None or root is None or root.dtype != view.dtype:
        return None
    from torch.multiprocessing.reductions import StorageWeakRef

    same = StorageWeakRef(root.untyped_storage()) == StorageWeakRef(view.untyped_storage())
    return base if same else None


def _reading_bases(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def decompose_auto_functionalized(graph: Any) -> None:
        before = set(graph.nodes)
        original(graph)
        as_strided = torch.ops.aten.as_strided.default
        for node in graph.nodes:
            # only the decomposition's own copies, which always pass the storage offset
            if node in before or node.target is not as_strided or len(node.args) < 4:
                continue
            base = _base(node.args[0])
            if base is not None:
                node.replace_input_with(node.args[0], base)

    return decompose_auto_functionalized
