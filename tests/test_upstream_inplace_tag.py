"""PyTorch's test/custom_operator/test_inplace_tag.py, re-expressed against tagged_ops' public handle.

Upstream defines ops with ``Library.define(schema, tags=[torch.Tag.inplace])``;
here the same schemas go through ``tagged_ops.define_inplace(name, fn, schema=...)``
and must behave as upstream asserts, on every release and both paths: same
exception type, same full sentence. Where upstream asserts something that cannot
hold through tagged_ops, the case is an xfail naming its reason (docs/differences.md).
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

import tagged_ops

from ._upstream import (
    functionalized_forward,
    graphs_differ,
    rendered,
    xfail_where_an_argument_named_self_cannot_compile,
)
from ._views import require_returned_views_of_mutated_inputs

INPLACE = "Schema tagged with torch.Tag.inplace"


def _add_(self_: Tensor, other: Tensor) -> Tensor:
    self_.add_(other)
    return self_


def _define_add_(ns: str) -> tagged_ops.TaggedOp:
    return tagged_ops.define_inplace(f"{ns}::add_", _add_, schema="(Tensor(a!) self, Tensor other) -> Tensor(a!)")


def test_basic_inplace(path: str, ns: str) -> None:
    op = _define_add_(ns)
    assert op.kind == "inplace"
    if op.is_native:
        from torch._library.utils import is_inplace

        assert is_inplace(op.opoverload)


def test_auto_fake_kernel_inplace(path: str, ns: str) -> None:
    op = _define_add_(ns)  # no fake registered: the tags' generated one
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x = torch.randn(3, 4)
        y = torch.randn(3, 4)
        assert op(x, y) is x


def _name(schema: str) -> str:
    return schema.split("(", 1)[0]


# (upstream test name, schema, 2.13's full sentence before " Got: <schema>")
DEFINE_ERRORS = [
    (
        "first_arg_not_mutable",
        "not_mutable(Tensor self, Tensor other) -> Tensor",
        f"{INPLACE} requires the first positional argument to be mutable (e.g., Tensor(a!)).",
    ),
    (
        "first_arg_not_tensor",
        "not_tensor(Tensor(a!)[] self) -> ()",
        f"{INPLACE} requires the first positional argument to be a Tensor. Got type 'List[Tensor]' for arg 'self'.",
    ),
    (
        "wrong_return_count",
        "no_return(Tensor(a!) self) -> ()",
        f"{INPLACE} must return exactly one value (the first argument). Got 0 returns.",
    ),
    (
        "wrong_return_count_multiple",
        "multi_return(Tensor(a!) self) -> (Tensor(a!), Tensor)",
        f"{INPLACE} must return exactly one value (the first argument). Got 2 returns.",
    ),
    (
        "return_not_aliased",
        "bad_alias(Tensor(a!) self) -> Tensor",
        f"{INPLACE} must return the first mutable argument (return must alias the first argument).",
    ),
    (
        "return_not_tensor",
        "bad_return_type(Tensor(a!) self) -> int(a!)",
        f"{INPLACE} must return the first mutable argument (return must be a Tensor, got type 'int').",
    ),
    (
        "return_not_mutable_alias",
        "bad_return_mutability(Tensor(a!) self) -> Tensor(a)",
        f"{INPLACE} must return the first mutable argument (return must be a mutable alias, e.g., Tensor(a!)).",
    ),
    (
        "return_wrong_alias",
        "wrong_alias(Tensor(a!) self, Tensor(b!) other) -> Tensor(b!)",
        f"{INPLACE} must return the first mutable argument (return aliases {{'b'}} but first arg aliases {{'a'}}).",
    ),
    (
        "additional_mutable_positional_arg",
        "extra_mut(Tensor(a!) self, Tensor(b!) other) -> Tensor(a!)",
        f"{INPLACE} must only mutate the first positional argument. Found additional mutable args: ['other'].",
    ),
]


@pytest.mark.parametrize(("case", "schema", "sentence"), DEFINE_ERRORS, ids=[c[0] for c in DEFINE_ERRORS])
def test_define_error(path: str, ns: str, case: str, schema: str, sentence: str) -> None:
    def kernel(self_: Tensor, *args: object, **kwargs: object) -> Tensor:
        return self_

    with pytest.raises(ValueError) as info:
        tagged_ops.define_inplace(f"{ns}::{_name(schema)}", kernel, schema=schema)
    assert str(info.value) == f"{sentence} Got: {rendered(schema)}"
    assert not hasattr(getattr(torch.ops, ns), _name(schema))  # nothing half-registered


@pytest.mark.parametrize(
    "schema",
    ["no_args(*, Tensor(a!) out) -> Tensor(a!)", "extra_kwarg(Tensor(a!) self, *, Tensor(b!) out) -> Tensor(a!)"],
    ids=["no_positional_args", "additional_mutable_kwarg"],
)
def test_define_error_keyword_only_tensors(path: str, ns: str, schema: str) -> None:
    """Upstream's Library.define cases; custom_op(schema=) refuses keyword-only Tensors first, and so do we."""
    name = _name(schema)
    with pytest.raises(NotImplementedError) as info:
        tagged_ops.define_inplace(f"{ns}::{name}", lambda *args, **kwargs: None, schema=schema)
    assert str(info.value) == (
        f"custom_op with kwarg-only Tensor args. Please make your tensors not kwarg-only. Got: {rendered(schema)}"
    )
    if tagged_ops.NATIVE_TAGS:
        with pytest.raises(NotImplementedError) as native:
            torch.library.custom_op(
                f"{ns}_native::{name}",
                lambda *args, **kwargs: None,
                mutates_args=(),
                tags=torch.Tag.inplace,  # type: ignore[attr-defined]
                schema=schema[schema.index("(") :],
            )
        assert str(native.value) == str(info.value)
    assert not hasattr(getattr(torch.ops, ns), name)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_inplace(request: pytest.FixtureRequest, path: str, ns: str, backend: str) -> None:
    op = _define_add_(ns)
    xfail_where_an_argument_named_self_cannot_compile(request)

    def fn(x: Tensor, y: Tensor) -> Tensor:
        return op(x, y)

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    expected = x + y
    x_compiled = x.clone()
    result = torch.compile(fn, backend=backend, fullgraph=True)(x_compiled, y)
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(x_compiled, expected)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_inplace_duplicated_base(request: pytest.FixtureRequest, path: str, ns: str, backend: str) -> None:
    op = _define_add_(ns)
    xfail_where_an_argument_named_self_cannot_compile(request)

    def fn(x: Tensor) -> Tensor:
        return op(x, x)  # self and other are the same tensor

    x = torch.randn(3, 4)
    expected = x * 2
    x_compiled = x.clone()
    result = torch.compile(fn, backend=backend, fullgraph=True)(x_compiled)
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(x_compiled, expected)


