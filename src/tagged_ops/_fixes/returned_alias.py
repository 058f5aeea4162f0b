"""Keeps a write through what a tagged op returned under functionalization (2.13-2.15).

Functionalization (torch.compile's AOTAutograd, ``run_decompositions()`` of an
export) records a tagged op as ``auto_functionalized_v2`` and hands back what the
op returns as a new tensor, not as the argument it is: a later write through it
(``torch.ops.ns.op_(torch.ops.ns.op_(x))``, ``op(a, out=o).mul_(2)``) never reaches
that argument. Measured with raw ``custom_op(tags=...)`` on 2.13.0 and 2.15.0.

The fix: the tagged op's kernel at the Functionalize key records the call as its
untagged twin's ``auto_functionalized_v2`` (which Inductor writes in place) or,
where an argument it writes is a view, as the functional twin plus ``copy_`` (the
kernel cannot name the view's base, and Inductor miscompiled a view recorded as its
own base: measured), and returns the very arguments it wrote. Registered when the
op is defined: functionalization may come before any fake-tensor call (``make_fx`` of
``functionalize``). Canary: tests/fixes/test_returned_alias.py::test_canary_a_raw_tagged_op_loses_the_write.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any, Callable

from .. import _compat
from .._signature import CallOrder

if TYPE_CHECKING:
    from . import Op


def at_definition(op: Op) -> None:
    if op.tagged:
        op.put_lasting_kernel("Functionalize", _functionalize_kernel(op))


@functools.cache
def _record_v2() -> Callable[[Any, dict[str, Any]], None] | None:
    # torch's own step that records a generic mutable op as auto_functionalized_v2 (2.6+)
    module = importlib.import_module("torch._higher_order_ops.auto_functionalize")
    helper = getattr(module, "_do_auto_functionalize_v2_for_generic_mutable_operator", None)
    functional_tensor = importlib.import_module("torch._subclasses.functional_tensor")
    cpp_api = getattr(functional_tensor, "CppFunctionalizeAPI", None)
    if helper is None or cpp_api is None:
        return None
    return lambda untagged, values: helper(cpp_api(), untagged, untagged._schema, values)


def _functionalize_kernel(op: Op) -> Callable[..., Any]:
    sig = op.sig
    made: list[tuple[CallOrder, dict[str, Any]]] = []  # at the first call: defining an op stays cheap
    returned = sig.mutated_names

    def functionalize_kernel(*args: Any, **kwargs: Any) -> Any:
        if not made:
            made.append((CallOrder(sig.params), _compat.schema_defaults(op.op)))
        from .._compat_compiler import is_functional_base  # functionalization loads it: defining does not

        user_order, defaults = made[0]
        by_name = user_order.by_name(args, kwargs, defaults)
        untagged, order = op.untagged()
        twin = op.functional()
        values = {p.name: by_name[p.name] for p in order}
        record = _record_v2()
        bases = all(is_functional_base(values[n]) for n in twin.written)
        if bases and record is not None:
            record(untagged, dict(values))
        else:
            twin.write(values)
        return by_name[returned[0]] if len(returned) == 1 else tuple(by_name[n] for n in returned)

    return functionalize_kernel
