"""Contract 8: torch.compile(fullgraph=True) never breaks the graph, and matches eager."""

from __future__ import annotations

from typing import Callable

import pytest
import torch
import torch._dynamo.testing
from torch import Tensor

import tagged_ops
from tagged_ops._selfcheck import SinOps, define_sin_ops


@pytest.fixture
def ops(path: str, ns: str) -> SinOps:
    return define_sin_ops(ns)


def _patterns(ops: SinOps) -> dict[str, tuple[Callable[..., Tensor | None], Callable[[], tuple[Tensor, ...]]]]:
    sin_, sin_out = ops.sin_, ops.sin_out

    def a(x: Tensor) -> Tensor:  # in-place on a graph input
        return sin_(x)

    def b(x: Tensor, o: Tensor) -> Tensor:  # out= into a graph-input buffer
        return sin_out(x, out=o)

    def c(x: Tensor, o: Tensor) -> Tensor:  # out= into a slice of a graph input
        sin_out(x, out=o[1:3])
        return o

    def d(x: Tensor) -> Tensor:  # in-place on a slice of a graph input
        sin_(x[1:3])
        return x

    def e(x: Tensor) -> Tensor:  # in-place on an intermediate
        y = x + 1
        sin_(y)
        return y * 2

    def f(x: Tensor, o: Tensor) -> Tensor:  # chained: the out= result feeds the in-place op
        return sin_(sin_out(x, out=o)) + 1

    return {
        "a-inplace-input": (a, lambda: (torch.randn(8),)),
        "b-out-input": (b, lambda: (torch.randn(8), torch.empty(8))),
        "c-out-slice": (c, lambda: (torch.randn(2), torch.zeros(4))),
        "d-inplace-slice": (d, lambda: (torch.randn(4),)),
        "e-inplace-intermediate": (e, lambda: (torch.randn(8),)),
        "f-chained": (f, lambda: (torch.randn(8), torch.empty(8))),
    }


@pytest.mark.parametrize(
    "pattern",
    ["a-inplace-input", "b-out-input", "c-out-slice", "d-inplace-slice", "e-inplace-intermediate", "f-chained"],
)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fullgraph_matches_eager(ops: SinOps, pattern: str, dynamic: bool) -> None:
    fn, make = _patterns(ops)[pattern]
    torch.manual_seed(0)
    eager_args = make()
    compiled_args = tuple(t.clone() for t in eager_args)
    expected = fn(*eager_args)
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    got = torch.compile(fn, backend=counter, fullgraph=True, dynamic=dynamic)(*compiled_args)
    assert counter.frame_count == 1
    torch.testing.assert_close(got, expected)
    for mutated, reference in zip(compiled_args, eager_args, strict=True):
        torch.testing.assert_close(mutated, reference)


def test_handle_call_is_traced_not_skipped(ops: SinOps) -> None:
    """The op lands in the graph as one call of torch.ops.<ns>.<name>."""
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> Callable[..., object]:
        graphs.append(gm)
        return gm.forward

    x, o = torch.randn(4), torch.empty(4)
    torch.compile(lambda x, o: ops.sin_out(ops.sin_(x), out=o), backend=backend, fullgraph=True)(x, o)
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    names = {str(t) for t in targets}
    assert any(ops.sin_.qualname.split("::")[1] in n for n in names), names
    assert any(ops.sin_out.qualname.split("::")[1] in n for n in names), names


def test_numpy_kernels_compile(ops: SinOps) -> None:
    x = torch.randn(6)
    o = torch.empty(6)
    expected = x.sin()
    torch.compile(lambda x, o: ops.numpy_sin_out(x, out=o), fullgraph=True)(x, o)
    torch.testing.assert_close(o, expected)
    torch.compile(lambda x: ops.numpy_sin_(x), fullgraph=True)(x)
    torch.testing.assert_close(x, expected)


def test_is_native_matches_path(ops: SinOps, path: str) -> None:
    assert tagged_ops.is_native(ops.sin_) == (path == "native")
