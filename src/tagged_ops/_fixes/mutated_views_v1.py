"""``auto_functionalized`` v1 miscompiles a mutated view of a tensor the graph made (2.3-2.5).

With ``auto_functionalized`` v1 (2.3-2.5, or ``enable_auto_functionalized_v2 = False``
later) Inductor miscompiles an op that mutates a view of a tensor the graph itself
made (``y = x + 1; op_(y[1:5]); return y``: wrong values, a hand-written op too);
``auto_functionalized_v2`` (on by default from 2.6) fixed it, and a view of a graph
input cannot be told apart while tracing.

The fix: a handle's compiled call that writes a view goes through the op's functional
twin (one copy per view); whole tensors keep the in-place lowering. Read at trace
time, like the config it reads. Canary: tests/test_overloads.py::test_auto_functionalized_v1_view_miscompile.
Breakpoint: pytorch/pytorch#134409 (auto_functionalized_v2, on by default from 2.6).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .. import _compat

if TYPE_CHECKING:
    from . import Op


def compiler_lowers_mutated_views() -> bool:
    """Whether Inductor compiles a mutating custom op on a view correctly (``auto_functionalized_v2``)."""
    config = importlib.import_module("torch._inductor.config")
    return bool(getattr(config, "enable_auto_functionalized_v2", False))


@_compat.assume_constant_result
def _v1() -> bool:
    return not compiler_lowers_mutated_views()


def reroutes(op: Op, values: dict[str, Any], written: list[Any]) -> bool:
    for t in written:
        if t._base is not None and _v1():
            return True
    return False
