"""register_kernel per device, and the optional register_* methods where this torch has them."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops._compat import has_custom_op_method

from ._subprocess import run_program


def _sin_(ns: str) -> tagged_ops.TaggedOp:
    @tagged_ops.define_inplace(f"{ns}::sin_")
    def sin_(x: Tensor) -> Tensor:
        x.sin_()
        return x

    return sin_


@pytest.mark.parametrize("name", ["register_torch_dispatch", "register_vmap", "register_autocast"])
def test_optional_methods_exist_exactly_where_torch_has_them(path: str, ns: str, name: str) -> None:
    assert hasattr(_sin_(ns), name) == has_custom_op_method(name)


def test_register_kernel_for_one_device_overrides_the_default(path: str, ns: str) -> None:
    op = _sin_(ns)

    @op.register_kernel("cpu")
    def _(x: Tensor) -> Tensor:
        x.cos_()
        return x

    x = torch.randn(3)
    expected = x.cos()
    assert op(x) is x
    torch.testing.assert_close(x, expected)
    # registering again replaces it
    op.register_kernel("cpu", lambda x: x.neg_())
    y = torch.ones(2)
    assert op(y) is y and torch.equal(y, -torch.ones(2))


@pytest.mark.skipif(not has_custom_op_method("register_vmap"), reason="this torch has no register_vmap for custom ops")
def test_register_vmap_one_rule_on_both_paths(path: str, ns: str) -> None:
    op = _sin_(ns)
    calls = []

    @op.register_vmap
    def _(info, in_dims, x):  # noqa: ANN001, ANN202 - torch's vmap-rule signature
        calls.append(in_dims)
        x.sin_()
        return x, in_dims[0]

    xs = torch.randn(3, 4)
    expected = xs.sin()
    torch.vmap(op)(xs)
    torch.testing.assert_close(xs, expected)
    assert calls == [(0,)]


@pytest.mark.skipif(
    not has_custom_op_method("register_torch_dispatch"), reason="this torch has no register_torch_dispatch"
)
def test_register_torch_dispatch_one_rule_on_both_paths(path: str, ns: str) -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    op = _sin_(ns)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            return func(*args, **(kwargs or {}))

    seen = []

    @op.register_torch_dispatch(Mode)
    def _(mode, func, types, args, kwargs):  # noqa: ANN001, ANN202
        seen.append(func)
        args[0].zero_()
        return args[0]

    x = torch.randn(3)
    with Mode():
        assert op(x) is x
    assert torch.equal(x, torch.zeros(3)) and len(seen) == 1


# In a fresh process: this suite's own conftest imports torch's compiler.
_HELPERS_WAIT_FOR_THE_COMPILER = """
import sys, torch, tagged_ops
from tagged_ops._compat import dispatcher_entry_exists

@tagged_ops.define_inplace("helpers_wait::sin_")
def sin_(x: torch.Tensor) -> torch.Tensor:
    return x.sin_()

x = torch.randn(3)
sin_(x.clone())
helpers = ("helpers_wait::sin___functional", "helpers_wait::sin___untagged")
assert not any(dispatcher_entry_exists(name) for name in helpers), "defined before the compiler loaded"
import torch._dynamo  # compiled code loaded from a cache may name them without tracing
assert dispatcher_entry_exists("helpers_wait::sin___functional")
assert dispatcher_entry_exists("helpers_wait::sin___untagged") == sin_.is_native
torch.compile(sin_, fullgraph=True)(x.clone())
expected = x.sin()
# the functional twin of the op compiled code records (the native path's __untagged twin, or the op)
torch.testing.assert_close(torch.ops.helpers_wait.sin___functional(x), expected)
assert not torch.equal(x, expected), "the functional twin wrote its input"
print("ok")
"""


def test_helpers_wait_for_the_compiler_and_run_as_the_op(path: str) -> None:
    """Defining and calling an op registers its name only; importing torch's compiler adds its helpers."""
    run_program(_HELPERS_WAIT_FOR_THE_COMPILER, fallback=path == "fallback")


_FIRST_CALL_COMPILED = """
import torch, tagged_ops

@tagged_ops.define_inplace("first_call::scale_")
def scale_(x: torch.Tensor, s: float) -> torch.Tensor:
    return x.mul_(s)

@tagged_ops.define_out("first_call::sin.out")
def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return torch.sin(x, out=out)

def generated(op):
    return type(op).__call__.__name__ != "first_call"

assert not (generated(scale_) or generated(sin_out)), "the handles' calls were generated at definition"
import torch._dynamo
assert generated(scale_) and generated(sin_out), "not generated when the compiler loaded"

def program(w, buf):  # w: a leaf that requires grad; buf: a plain input
    h = w * 2  # an intermediate
    scale_(h.detach()[1:], 3.0)  # writes a view of the intermediate through .detach()
    scale_(w.detach()[:2], 0.5)  # writes a view of the leaf through .detach()
    sin_out(w.detach(), out=buf[1:])  # reads through .detach(), writes a view of an input
    return buf, h, (h * w).sum()

def raw(w, buf):  # the same step with torch's own in-place and out= ops
    h = w * 2
    h.detach()[1:].mul_(3.0)
    w.detach()[:2].mul_(0.5)
    torch.sin(w.detach(), out=buf[1:])
    return buf, h, (h * w).sum()

def step(fn):
    w, buf = torch.arange(1.0, 5.0).requires_grad_(), torch.zeros(5)
    out = fn(w, buf)
    out[-1].backward()
    return [*out, w.detach(), w.grad]

expected = step(raw)
for got in (step(torch.compile(program, fullgraph=True)), step(program)):  # the handles' first call compiled
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)
print("ok")
"""


