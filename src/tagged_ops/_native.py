"""The native path: torch has ``torch.Tag.inplace`` / ``torch.Tag.out`` (2.13+).

The op users call is registered with the 2.13 schema and tag, so
``torch.ops.<ns>.<name>`` is exactly what ``torch.library.custom_op(..., tags=...)``
would register: ``(Tensor(a0!) x) -> Tensor(a0!)`` or
``(Tensor x, *, Tensor(a1!) out) -> Tensor(a1!)``. Eager calls and ``torch.export``
use that op.

Compiled code records an untagged twin instead, ``torch.ops.<ns>.<name>__untagged``
(``<name>__untagged.<overload>`` for an overload name): the fallback path's op under
another name (:meth:`Definition.register_untagged`), running the same kernels. Inductor (2.13-2.15) lowers the tagged op
through a copy (an in-place op on a graph input copies the whole buffer back onto
itself; an out= op into a graph-input buffer writes a fresh buffer and copies it
over) and writes the untagged op's buffers in place: for a KV cache updated every
step that is a full extra read and write of the cache per call
(``benchmarks/compiled_buffers.py``). The twin is defined at the op's first trace.
"""

from __future__ import annotations

from typing import Any

from . import _compat
from ._contract import tag_for
from ._definition import Definition
from ._registration import RegisteredOp
from ._signature import helper_name

__all__ = ["UNTAGGED_SUFFIX", "NativeDefinition"]

UNTAGGED_SUFFIX = "__untagged"


class NativeDefinition(Definition):
    """An op defined on the native path: the tagged op, and (from its first trace) its untagged twin."""

    tagged = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._twin: RegisteredOp | None = None
        super().__init__(*args, **kwargs)

    def _register(self) -> RegisteredOp:
        sig = self.sig
        return self._register_op(sig.name, sig.native_schema(), sig.params, (tag_for(sig.kind),), True)

    def _untagged_registered(self) -> RegisteredOp:
        if self._twin is None:
            twin = self.register_untagged(helper_name(self.sig.name, UNTAGGED_SUFFIX))
            try:
                self._register_transform_kernel(twin)  # compiled code under torch.func calls it
            except Exception:
                twin.destroy()
                raise
            self._twin = twin
            self._share_sharding(twin.op, twin.schema_order, "nothing")
        return self._twin

    def _untagged_if_defined(self) -> RegisteredOp | None:
        return self._twin

    def paired(self) -> bool:
        if self.sig.kind != "out":
            return False
        try:
            functional = _compat.lookup_op(_compat.schema_of(self.op).name)
        except (AttributeError, RuntimeError):  # no functional op in the packet
            return False
        return _compat.to_out_variant(functional) is self.op

    def recorded_ops(self) -> tuple[Any, ...]:
        return (self.registered.op,) if self._twin is None else (self.registered.op, self._twin.op)

    def defined_names(self) -> tuple[str, ...]:
        return super().defined_names() + (() if self._twin is None else (self._twin.qualname,))

    def _destroy_ops(self) -> None:
        if self._twin is not None:
            self._twin.destroy()
            self._twin = None
        super()._destroy_ops()
