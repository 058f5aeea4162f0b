"""A value read from a buffer before an op writes it keeps the value it read, compiled as in eager.

``t = b * 2; op(t, out=b); return t * 1``: Inductor computes a pending read of a
buffer (``t``, not yet stored) only when it registers the buffer's mutation, after
the kernel of a mutating custom op, so ``t`` came out computed from the written
``b``. Measured on 2.4.1, 2.13.0 and 2.15.0 with raw ``custom_op`` ops too (native
tagged ones included); tagged_ops has Inductor compute those reads before the op.
Each pattern reads the buffer an op writes, or a view of it, before the call and
uses what it read after: passed to the op or not, returned whole or reduced,
on a graph input and on an intermediate.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops._compat_compiler import compiler_lowers_mutable_ops

from ._subprocess import env_for_path
from ._views import assert_compiled_matches_eager

Patterns = dict[str, Callable[[Tensor, Tensor], Any]]


def _ops(ns: str) -> tuple[tagged_ops.TaggedOp, ...]:
    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        out.copy_(torch.sin(x))
        return out

    @tagged_ops.define_out(f"{ns}::sincos")
    def sincos(x: Tensor, *, s: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        s.copy_(torch.sin(x))
        c.copy_(torch.cos(x))
        return s, c

    @tagged_ops.define_inplace(f"{ns}::axpy_")
    def axpy_(x: Tensor, y: Tensor) -> Tensor:
        x.copy_(x * 0.5 + y)
        return x

    @tagged_ops.define_inplace(f"{ns}::sin_")
    def sin_(x: Tensor) -> Tensor:
        x.sin_()
        return x

    return sin_out, sincos, axpy_, sin_


def _patterns(
    sin_out: Callable[..., Any], sincos: Callable[..., Any], axpy_: Callable[..., Any], sin_: Callable[..., Any]
) -> Patterns:
    def out_read_passed(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        sin_out(t, out=b)
        return t * 1

    def out_read_not_passed(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        sin_out(a, out=b)
        return t * 1

    def out_read_reduced(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        sin_out(t, out=b)
        return t.sum()

    def out_read_of_intermediate(b: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
        c = b + 1
        t = c * 2
        sin_out(t, out=c)
        return t * 1, c

    def out_read_into_view(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        sin_out(t[:4], out=b[4:])
        return t * 1

    def two_outs_read_passed(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        u = a * 3
        sincos(t + u, s=b, c=a)
        return t * u

    def inplace_read_passed(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        axpy_(b, t)
        return t * 1

    def inplace_read_not_passed(b: Tensor, a: Tensor) -> Tensor:
        t = b * 2
        sin_(b)
        return t * 1

    def inplace_read_of_intermediate(b: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
        c = b + 1
        t = c * 2
        axpy_(c, t)
        return t * 1, c

    def inplace_read_into_view(b: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
        t = b * 2
        axpy_(b[2:6], t[:4])
        return t.sum(), b

    return {name: fn for name, fn in locals().items() if name not in ("sin_out", "sincos", "axpy_", "sin_")}


def _make() -> tuple[Tensor, Tensor]:
    return torch.randn(8), torch.randn(8)


def _check(patterns: Patterns) -> None:
    for name, fn in patterns.items():
        try:
            assert_compiled_matches_eager(fn, _make)
        except AssertionError as e:
            raise AssertionError(f"pattern {name}: {e}") from None


def test_reads_before_a_write_keep_their_values_compiled(path: str, ns: str) -> None:
    _check(_patterns(*_ops(ns)))


def _direct(op: tagged_ops.TaggedOp) -> Callable[..., Any]:
    """The op's ``torch.ops`` overload, called in its registered form (the fallback's out buffers by position)."""
    overload = op.opoverload
    if op.is_native:
        return overload
    return lambda *args, **buffers: overload(*args, *buffers.values())


def test_direct_torch_ops_calls_too(path: str, ns: str) -> None:
    """``torch.ops.<ns>.<op>.default`` called in compiled code, not the handle (as bitsandbytes calls)."""
    if not compiler_lowers_mutable_ops():
        pytest.xfail(
            f"torch {torch.__version__}: Inductor cannot lower a mutable custom op (call it through the handle)"
        )
    _check(_patterns(*map(_direct, _ops(ns))))


def test_what_an_op_returned_is_read_before_its_argument_is_written_again(path: str, ns: str) -> None:
    """A direct call's result is its argument: Inductor orders reads of it before later writes.

    The in-place op returns ``x2``; ``x2[2:6].mul_(2)`` is written back into the input
    at the end of the graph. Inductor took the returned tensor for a new buffer and
    wrote ``x2`` before computing ``t * 1`` from it (``t`` doubled twice, 2.13.0 native,
    found by tests/test_compile_fuzz.py; raw native ``custom_op`` too). The second
    call makes Inductor reuse the buffer that held the first call's input.
    """
    if not compiler_lowers_mutable_ops():
        pytest.xfail(
            f"torch {torch.__version__}: Inductor cannot lower a mutable custom op (call it through the handle)"
        )
    _, sincos, axpy_, _ = map(_direct, _ops(ns))

    def fn(x0: Tensor, x1: Tensor, x2: Tensor, y0: Tensor, y1: Tensor, y2: Tensor) -> Tensor:
        axpy_(x2, x1)
        t = x2[2:6]
        t.mul_(2)
        sincos(x2, s=x0, c=x1)
        u = y1 * 0.5 + y1
        sincos(u, s=y2, c=y0)
        return t * 1

    assert_compiled_matches_eager(fn, lambda: tuple(torch.randn(8) for _ in range(6)))


_FIRST_COMPILE = """
import torch, tagged_ops

@tagged_ops.define_out("first_compile::sin_out")
def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(torch.sin(x))
    return out

def f(b):
    t = b * 2
    sin_out(t, out=b)
    return t * 1

b = torch.randn(8)
expected, got = f(b.clone()), torch.compile(f, fullgraph=True)(b.clone())
torch.testing.assert_close(got, expected)
print("ok")
"""


@pytest.mark.parametrize("fallback", [False, True], ids=["native", "fallback"])
def test_the_first_compile_of_a_fresh_process(fallback: bool, tmp_path: Path) -> None:
    """Inductor is not loaded yet when the op is defined and Dynamo first traces it (a user's first compile)."""
    if not fallback and not tagged_ops.NATIVE_TAGS:
        pytest.skip(f"torch {torch.__version__} has no native tagged custom ops")
    env = {**env_for_path(fallback=fallback), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", _FIRST_COMPILE], env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"exit status {run.returncode}\n" + run.stdout[-2000:] + run.stderr[-4000:]
    assert run.stdout.strip().endswith("ok")
