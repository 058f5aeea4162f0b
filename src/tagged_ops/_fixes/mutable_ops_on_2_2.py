"""Compiles a handle's calls through the functional twin where Inductor lowers no mutating custom op (2.2).

AOTAutograd turns every mutating op into ``auto_functionalized`` (2.2+), but only
2.3's Inductor lowers it; 2.2 fails with "auto_functionalized is not an OpOverload".

The fix: there a handle's compiled call goes through the op's functional twin (fresh
results, then ``copy_``), which every compiler lowers. Asked of Inductor while Dynamo
traces (importing Inductor takes seconds), never on the eager path. Canary:
tests/fixes/test_mutable_ops_on_2_2.py::test_canary_inductor_compiles_no_raw_mutable_op.
Breakpoint: pytorch/pytorch#118673 (Inductor lowers auto_functionalized, 2.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _compat_compiler

if TYPE_CHECKING:
    from . import Op


@_compat_compiler.assume_constant_result
def _needed() -> bool:
    return not _compat_compiler.compiler_lowers_mutable_ops()


def reroutes(op: Op, values: dict[str, Any], written: list[Any]) -> bool:
    return _needed()
