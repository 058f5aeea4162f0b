"""Makes DTensor's sharding cache tell calls apart by their keyword-only Tensors (2.5-2.15).

DTensor caches each op's sharding decision by the call's arguments, but of its keyword
arguments it keys only those the op's ``RuntimeSchemaInfo.static_kwargkey`` names, and
``register_sharding`` names none that are Tensors. A native out= op takes its buffers by
keyword only, so a second call with the same inputs and an ``out`` placed otherwise reused
the first call's decision: the ``out`` DTensor came back re-placed, silently (2.15.0), or
the call failed (2.13.0 in a redistribution, 2.5.1 on an assertion); raw ops with a
keyword-only out buffer too.

The fix: the keyword-only Tensor parameters of an op a rule is registered on are added to
its ``static_kwargkey``, so they key the cache (a more precise key: harmless where torch
keys them itself). Installed with each sharding rule. Canary:
tests/test_dtensor.py::test_canary_dtensor_keys_its_cache_without_keyword_tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _compat_dtensor

if TYPE_CHECKING:
    from . import ShardedOp


def at_sharding_rule(op: ShardedOp) -> None:
    if op.keyword_tensors:
        _compat_dtensor.key_cache_by(op.op, op.keyword_tensors)
