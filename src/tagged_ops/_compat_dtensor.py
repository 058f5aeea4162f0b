"""What ``torch.distributed.tensor`` (DTensor) offers tagged_ops: its sharding-rule registry, probed.

Laid out as ``_compat``: one section per upstream name, the release that has it, and a
``# Breakpoint:`` line. Nothing here runs at import: ``torch.distributed.tensor`` is
imported only when a sharding rule is registered (or a DTensor was already made).
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any, Callable, Sequence

import torch

__all__ = [
    "forget_sharding",
    "key_cache_by",
    "refuses_ops_returning_nothing",
    "register_sharding",
    "spec_type",
]

# -- torch.distributed.tensor.experimental.register_sharding (2.5) -----------------------
# Breakpoint: pytorch/pytorch#131108 (register_sharding, 2.5).


def register_sharding() -> Callable[..., Any] | None:
    """DTensor's ``register_sharding(op)(rule)``, or None where torch has none (before 2.5, or a
    build without ``torch.distributed``)."""
    if not torch.distributed.is_available():
        return None
    try:
        module = importlib.import_module("torch.distributed.tensor.experimental")
    except ImportError:
        return None
    return getattr(module, "register_sharding", None)


def spec_type() -> type:
    """``DTensorSpec``: what a sharding rule is given for each DTensor argument."""
    return importlib.import_module("torch.distributed.tensor._dtensor_spec").DTensorSpec  # type: ignore[no-any-return]


def forget_sharding(op: Any) -> None:
    """Drop DTensor's sharding strategy for ``op`` (its definition is gone), and the propagations
    DTensor cached with it, so a later definition of the name starts without it."""
    module = sys.modules.get("torch.distributed.tensor")
    if module is None:
        return
    propagator = module.DTensor._op_dispatcher.sharding_propagator
    propagator.op_strategy_funcs.pop(op, None)
    propagator.op_to_schema_info.pop(op, None)
    cached = propagator.propagate_op_sharding
    clear = getattr(cached, "cache_clear", None) or cached.cache.cache_clear  # 2.5: no cache_clear of its own
    clear()


def key_cache_by(op: Any, keyword_names: Sequence[str]) -> None:
    """Make ``keyword_names`` (keyword-only arguments of ``op``) part of the key DTensor caches
    ``op``'s sharding decisions by (``RuntimeSchemaInfo.static_kwargkey``)."""
    module = sys.modules["torch.distributed.tensor"]
    propagator = module.DTensor._op_dispatcher.sharding_propagator
    info = propagator.op_to_schema_info.get(op)
    if info is None:
        return
    known = list(info.static_kwargkey or [])
    info.static_kwargkey = known + [n for n in keyword_names if n not in known]


# -- OpSchema.return_type_tensor with no returns (2.5-2.x; fixed by 2.13) ----------------
# Breakpoint: upstream PR not identified (2.13.0 checks ``len(returns) > 0``).


@functools.cache
def refuses_ops_returning_nothing() -> bool:
    """Whether DTensor's sharding propagation fails (IndexError) on an op that returns nothing, as
    the fallback's untagged op does (``_fixes/dtensor_ops_returning_nothing.py``): asked of
    ``OpSchema.return_type_tensor`` on a stand-in schema with no returns."""
    op_schema = importlib.import_module("torch.distributed.tensor._op_schema").OpSchema

    class _NoReturns:
        class op:  # noqa: N801 - stands for an OpOverload
            class _schema:  # noqa: N801
                returns: list[Any] = []

    try:
        op_schema.return_type_tensor(_NoReturns())
    except IndexError:
        return True
    return False
