"""Keeps tagged_ops' ``.out`` ops out of Inductor's out-variant pairing unless asked (2.13-2.15).

2.13's Inductor lowers a compiled call of a functional custom op ``ns::op`` to an
overload in the same packet tagged ``torch.Tag.out`` whose other arguments match
(``torch._library._out_variant.to_out_variant``, asked per call). Defining a tagged
``.out`` thus changes how the *functional* op compiles, in code that never calls
``.out``, and on 2.13.0, 2.14.1 and 2.15.0 that goes wrong in two ways:

* the generated call splits ``int[]`` constants into separate ints, passes a
  defaulted argument twice, and passes a buffer not named ``out`` as ``out=``
  ("expected at most 7 argument(s) but received 8");
* the pairing ignores devices: a ``.out`` with CUDA kernels only takes the
  functional op's CPU calls ("Could not run ... with arguments from the 'CPU' backend").

The fix: ``to_out_variant`` answers None for a tagged_ops ``.out`` unless it was
defined with ``pair=True``, and even then where its argument kinds are ones the
call mangles or it lacks a kernel for a device the functional op has one for. Installed
when Inductor first imports ``torch._library._out_variant``. Canary:
tests/test_pairing.py::test_canary_out_variant_call_still_mangles_arguments (fails
once a torch passes those argument kinds intact; then pair them again there).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

from .. import _compat
from ._after_import import when_imported

if TYPE_CHECKING:
    from . import Op

# qualified name of a tagged_ops `.out` -> whether its definition asked to pair (pair=True)
_PAIR: dict[str, bool] = {}

#: Argument kinds whose out-variant call Inductor mangles (measured on 2.13.0, 2.14.1, 2.15.0).
MANGLED_KINDS = frozenset({"list", "defaulted", "renamed-out"})

# Devices whose kernels pairing must not lose (a kernel under a Composite key serves them all).
_BACKENDS = ("CPU", "CUDA", "XPU", "MPS", "HPU", "PrivateUse1")
_EVERY_DEVICE = ("CompositeExplicitAutograd", "CompositeImplicitAutograd")


def at_definition(op: Op) -> None:
    if op.tagged and op.sig.kind == "out":
        _PAIR[op.sig.qualname] = op.pair
        when_imported("torch._library._out_variant", _install)


def at_destroy(op: Op) -> None:
    _PAIR.pop(op.sig.qualname, None)


def argument_kinds(out_op: Any) -> set[str]:
    """The kinds of ``out_op``'s arguments that Inductor's out-variant call has mangled."""
    kinds = set()
    outs = _compat.written_argument_names(out_op._schema)
    if outs != ["out"] and len(outs) == 1:  # one buffer: the call passes it as out=
        kinds.add("renamed-out")
    for a in out_op._schema.arguments:
        if a.alias_info is not None and a.alias_info.is_write:
            continue
        if a.has_default_value():
            kinds.add("defaulted")
        if isinstance(a.type, torch.ListType) or (
            isinstance(a.type, torch.OptionalType) and isinstance(a.type.getElementType(), torch.ListType)
        ):
            kinds.add("list")
    return kinds


def _has_kernel(qualname: str, key: str) -> bool:
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(qualname, k) for k in (key, *_EVERY_DEVICE))


def _covers_devices(functional: Any, out_op: Any) -> bool:
    """``out_op`` has a kernel for every device ``functional`` has one for."""
    return all(_has_kernel(out_op._name, key) for key in _BACKENDS if _has_kernel(functional._name, key))


def _guarded(to_out_variant: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(to_out_variant)
    def guarded_to_out_variant(op: Any) -> Any:
        out_op = to_out_variant(op)
        if out_op is None:
            return None
        pair = _PAIR.get(out_op._name)
        if pair is None:  # not a tagged_ops op: torch's answer
            return out_op
        works = not (argument_kinds(out_op) & MANGLED_KINDS) and _covers_devices(op, out_op)
        return out_op if pair and works else None

    guarded_to_out_variant.__tagged_ops_guard__ = True  # type: ignore[attr-defined]
    return guarded_to_out_variant


def _install(module: ModuleType) -> None:
    # Inductor imports to_out_variant from this module at each lowering, so the guard is what it finds.
    original = getattr(module, "to_out_variant", None)
    if original is not None and not hasattr(original, "__tagged_ops_guard__"):
        module.to_out_variant = _guarded(original)  # type: ignore[attr-defined]
