"""The fallback path: torch without native tags (2.2-2.12), ``TAGGED_OPS_FALLBACK=1``, or ``fallback=True``.

Older ``custom_op`` refuses both tagged shapes (keyword-only Tensor arguments,
returning an input), so the op is registered untagged: it mutates and returns
nothing, with out= buffers as positional arguments, e.g. ``(Tensor(a0!) x) -> ()``
or ``(Tensor x, Tensor(a1!) out) -> ()``. The handle returns the mutated tensors,
so callers see the 2.13 contract. Compiled code records the op itself.
"""

from __future__ import annotations

from typing import Any

from torch.library import Library

from . import _compat
from ._compat_functorch import register_vmap
from ._definition import Definition
from ._registration import RegisteredOp

__all__ = ["FallbackDefinition", "register_untagged"]

VMAP_KEY = "FuncTorchBatched"


class FallbackDefinition(Definition):
    """An op defined on the fallback path: one untagged op on the dispatcher."""

    def __init__(self, *args: Any, forced: bool, **kwargs: Any) -> None:
        self.forced_fallback = forced
        super().__init__(*args, **kwargs)

    def _register(self) -> RegisteredOp:
        return register_untagged(self, self.sig.name)

    def _untagged_registered(self) -> RegisteredOp:
        return self.registered


def register_untagged(definition: Definition, opname: str) -> RegisteredOp:
    """``<ns>::<opname>`` with the untagged schema of ``definition``'s op, running its kernels."""
    sig = definition.sig
    # 2.2 cannot functionalize a call that relies on a schema default (see
    # _compat.schema_defaults_survive_functionalization); the handle passes every argument.
    defaults = not any(p.has_default for p in sig.params) or _compat.schema_defaults_survive_functionalization()
    registered = definition._register_op(
        opname, sig.fallback_schema(defaults=defaults), sig.fallback_params(), (), False
    )
    if sig.kind == "inplace":
        try:
            _register_vmap_loop(registered)
        except Exception:
            registered.destroy()
            raise
    return registered


def _register_vmap_loop(registered: RegisteredOp) -> None:
    """``torch.vmap`` of an untagged in-place op: run it per batch entry on views, as torch's batched
    fallback does for an op tagged in-place (it refuses ops that return nothing)."""
    op, qualname = registered.op, registered.qualname

    def rule(info: Any, in_dims: tuple[Any, ...], *args: Any, **kwargs: Any) -> tuple[None, None]:
        if in_dims[0] is None:
            raise RuntimeError(
                f"{qualname}: vmap: an in-place op cannot write a batched value into its unbatched "
                "first argument; vmap over that argument too."
            )
        for i in range(info.batch_size):
            op(*(a if d is None else a.select(d, i) for a, d in zip(args, in_dims, strict=True)), **kwargs)
        return None, None

    fragment = Library(registered.sig.namespace, "FRAGMENT")
    register_vmap(qualname, rule, lib=fragment)  # no handle has the name yet: this reaches the dispatcher
    registered.keep_fragment(VMAP_KEY, fragment)
