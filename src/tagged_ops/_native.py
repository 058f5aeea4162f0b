"""The native path: torch has ``torch.Tag.inplace`` / ``torch.Tag.out`` (2.13+).

The op is registered with the 2.13 schema and tag, so ``torch.ops.<ns>.<name>``
is exactly what ``torch.library.custom_op(..., tags=...)`` would register:
``(Tensor(a0!) x) -> Tensor(a0!)`` or ``(Tensor x, *, Tensor(a1!) out) -> Tensor(a1!)``.
Eager calls and ``torch.export`` use that op.

Under ``torch.compile`` the handle calls an untagged twin instead,
``torch.ops.<ns>.<name>__untagged`` (``<name>__untagged.<overload>`` for an
overload name; the fallback schema, same kernels).
Inductor (2.13-2.15) lowers the tagged op through a copy: an in-place op on a
graph input copies the whole buffer back onto itself, and an out= op into a
graph-input buffer writes a fresh buffer and copies it over. It writes the
untagged op's buffers in place. For a KV cache updated every step that is a
full extra read and write of the cache per call (measured in
``benchmarks/compiled_buffers.py``). Where the tagged op itself is functionalized
(a direct ``torch.ops`` call under torch.compile, ``run_decompositions()`` of an
export), its kernel at the Functionalize key records the untagged twin too
(``_functional.make_functionalize_kernel``).
"""

from __future__ import annotations

from . import _capabilities as caps
from ._fallback import register_fallback
from ._registration import Registration
from ._signature import OpSignature, helper_name

__all__ = ["register_native"]


UNTAGGED_SUFFIX = "__untagged"


def register_native(sig: OpSignature) -> Registration:
    tag = caps.tag_for(sig.kind)
    return Registration(
        sig,
        opname=sig.name,
        schema=sig.native_schema(),
        schema_order=sig.params,
        tags=(tag,),
        returns=True,
        untagged_twin=register_fallback(sig, opname=helper_name(sig.name, UNTAGGED_SUFFIX)),  # destroyed with it
    )
