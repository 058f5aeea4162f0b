"""A write through what an op returned reaches the argument it is, compiled and exported.

An in-place op returns its first argument and an out= op its buffers, so
``op_(op_(x))`` or ``op(a, out=o).mul_(2)`` writes ``x`` / ``o`` twice. Torch's
functionalization (torch.compile's AOTAutograd, ``run_decompositions()`` of an
export) hands back what a tagged op returns as a new tensor, not as the argument it
is, and the second write was lost: wrong values from a raw
``custom_op(tags=torch.Tag.inplace / out)`` on 2.13.0 and 2.15.0, from our ops'
direct ``torch.ops`` calls, and from exported handle calls (export records the
tagged op, and the second call's argument as the first call's result). The native
op is therefore functionalized as its untagged twin (``make_functionalize_kernel``).

Each pattern runs eager, compiled, and exported then decomposed, on views of inputs
and of intermediates; all patterns of a case run in one graph.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

from tagged_ops._compat_compiler import compiler_lowers_mutable_ops
from tagged_ops.testing import define_sin_ops

from .test_export import _raw_op_fails_to_decompose

Ops = tuple[Callable[..., Any], Callable[..., Any]]  # (sin_, sin_out), as the route calls them


def out_then_in_place_on_its_result(ops: Ops, x: Tensor, o: Tensor) -> Tensor:
    sin_, sin_out = ops
    sin_(sin_out(x, out=o))
    return o * 1


def aten_in_place_on_an_out_result(ops: Ops, x: Tensor, o: Tensor) -> Tensor:
    _, sin_out = ops
    sin_out(x, out=o).mul_(2)
    return o * 1


def in_place_on_an_in_place_result(ops: Ops, x: Tensor, o: Tensor) -> Tensor:
    sin_, _ = ops
    sin_(sin_(o)).add_(x)
    return o * 1


def result_of_a_view_of_an_input(ops: Ops, x: Tensor, o: Tensor) -> Tensor:
    sin_, _ = ops
    sin_(o[2:6]).mul_(2)
    return o * 1


def result_of_a_view_of_an_intermediate(ops: Ops, x: Tensor, o: Tensor) -> Tensor:
    sin_, sin_out = ops
    t = o * 2
    sin_(t[::2]).mul_(3)
    sin_out(x[4:], out=t[4:]).add_(1)  # contiguous: Dynamo refuses a strided out= of a direct call
    return t * 1


def out_result_of_an_intermediate_kept(ops: Ops, x: Tensor, o: Tensor) -> Tensor:
    _, sin_out = ops
    t = o + 1
    r = sin_out(x, out=t)
    r.mul_(2)
    return t * 1 + r


PATTERNS = (
    out_then_in_place_on_its_result,
    aten_in_place_on_an_out_result,
    in_place_on_an_in_place_result,
    result_of_a_view_of_an_input,
    result_of_a_view_of_an_intermediate,
    out_result_of_an_intermediate_kept,
)


def _ops(ns: str, route: str) -> Ops:
    ops = define_sin_ops(ns)
    sin_, sin_out = ops.sin_, ops.sin_out
    if route == "handle":
        return sin_, sin_out
    if not sin_.is_native:
        pytest.skip("the fallback's torch.ops op returns nothing: there is no result to write through")
    return sin_.opoverload, sin_out.opoverload


def _all_patterns(ops: Ops, *inputs: Tensor) -> tuple[Tensor, ...]:
    return tuple(p(ops, inputs[2 * i], inputs[2 * i + 1]) for i, p in enumerate(PATTERNS))


@pytest.mark.parametrize("how", ["compile", "export"])
@pytest.mark.parametrize("route", ["handle", "torch.ops"])
def test_a_write_through_a_returned_alias_reaches_the_argument(path: str, ns: str, route: str, how: str) -> None:
    ops = _ops(ns, route)
    if route == "torch.ops" and how == "compile" and not compiler_lowers_mutable_ops():
        pytest.xfail(f"torch {torch.__version__}: Inductor cannot compile a direct call of a mutable op")
    inputs = [torch.randn(8) for _ in range(2 * len(PATTERNS))]
    eager_inputs = [t.clone() for t in inputs]
    expected = _all_patterns(ops, *eager_inputs)

    got_inputs = [t.clone() for t in inputs]
    if how == "compile":
        torch._dynamo.reset()
        got = torch.compile(lambda *a: _all_patterns(ops, *a), fullgraph=True)(*got_inputs)
    else:
        # What the patterns write are buffers of the module (2.2's export refuses to write
        # its inputs); the tensors they read are its inputs.
        xs, os_ = got_inputs[0::2], got_inputs[1::2]

        class AllPatterns(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                for i, o in enumerate(os_):
                    self.register_buffer(f"o{i}", o)

            def forward(self, *xs: Tensor) -> tuple[Tensor, ...]:
                args = [a for i, x in enumerate(xs) for a in (x, getattr(self, f"o{i}"))]
                return _all_patterns(ops, *args)

        exported = torch.export.export(AllPatterns(), tuple(t.clone() for t in xs), strict=False)
        try:
            decomposed = exported.run_decompositions()
        except AssertionError as e:
            if "FunctionalTensorMode" in str(e) and _raw_op_fails_to_decompose():
                pytest.xfail(f"torch {torch.__version__}: run_decompositions() cannot retrace auto_functionalized")
            raise
        module = decomposed.module()
        got = module(*xs)
        got_inputs = [a for i, x in enumerate(xs) for a in (x, getattr(module, f"o{i}"))]

    for i, pattern in enumerate(PATTERNS):
        try:
            torch.testing.assert_close(got[i], expected[i])
            torch.testing.assert_close(got_inputs[2 * i : 2 * i + 2], eager_inputs[2 * i : 2 * i + 2])
        except AssertionError as e:
            raise AssertionError(f"{pattern.__name__} ({route}, {how}) differs from eager: {e}") from None
