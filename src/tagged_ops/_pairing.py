"""Inductor's out-variant pairing (2.13+): may compiled calls of ``ns::op`` run its tagged ``ns::op.out``?

2.13's Inductor lowers a compiled call of a functional custom op to an overload in
the same packet tagged ``torch.Tag.out`` whose other arguments match
(``torch._library._out_variant.to_out_variant``). Defining a tagged ``.out`` thus
changes how the *functional* op compiles, in code that never calls ``.out``, and
on 2.13-2.15 that goes wrong in two ways:

* the generated call splits ``int[]`` constants into separate ints and passes a
  defaulted argument twice: "expected at most 7 argument(s) but received 8";
* the pairing ignores devices: a ``.out`` with CUDA kernels only takes the
  functional op's CPU calls ("Could not run ... with arguments from the 'CPU' backend").

So a tagged_ops ``.out`` stays out of that search unless it was defined with
``pair=True``, and even then it pairs only where the lowering works: the ``.out``
has a kernel for every device the functional op has one for (asked when Inductor
asks), and the generated call passes the op's argument kinds intact (asked of
Inductor itself, once per process, by compiling a probe op: see
:func:`lowering_passes`). Without pairing, the functional op compiles exactly as it
did before its ``.out`` existed.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from . import _capabilities as caps

__all__ = ["forget", "is_paired", "permit"]

# qualified name of a tagged_ops `.out` -> whether its definition asked to pair (pair=True)
_PAIR: dict[str, bool] = {}

# Devices whose kernels pairing must not lose (a kernel under a Composite key serves them all).
_BACKENDS = ("CPU", "CUDA", "XPU", "MPS", "HPU", "PrivateUse1")
_EVERY_DEVICE = ("CompositeExplicitAutograd", "CompositeImplicitAutograd")


def permit(out_op: Any, pair: bool) -> None:
    """Record whether compiled calls of ``out_op``'s functional op may be lowered to it."""
    _PAIR[out_op._name] = pair
    if pair:
        for kind in _argument_kinds(out_op):
            lowering_passes(kind)  # ask now, not from inside Inductor's lowering


def forget(qualname: str) -> None:
    _PAIR.pop(qualname, None)


def is_paired(out_op: Any) -> bool:
    """Whether Inductor lowers compiled calls of the functional op of ``out_op``'s packet to ``out_op``."""
    if caps.OUT_VARIANT_PAIRING is None or out_op is None:
        return False
    try:
        functional = caps.lookup_op(out_op._schema.name)
        return bool(caps.OUT_VARIANT_PAIRING.to_out_variant(functional) is out_op)
    except (AttributeError, RuntimeError):  # no functional op, or one that mutates
        return False


def _has_kernel(qualname: str, key: str) -> bool:
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(qualname, k) for k in (key, *_EVERY_DEVICE))


def _covers_devices(functional: Any, out_op: Any) -> bool:
    """``out_op`` has a kernel for every device ``functional`` has one for."""
    return all(_has_kernel(out_op._name, key) for key in _BACKENDS if _has_kernel(functional._name, key))


def _argument_kinds(out_op: Any) -> set[str]:
    """The argument kinds of ``out_op`` that Inductor's generated call has mangled."""
    kinds = set()
    outs = [a.name for a in out_op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
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


_PROBES = {  # argument kind -> (the probe's inputs, the call's extra arguments, its out buffer's name)
    "list": ("Tensor x, int[] shape", ([2, 3],), "out"),
    "defaulted": ("Tensor x, float alpha=2.0", (), "out"),
    "renamed-out": ("Tensor x", (), "result"),
}


@functools.cache
def lowering_passes(kind: str) -> bool:
    """Whether Inductor's out-variant call passes arguments of ``kind`` intact (compiles a probe op).

    Asks the installed torch by behaviour, so a release that fixes the lowering
    pairs again with no change here. Costs one small compile per kind, per process,
    and only for ``pair=True`` ops with such arguments.
    """
    inputs, extra, out = _PROBES[kind]
    namespace = "tagged_ops_probe"
    name = f"pairing_{kind.replace('-', '_')}"
    lib = torch.library.Library(namespace, "FRAGMENT")
    try:
        lib.define(f"{name}({inputs}) -> Tensor")
        lib.define(f"{name}.out({inputs}, *, Tensor(a!) {out}) -> Tensor(a!)", tags=(torch.Tag.out,))  # type: ignore[attr-defined]

        def functional(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            return x.reshape(6) * 2

        def out_variant(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            return kwargs[out].copy_(x.reshape(6) * 2)  # type: ignore[no-any-return]

        lib.impl(name, functional, "CompositeExplicitAutograd")
        lib.impl(f"{name}.out", out_variant, "CompositeExplicitAutograd")
        caps.register_fake(f"{namespace}::{name}", functional, lib=lib)
        caps.register_fake(f"{namespace}::{name}.out", out_variant, lib=lib)
        op = getattr(getattr(torch.ops, namespace), name).default
        x = torch.arange(6.0).reshape(2, 3)
        compiled: Callable[[torch.Tensor], torch.Tensor] = torch.compile(
            lambda t: op(t, *extra), fullgraph=True, backend="inductor"
        )
        return bool(torch.equal(compiled(x), x.reshape(6) * 2))
    except Exception:  # noqa: BLE001 - any failure of the lowering means: do not pair
        return False
    finally:
        caps.destroy_library(lib)


def _lowering_works(functional: Any, out_op: Any) -> bool:
    return _covers_devices(functional, out_op) and all(lowering_passes(k) for k in _argument_kinds(out_op))


def _guarded(to_out_variant: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(to_out_variant)
    def guarded_to_out_variant(op: Any) -> Any:
        out_op = to_out_variant(op)
        if out_op is None:
            return None
        pair = _PAIR.get(out_op._name)
        if pair is None:  # not a tagged_ops op: torch's answer
            return out_op
        return out_op if pair and _lowering_works(op, out_op) else None

    guarded_to_out_variant.__tagged_ops_guard__ = True  # type: ignore[attr-defined]
    return guarded_to_out_variant


if caps.OUT_VARIANT_PAIRING is not None and not hasattr(
    caps.OUT_VARIANT_PAIRING.to_out_variant, "__tagged_ops_guard__"
):
    # Inductor imports to_out_variant from this module at each lowering, so the guard is what it finds.
    caps.OUT_VARIANT_PAIRING.to_out_variant = _guarded(caps.OUT_VARIANT_PAIRING.to_out_variant)
