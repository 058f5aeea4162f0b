"""tagged_ops' process-wide registries stay bounded however often ops are defined again (a module reload).

docs/ARCHITECTURE.md lists each registry, where it lives, and how it is emptied;
this test defines two ops a hundred times, compiling every tenth time, and checks
that each registry ends the size it started at, except the one that keeps every
op object on purpose (``_anchor._PYTHON_OPS``), which grows by the ops each
definition registered.
"""

from __future__ import annotations

import gc
import linecache
import sys
from typing import Any

import pytest
import torch

import tagged_ops
from tagged_ops import _anchor, _codegen, _compat, _definition, _fixes, _names
from tagged_ops._compat_compiler import compiler_lowers_mutable_ops
from tagged_ops._fixes import _after_import, out_variant_pairing, reads_before_writes


def _sizes() -> dict[str, int]:
    return {
        "_names._NAMES": len(_names._NAMES),
        "names with a definition": sum(name.definition is not None for name in _names._NAMES.values()),
        "live handles": sum(len(name.handles) for name in _names._NAMES.values()),
        "OPDEFS entries kept": sum(name.entry is not None for name in _names._NAMES.values()),
        "torch OPDEFS": len(_compat.OPDEFS or {}),
        "_anchor._ANCHORS": len(_anchor._ANCHORS),
        "out_variant_pairing._PAIR": len(out_variant_pairing._PAIR),
        "reads_before_writes._INSTALLED": len(reads_before_writes._INSTALLED),
        "reads_before_writes._PENDING": len(reads_before_writes._PENDING),
        "_fixes._defined": len(_fixes._defined),
        "_after_import._WAITING": len(_after_import._WAITING),
        "_after_import._ONCE_LOADED": len(_after_import._ONCE_LOADED),
        "_definition._WAITING": len(_definition._WAITING),
        "sys.meta_path": len(sys.meta_path),
        "_codegen._CODE": len(_codegen._CODE),
        "linecache (generated code)": sum(1 for name in linecache.cache if name.startswith("<tagged_ops")),
    }


def _define_ops(ns: str) -> tuple[Any, Any]:
    @tagged_ops.define_out(f"{ns}::sin.out", pair=True)
    def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.sin(x, out=out)

    @tagged_ops.define_inplace(f"{ns}::sin_")
    def sin_(x: torch.Tensor) -> torch.Tensor:
        return x.sin_()

    return sin_out, sin_


def _compile(ops: tuple[Any, Any]) -> None:
    sin_out, sin_ = ops
    torch.compiler.reset()
    x = torch.randn(3)
    result = torch.compile(lambda x, o: sin_(sin_out(x, out=o)), fullgraph=True)(x, torch.empty(3))
    torch.testing.assert_close(result, x.sin().sin())


def test_redefinitions_leave_every_registry_its_size(path: str, ns: str) -> None:
    if not compiler_lowers_mutable_ops():
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no mutable op: the lowering fix never installs")
    ops = _define_ops(ns)
    _compile(ops)
    gc.collect()
    before, kept = _sizes(), len(_anchor._PYTHON_OPS)
    for i in range(100):
        ops = _define_ops(ns)
        if i % 10 == 0:
            _compile(ops)
    ops = _define_ops(ns)
    _compile(ops)  # the same state as before the loop: defined, then compiled once
    gc.collect()
    assert _sizes() == before
    # one Python op object per op each definition registered (the op, and from its first trace
    # its helpers), kept because a dispatcher entry may hold it without a reference
    assert 0 < len(_anchor._PYTHON_OPS) - kept <= 101 * 2 * 3


def _define_scale_out(ns: str) -> tagged_ops.TaggedOp:
    """The first op of a shape: the generated code the next op of that shape should reuse."""

    @tagged_ops.define_out(f"{ns}::scale_out")
    def scale_out(x: torch.Tensor, alpha: float = 2.0, *, out: torch.Tensor) -> torch.Tensor:
        return torch.mul(x, alpha, out=out)

    return scale_out


def test_ops_of_one_shape_share_their_generated_code_and_keep_their_own_names(path: str, ns: str) -> None:
    """Generated code names parameters by position: a second op of the same shape compiles nothing new,
    and each op still binds its callers' arguments by its own parameter names."""

    scale_out = _define_scale_out(ns)
    compiled = len(_codegen._CODE)

    @tagged_ops.define_out(f"{ns}::shift_out")
    def shift_out(src: torch.Tensor, by: float = 2.0, *, out: torch.Tensor) -> torch.Tensor:
        return torch.add(src, by, out=out)

    assert len(_codegen._CODE) == compiled
    x = torch.ones(3)
    torch.testing.assert_close(scale_out(x=x, alpha=3.0, out=torch.empty(3)), torch.full((3,), 3.0))
    torch.testing.assert_close(shift_out(src=x, by=1.0, out=torch.empty(3)), torch.full((3,), 2.0))
    torch.testing.assert_close(shift_out(x, out=torch.empty(3)), torch.full((3,), 3.0))  # its own default
    with pytest.raises(RuntimeError, match="Unknown keyword argument 'alpha'"):
        shift_out(x, alpha=1.0, out=torch.empty(3))
    with pytest.raises(RuntimeError, match="missing value for argument 'out'"):
        shift_out(x)


def test_out_buffers_of_their_own_names_share_the_generated_code_too(path: str, ns: str) -> None:
    """A keyword-only buffer is passed on by its keyword: the generated calls name it by position,
    and each op's code carries its own keyword, so the kernel gets ``result=``, never ``out=``."""

    scale_out = _define_scale_out(ns)
    compiled = len(_codegen._CODE)

    @tagged_ops.define_out(f"{ns}::shift_out")
    def shift_out(src: torch.Tensor, by: float = 2.0, *, result: torch.Tensor) -> torch.Tensor:
        return torch.add(src, by, out=result)

    assert len(_codegen._CODE) == compiled
    x, buffer = torch.ones(3), torch.empty(3)
    assert shift_out(x, result=buffer) is buffer
    torch.testing.assert_close(buffer, torch.full((3,), 3.0))
    assert scale_out(x, out=buffer) is buffer  # the first op keeps its keyword
    torch.testing.assert_close(buffer, torch.full((3,), 2.0))
