"""Lets DTensor's sharding propagation take an op that returns nothing (2.5-2.12).

The fallback path's op mutates its arguments and returns nothing (``-> ()``), and so does
the untagged op compiled code records on every path. DTensor's sharding propagation asks
``OpSchema.return_type_tensor()``, which reads the op's first return: an op with none
raised IndexError (pytorch/pytorch#167219), so a sharding rule could never serve such an
op. Measured on 2.5.1; 2.13.0 checks that the op has a return first.

The fix: ``return_type_tensor`` answers False for an op with no returns, as 2.13 does;
DTensor then runs the op on the local tensors and returns nothing, and the handle returns
the DTensors it was given. Installed when a sharding rule is registered, where
:func:`.._compat_dtensor.refuses_ops_returning_nothing`. Canary:
tests/test_dtensor.py::test_canary_dtensor_takes_ops_returning_nothing.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any, Callable

from .. import _compat_dtensor
from ._after_import import wrap_once

if TYPE_CHECKING:
    from . import ShardedOp


def at_sharding_rule(op: ShardedOp) -> None:
    if _compat_dtensor.refuses_ops_returning_nothing():
        op_schema = importlib.import_module("torch.distributed.tensor._op_schema").OpSchema
        wrap_once(op_schema, "return_type_tensor", _none_for_no_returns)


def _none_for_no_returns(original: Callable[..., bool]) -> Callable[..., bool]:
    @functools.wraps(original)
    def return_type_tensor(self: Any) -> bool:
        return len(self.op._schema.returns) > 0 and original(self)

    return return_type_tensor
