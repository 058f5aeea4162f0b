"""torch 2.13's ``custom_op(..., tags=torch.Tag.inplace | torch.Tag.out)``, case by case, through tagged_ops.

Re-expresses the tagged-op behaviour that PyTorch's test/test_custom_ops.py
covers (``-k inplace_tag``, ``-k out_tag``, ``-k infer_schema_supported``,
``-k library_register_autograd``), written from 2.13's custom_op, infer_schema
and register_autograd sources: inferred schemas, call-time rules and their
messages, autograd refusals. Runs on every release and both paths; each case
that cannot hold through tagged_ops is an xfail naming its reason.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Optional, Sequence

import numpy as np
import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat_compiler
from tagged_ops._switches import fallback_forced

from ._upstream import FAKE_RETURN_IGNORED, LEAF_REFUSED


def _mul_(
    x: Tensor,
    dims: Sequence[int],
    n: int = 2,
    f: float = 0.5,
    flag: bool = True,
    mode: str = "add",
    dtype: torch.dtype = torch.float32,
    bias: Optional[Tensor] = None,
    acc: Optional[torch.dtype] = None,
) -> Tensor:
    x.mul_(n * f)
    return x


def _mul_out(x: Tensor, scale: float = 1.0, *, out: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    torch.mul(x, scale, out=out)
    return out


# What 2.13's infer_schema(fn, mutates_args=..., tags=...) writes for them.
INFERRED_INPLACE = (
    '(Tensor(a0!) x, SymInt[] dims, SymInt n=2, float f=0.5, bool flag=True, str mode="add", '
    "ScalarType dtype=float32, Tensor? bias=None, ScalarType? acc=None) -> Tensor(a0!)"
)
INFERRED_OUT = "(Tensor x, float scale=1.0, *, Tensor(a2!) out, Tensor? bias=None) -> Tensor(a2!)"


def _arguments(op_or_schema: object) -> dict[str, tuple[str, object, bool]]:
    schema = op_or_schema if isinstance(op_or_schema, torch._C.FunctionSchema) else op_or_schema._schema  # type: ignore[attr-defined]
    # 2.2's fallback schema leaves defaults out on purpose (_compat_compiler.schema_defaults_survive_functionalization();
    # the handle passes every argument): compare defaults only where schemas carry them
    defaults = (
        _compat_compiler.schema_defaults_survive_functionalization() or tagged_ops.NATIVE_TAGS and not fallback_forced()
    )
    return {
        a.name: (str(a.type), a.default_value if defaults else None, a.alias_info is not None and a.alias_info.is_write)
        for a in schema.arguments
    }


def test_infer_schema_supported_inplace(path: str, ns: str) -> None:
    op = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
    # (parsers before 2.13 read the dtype default only as "float"; the value is the same)
    assert _arguments(op.opoverload) == _arguments(
        torch._C.parse_schema(f"mul_{INFERRED_INPLACE}".replace("=float32", "=float"))
    )
    if op.is_native:
        assert str(op.opoverload._schema.returns[0].type) == "Tensor"
    x = torch.ones(3)
    assert op(x, [0]) is x
    torch.testing.assert_close(x, torch.ones(3))


def test_infer_schema_supported_out(path: str, ns: str) -> None:
    op = tagged_ops.define_out(f"{ns}::mul_out", _mul_out)
    assert _arguments(op.opoverload) == _arguments(torch._C.parse_schema(f"mul_out{INFERRED_OUT}"))
    if op.is_native:
        assert op.schema == f"{ns}::mul_out{INFERRED_OUT}".replace("scale=1.0", "scale=1.")


def test_inplace_tag_kernel_must_return_its_first_argument(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::bad_.Tensor")
    def bad_(x: Tensor, y: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(RuntimeError) as info:
        bad_(torch.randn(2), torch.randn(2))
    assert str(info.value) == (
        f"bad_.Tensor (with implementation in {inspect.getmodule(_mul_)}): "
        "An operator tagged with torch.Tag.inplace must return its first argument."
    )


def test_out_tag_kernel_must_return_its_out_buffers(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::bad.out")
    def bad_out(x: Tensor, *, o1: Tensor, o2: Tensor) -> tuple[Tensor, Tensor]:
        return o2, o1

    with pytest.raises(RuntimeError) as info:
        bad_out(torch.randn(2), o1=torch.empty(2), o2=torch.empty(2))
    assert str(info.value) == (
        f"bad.out (with implementation in {inspect.getmodule(_mul_)}): "
        "An operator tagged with torch.Tag.out must return its mutable keyword-only arguments."
    )


def test_out_tag_refuses_autograd(path: str, ns: str) -> None:
    op = tagged_ops.define_out(f"{ns}::mul.out", _mul_out)
    x = torch.randn(3, requires_grad=True)
    o = torch.full((3,), 7.0)
    with pytest.raises(RuntimeError) as info:
        op(x, out=o)
    # 2.13 names the op packet, as ATen's out= functions do
    assert str(info.value) == (
        "mul(): functions with out=... arguments don't support automatic differentiation, "
        "but one of the arguments requires grad."
    )
    assert torch.equal(o, torch.full((3,), 7.0))  # refused before anything is written
    with torch.no_grad():
        assert op(x, out=o) is o
    torch.testing.assert_close(o, x.detach())


def test_inplace_tag_backward_through_the_mutation_raises(path: str, ns: str) -> None:
    op = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
    leaf = torch.randn(3, requires_grad=True)
    y = leaf * 1
    op(y, [0], 3, 1.0)
    with pytest.raises(
        RuntimeError, match=f"Trying to backward through {ns}::mul_ but no autograd formula was registered"
    ):
        y.sum().backward()


@pytest.mark.xfail(reason=LEAF_REFUSED, strict=True)
def test_inplace_tag_mutates_a_leaf_that_requires_grad(path: str, ns: str) -> None:
    op = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
    leaf = torch.ones(3, requires_grad=True)
    op(leaf, [0], 3, 1.0)  # 2.13 lets it through
    torch.testing.assert_close(leaf.detach(), torch.full((3,), 3.0))


def test_version_counter_is_bumped_by_a_numpy_kernel(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::np_sin_")
    def np_sin_(x: Tensor) -> Tensor:
        np.sin(x.numpy(), out=x.numpy())
        return x

    x = torch.randn(3)
    before = x._version
    np_sin_(x)
    assert x._version > before


def test_register_fake_warns_and_is_used(path: str, ns: str) -> None:
    op = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
    seen: list[int] = []
    with pytest.warns(UserWarning) as record:
        op.register_fake(lambda x, *args, **kwargs: seen.append(1) or x)
    assert str(record[0].message) == (
        f"The fake registration for {op} is unnecessary. Custom ops tagged with torch.Tag.inplace already get "
        "an autogenerated fake kernel. The provided fake impl will be used instead."
    )
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x = torch.randn(3)
        assert op(x, [0]) is x
    assert seen == [1]


@pytest.mark.xfail(reason=FAKE_RETURN_IGNORED, strict=True)
def test_registered_fake_return_value_is_what_a_fake_call_returns(path: str, ns: str) -> None:
    op = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op.register_fake(lambda x, *args, **kwargs: x.new_empty(x.shape))
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x = torch.randn(3)
        assert op(x, [0]) is not x  # raw custom_op returns what the registered fake returned


def test_handle_register_autograd_is_refused(path: str, ns: str) -> None:
    ip = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
    out = tagged_ops.define_out(f"{ns}::mul.out", _mul_out)
    with pytest.raises(RuntimeError) as info:
        out.register_autograd(lambda ctx, g: g)
    assert str(info.value) == (
        f"Cannot register autograd formula for operator tagged with torch.Tag.out: {out}. "
        "Out variants do not support autograd."
    )
    with pytest.raises(RuntimeError) as info:
        ip.register_autograd(lambda ctx, g: g)
    assert str(info.value).startswith(f"Cannot register autograd formula for non-functional operator {ip} with schema ")
    assert str(info.value).endswith("Please create a functional operator and register an autograd formula for that.")


@pytest.mark.parametrize("kind", ["inplace", "out"])
def test_library_register_autograd_is_refused(path: str, ns: str, kind: str) -> None:
    if not hasattr(torch.library, "register_autograd"):
        pytest.skip(f"torch {torch.__version__} has no torch.library.register_autograd")
    if kind == "inplace":
        op = tagged_ops.define_inplace(f"{ns}::mul_", _mul_)
        expected = "Cannot register autograd formula for non-functional operator"
    else:
        op = tagged_ops.define_out(f"{ns}::mul.out", _mul_out)
        expected = f"Cannot register autograd formula for operator tagged with torch.Tag.out: {op.opoverload}."
    with pytest.raises(RuntimeError) as info:
        torch.library.register_autograd(op.qualname, lambda ctx, g: g)
    assert str(info.value).startswith(expected)
