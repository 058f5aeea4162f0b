"""The fallback path: torch without native tags (2.2-2.12), or ``TAGGED_OPS_FALLBACK=1``.

Older ``custom_op`` refuses both tagged shapes (keyword-only Tensor arguments,
returning an input), so the op is registered untagged: it mutates and returns
nothing, with out= buffers as positional arguments, e.g.
``(Tensor(a0!) x) -> ()`` or ``(Tensor x, Tensor(a1!) out) -> ()``. The handle
returns the mutated tensors, so callers see the 2.13 contract.
"""

from __future__ import annotations

from . import _capabilities as caps
from ._registration import Registration
from ._signature import OpSignature

__all__ = ["register_fallback", "separate_fallback_compile_caches"]


def register_fallback(sig: OpSignature, *, opname: str | None = None) -> Registration:
    return Registration(
        sig,
        opname=opname or sig.name,
        # 2.2 cannot functionalize a call that relies on a schema default (see
        # caps.SCHEMA_DEFAULTS_SURVIVE_FUNCTIONALIZATION); the handle passes every argument.
        schema=sig.fallback_schema(defaults=caps.SCHEMA_DEFAULTS_SURVIVE_FUNCTIONALIZATION),
        schema_order=sig.fallback_params(),
        tags=(),
        returns=False,
    )


_FALLBACK_CACHE_MARK = "tagged_ops-fallback"


def separate_fallback_compile_caches() -> None:
    """Give forced-fallback processes compile-cache keys of their own.

    Inductor's on-disk caches key a graph by its text, which names the op but not
    its schema: the same name compiled tagged and untagged would share an entry
    (2.13: ``TypeError: expected Tensor() for op``). The cache key tag is in every key.
    """
    caps.add_compile_cache_key_tag(_FALLBACK_CACHE_MARK)
