"""The native path: torch has ``torch.Tag.inplace`` / ``torch.Tag.out`` (2.13+).

The op is registered with the 2.13 schema and tag, so ``torch.ops.<ns>.<name>``
is exactly what ``torch.library.custom_op(..., tags=...)`` would register:
``(Tensor(a0!) x) -> Tensor(a0!)`` or ``(Tensor x, *, Tensor(a1!) out) -> Tensor(a1!)``.
"""

from __future__ import annotations

import torch

from ._registration import Registration
from ._signature import OpSignature

__all__ = ["register_native"]


def register_native(sig: OpSignature) -> Registration:
    tag = torch.Tag.inplace if sig.kind == "inplace" else torch.Tag.out  # type: ignore[attr-defined]
    return Registration(
        sig,
        opname=sig.name,
        schema=sig.native_schema(),
        schema_order=sig.params,
        tags=(tag,),
        returns=True,
    )
