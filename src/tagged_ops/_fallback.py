"""The fallback path: torch without native tags (2.2-2.12), ``TAGGED_OPS_FALLBACK=1``, or ``fallback=True``.

Older ``custom_op`` refuses both tagged shapes (keyword-only Tensor arguments,
returning an input), so the op is registered untagged: it mutates and returns
nothing, with out= buffers as positional arguments, e.g. ``(Tensor(a0!) x) -> ()``
or ``(Tensor x, Tensor(a1!) out) -> ()``. The handle returns the mutated tensors,
so callers see the 2.13 contract. Compiled code records the op itself.
"""

from __future__ import annotations

from typing import Any

from ._definition import Definition
from ._registration import RegisteredOp

__all__ = ["FallbackDefinition"]


class FallbackDefinition(Definition):
    """An op defined on the fallback path: one untagged op on the dispatcher."""

    def __init__(self, *args: Any, forced: bool, **kwargs: Any) -> None:
        self.forced_fallback = forced
        super().__init__(*args, **kwargs)

    def _register(self) -> RegisteredOp:
        return self.register_untagged(self.sig.name)

    def _untagged_registered(self) -> RegisteredOp:
        return self.registered