def test_compile_inplace_functionalized_graph(request: pytest.FixtureRequest, path: str, ns: str) -> None:
    op = _define_add_(ns)
    graphs_differ(request, op.is_native)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    x_compiled = x.clone()
    code, result = functionalized_forward(lambda x, y: op(x, y), x_compiled, y)
    torch.testing.assert_close(result, x + y)
    torch.testing.assert_close(x_compiled, x + y)
    # upstream: auto_functionalized_v2 of the tagged op itself, with the input as its base
    assert f"torch.ops.higher_order.auto_functionalized_v2(torch.ops.{ns}.add_.default" in code


def test_compile_inplace_view_functionalized_graph(request: pytest.FixtureRequest, path: str, ns: str) -> None:
    op = _define_add_(ns)
    graphs_differ(request, op.is_native)
    x, y = torch.randn(5, 4), torch.randn(2, 4)
    x_compiled = x.clone()
    code, result = functionalized_forward(lambda x, y: op(x[1:3], y), x_compiled, y)
    torch.testing.assert_close(result, x[1:3] + y)
    torch.testing.assert_close(x_compiled[1:3], x[1:3] + y)
    torch.testing.assert_close(x_compiled[0], x[0])  # unsliced parts are unchanged
    torch.testing.assert_close(x_compiled[3:], x[3:])
    assert f"auto_functionalized_v2(torch.ops.{ns}.add_.default" in code
    assert "_self_slice_start = 1, _self_slice_end = 3" in code


def test_compile_inplace_view_values(path: str, ns: str) -> None:
    """What the two graph tests above assert of values holds on every release and path."""
    op = _define_add_(ns)
    x, y = torch.randn(5, 4), torch.randn(2, 4)
    x_compiled = x.clone()
    result = torch.compile(lambda x, y: op(x[1:3], y), fullgraph=True)(x_compiled, y)
    torch.testing.assert_close(x_compiled[1:3], x[1:3] + y)
    torch.testing.assert_close(x_compiled[0], x[0])
    torch.testing.assert_close(x_compiled[3:], x[3:])
    require_returned_views_of_mutated_inputs()
    torch.testing.assert_close(result, x[1:3] + y)


def test_compile_inplace_uses_v2_hop_when_config_off(request: pytest.FixtureRequest, path: str, ns: str) -> None:
    op = _define_add_(ns)
    graphs_differ(request, op.is_native)
    config = pytest.importorskip("torch._inductor.config")
    if not hasattr(config, "enable_auto_functionalized_v2"):
        pytest.fail(f"torch {torch.__version__} has no auto_functionalized_v2 at all")
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    x_compiled = x.clone()
    with config.patch(enable_auto_functionalized_v2=False):
        code, result = functionalized_forward(lambda x, y: op(x, y), x_compiled, y)
    torch.testing.assert_close(result, x + y)
    torch.testing.assert_close(x_compiled, x + y)
    assert "auto_functionalized_v2" in code
    assert "torch.ops.higher_order.auto_functionalized(" not in code
