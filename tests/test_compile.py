"""Torch.compile matches eager, under autograd too; fullgraph=True never breaks the graph.

The one graph break: an in-place call under autograd (an argument requires grad),
which runs outside the graph so that a backward through it raises as in eager.
"""

from __future__ import annotations

import inspect
import re
from typing import Callable

import pytest
import torch
import torch._dynamo.testing
from torch import Tensor

import tagged_ops
from tagged_ops.testing import SinOps, define_sin_ops


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


# -- under autograd: compiled code raises where eager raises ------------------------

BACKWARD = "Trying to backward through"
OUT_REFUSED = "sin_out(): functions with out=... arguments don't support automatic differentiation"


def _inplace_under_autograd(ops: SinOps) -> dict[str, Callable[[Tensor], Tensor]]:
    sin_ = ops.sin_

    def intermediate(x: Tensor) -> Tensor:
        y = x * 2
        sin_(y)
        return y * 3

    def view_of_intermediate(x: Tensor) -> Tensor:
        y = x * 2
        sin_(y[1:3])
        return y * 3

    def strided_view_of_intermediate(x: Tensor) -> Tensor:
        y = x * 2
        sin_(y[::2])
        return y + 1

    def result(x: Tensor) -> Tensor:
        return sin_(x + 1) * 3

    return {
        "intermediate": intermediate,
        "view-of-intermediate": view_of_intermediate,
        "strided-view-of-intermediate": strided_view_of_intermediate,
        "result": result,
    }


@pytest.mark.parametrize("pattern", ["intermediate", "view-of-intermediate", "strided-view-of-intermediate", "result"])
def test_inplace_under_autograd_compiles_like_eager(ops: SinOps, pattern: str) -> None:
    """Same values, and the backward through the mutation raises, compiled or not.

    A graph cannot hold a backward that raises, so the call runs outside it (one
    graph break, only where an argument requires grad): compiled code never
    gives the silent wrong gradient that eager refuses.
    """
    fn = _inplace_under_autograd(ops)[pattern]
    x = torch.randn(4, requires_grad=True)
    expected = fn(x)
    got = torch.compile(fn)(x)
    torch.testing.assert_close(got, expected)
    for result in (expected, got):
        with pytest.raises(RuntimeError, match=re.escape(f"{BACKWARD} {ops.sin_.qualname}")):
            result.sum().backward()
    assert x.grad is None


def test_inplace_under_autograd_poisons_the_mutated_tensor_when_compiled(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::add_")
    def add_(x: Tensor, y: Tensor) -> Tensor:
        x.add_(y)
        return x

    def step(cache: Tensor, w: Tensor) -> Tensor:
        add_(cache[1:], w * 2)  # e.g. a KV-cache write of values that require grad
        return cache.sum()

    w = torch.randn(3, requires_grad=True)
    eager_cache, compiled_cache = torch.zeros(4), torch.zeros(4)
    expected = step(eager_cache, w)
    got = torch.compile(step)(compiled_cache, w)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(compiled_cache, eager_cache)
    for result in (expected, got):
        with pytest.raises(RuntimeError, match=re.escape(BACKWARD)):
            result.backward()
    assert w.grad is None


def test_inplace_on_a_leaf_requiring_grad_is_refused_when_compiled(ops: SinOps) -> None:
    x = torch.randn(3, requires_grad=True)
    before = x.detach().clone()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        torch.compile(lambda x: ops.sin_(x) * 2)(x)
    assert torch.equal(x.detach(), before) and x._version == 0


def test_inplace_under_autograd_with_fullgraph_says_why(ops: SinOps) -> None:
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(torch._dynamo.exc.Unsupported) as info:
        torch.compile(lambda x: ops.sin_(x * 2) * 3, fullgraph=True)(x)
    assert ops.sin_.qualname in str(info.value)  # Dynamo names the function; newer releases quote why
    if "reason" in inspect.signature(torch.compiler.disable).parameters:
        assert f"{ops.sin_.qualname}: an in-place call under autograd runs outside the graph" in str(info.value)


def test_inplace_without_grad_stays_in_one_graph(ops: SinOps) -> None:
    """Only a call that would take eager's autograd path leaves the graph (fullgraph raises otherwise)."""
    x = torch.randn(4, requires_grad=True)
    compiled = torch.compile(lambda x: ops.sin_(x * 2) * 3, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), (x * 2).sin() * 3)
    torch.testing.assert_close(compiled(x.detach()), (x.detach() * 2).sin() * 3)


@pytest.mark.parametrize("how", ["handle", "torch.ops"])
def test_out_under_autograd_is_refused_when_compiled_untouched(ops: SinOps, how: str) -> None:
    sin_out = ops.sin_out

    def fn(x: Tensor, o: Tensor) -> Tensor:
        if how == "handle":
            return sin_out(x * 2, out=o)
        args, kwargs = sin_out.to_op_arguments(x * 2, out=o)
        sin_out.opoverload(*args, **kwargs)
        return o

    x, o = torch.randn(3, requires_grad=True), torch.zeros(3)
    with pytest.raises(RuntimeError, match=re.escape(OUT_REFUSED)):
        fn(x, o)
    with pytest.raises(Exception, match=re.escape(OUT_REFUSED)):
        torch.compile(fn)(x, o)
    assert torch.equal(o, torch.zeros(3)) and o._version == 0


def test_out_under_autograd_is_refused_on_fake_tensors(ops: SinOps) -> None:
    """As on 2.13, where the refusal comes before any kernel, fake ones included."""
    sin_out = ops.sin_out
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x, o = torch.randn(3, requires_grad=True), torch.empty(3)
        with pytest.raises(RuntimeError, match=re.escape(OUT_REFUSED)):
            sin_out(x, out=o)
        args, kwargs = sin_out.to_op_arguments(x, out=o)
        with pytest.raises(RuntimeError, match=re.escape(OUT_REFUSED)):
            sin_out.opoverload(*args, **kwargs)
        with torch.no_grad():
            assert sin_out(x, out=o) is o
