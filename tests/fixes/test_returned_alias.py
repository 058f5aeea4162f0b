"""_fixes/returned_alias.py: a write through what a native tagged op returned reaches its argument.

Ours: tests/test_returned_alias.py (both paths, handle and torch.ops, compiled and exported).
"""

from __future__ import annotations

import pytest

import tagged_ops

from .._raw_programs import _last_json_line

_RAW = r"""
import json, torch

@torch.library.custom_op("raw_alias::twice_", mutates_args=("x",), tags=torch.Tag.inplace)
def twice_(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    return x

@twice_.register_fake
def _(x):
    return x

def program(x):
    torch.ops.raw_alias.twice_(torch.ops.raw_alias.twice_(x))
    return x * 1

eager = program(torch.ones(3)).tolist()
try:
    compiled = torch.compile(program, fullgraph=True)(torch.ones(3)).tolist()
    print(json.dumps(compiled != eager))
except Exception:
    print(json.dumps(None))
"""


def test_canary_a_raw_tagged_op_loses_the_write() -> None:
    """A raw ``custom_op(tags=torch.Tag.inplace)`` called on what it returned writes its argument once
    when compiled (eager: twice). Fails once torch keeps the write: retire the fix."""
    if not tagged_ops.NATIVE_TAGS:
        pytest.skip("no native tagged ops on this torch: nothing to fix")
    assert _last_json_line(_RAW) is True