def test_a_first_call_compiles_as_eager_calls(path: str) -> None:
    """Defining an op generates no call; importing the compiler generates it, so a first call traced by
    Dynamo (views of inputs, of intermediates, of a leaf through ``.detach()``, a training step) is right."""
    assert run_program(_FIRST_CALL_COMPILED, fallback=path == "fallback").strip() == "ok"


def _autocast_ops(ns: str) -> tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp]:
    @tagged_ops.define_out(f"{ns}::mul_out")
    def mul_out(x: Tensor, y: Tensor, *, out: Tensor) -> Tensor:
        assert x.dtype == y.dtype == torch.bfloat16, "inputs are cast"
        torch.mul(x, y, out=out)
        return out

    @tagged_ops.define_inplace(f"{ns}::add_")
    def add_(x: Tensor, y: Tensor) -> Tensor:
        assert x.dtype == torch.float32 and y.dtype == torch.bfloat16, "only what the op reads is cast"
        x.add_(y)
        return x

    for op in (mul_out, add_):
        op.register_autocast("cpu", torch.bfloat16)
    return mul_out, add_


@pytest.mark.skipif(not has_custom_op_method("register_autocast"), reason="this torch has no register_autocast")
def test_register_autocast_writes_the_callers_tensors(path: str, ns: str) -> None:
    """Before: the fallback wrote a cast copy of the out buffer (the buffer stayed unwritten), native
    refused out= ops, and in-place ops mutated a cast copy on both paths (native too)."""
    mul_out, add_ = _autocast_ops(ns)
    x, y = torch.full((3,), 1.5), torch.full((3,), 3.0)
    out, acc = torch.zeros(3), torch.ones(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert mul_out(x, y, out=out) is out
        assert add_(acc, y) is acc
    assert out.dtype == acc.dtype == torch.float32
    torch.testing.assert_close(out, torch.full((3,), 4.5))
    torch.testing.assert_close(acc, torch.full((3,), 4.0))
    # torch.library.register_autocast by name comes to the same rule
    torch.library.register_autocast(mul_out.qualname, "cpu", torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mul_out(x, y, out=out.zero_())
    torch.testing.assert_close(out, torch.full((3,), 4.5))


@pytest.mark.skipif(not has_custom_op_method("register_autocast"), reason="this torch has no register_autocast")
def test_register_autocast_compiled_equals_eager_on_views(path: str, ns: str) -> None:
    mul_out, add_ = _autocast_ops(ns)

    def f(x: Tensor, out: Tensor, acc: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mul_out(x[1:], x[:-1], out=out[1:])  # views of inputs
            t = x * 2 + 1  # an intermediate, and views of it
            add_(t[:3], x[2:5])
            mul_out(t[::2], t[1::2], out=acc[:3])
            add_(acc[1:], out[:-1])
        return out, acc, t

    def inputs() -> tuple[Tensor, Tensor, Tensor]:
        return torch.linspace(-1, 1, 6), torch.zeros(6), torch.ones(6)

    expected = f(*inputs())
    got_inputs = inputs()
    got = torch.compile(f, fullgraph=True)(*got_inputs)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got_inputs[1], expected[0])
    torch.testing.assert_close(got_inputs[2], expected[1])


def test_vmap_of_an_in_place_op_without_a_rule(path: str, ns: str) -> None:
    """Native in-place ops get torch's batched fallback; the fallback path's untagged op gets a loop of its own
    (before: "Batching rule not implemented"), on every release (2.2-2.4 through our register_vmap backport)."""

    @tagged_ops.define_inplace(f"{ns}::add_")
    def add_(x: Tensor, y: Tensor) -> Tensor:
        x.add_(y)
        return x

    xs, ys = torch.zeros(2, 3), torch.arange(6.0).reshape(3, 2)
    torch.vmap(add_, in_dims=(0, 1))(xs, ys)
    torch.testing.assert_close(xs, ys.T)
    x = torch.zeros(3)
    with pytest.raises(RuntimeError, match="vmap"):
        torch.vmap(add_, in_dims=(None, 0))(x, torch.ones(2, 3))
    assert torch.equal(x, torch.zeros(3))
