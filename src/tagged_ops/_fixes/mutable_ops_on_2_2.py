"""Inductor cannot compile a mutating custom op on torch 2.2 (fixed in 2.3).

AOTAutograd turns every mutating op into ``auto_functionalized`` (2.2+), but only
2.3's Inductor lowers it; 2.2 fails with "auto_functionalized is not an OpOverload".

The fix: there a handle's compiled call goes through the op's functional twin (fresh
results, then ``copy_``), which every compiler lowers. Asked of Inductor while Dynamo
traces (importing Inductor takes seconds), never on the eager path. Canary:
tests/fixes/test_mutable_ops_on_2_2.py::test_canary_inductor_compiles_no_raw_mutable_op.
Breakpoint: pytorch/pytorch#118673 (Inductor lowers auto_functionalized, 2.3).
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from .. import _compat

if TYPE_CHECKING:
    from . import Op


@functools.cache
def compiler_lowers_mutable_ops() -> bool:
    """Whether Inductor compiles a mutating custom op (lowers ``auto_functionalized``).

    ``auto_functionalized_v2`` came with Inductor's lowering of it (2.6): where it exists the
    answer needs no import of Inductor, which torch loads only when it compiles (seconds, at
    trace time). Before it, Inductor itself is asked (torch.compile has loaded it by then).
    """
    module = importlib.import_module("torch._higher_order_ops.auto_functionalize")
    if hasattr(module, "auto_functionalized_v2"):
        return True
    lowering = importlib.import_module("torch._inductor.lowering")
    hop = getattr(module, "auto_functionalized", None)
    return hop is not None and hop in lowering.lowerings


@_compat.assume_constant_result
def _needed() -> bool:
    return not compiler_lowers_mutable_ops()


def reroutes(op: Op, values: dict[str, Any], written: list[Any]) -> bool:
    return _needed()
