"""Definition-time errors are 2.13's, word for word, on every path and release."""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional, Tuple

import pytest
import torch
from torch import Tensor

import tagged_ops

IP = "torch.Tag.inplace"
OUT = "torch.Tag.out"


def _f_no_positional(*, x: Tensor) -> Tensor: ...
def _f_int_first(n: int, x: Tensor) -> Tensor: ...
def _f_optional_first(x: Optional[Tensor]) -> Tensor: ...
def _f_list_first(x: List[Tensor]) -> Tensor: ...
def _f_two(x: Tensor, y: Tensor) -> Tensor: ...
def _f_returns_none(x: Tensor) -> None: ...
def _f_returns_int(x: Tensor) -> int: ...
def _f_no_return(x: Tensor): ...  # noqa: ANN201
def _f_no_param_annotation(x) -> Tensor: ...  # noqa: ANN001
def _f_list_default(x: Tensor, dims: List[int] = [0]) -> Tensor: ...  # noqa: B006
def _o_positional(x: Tensor, out: Tensor) -> Tensor: ...
def _o_optional(x: Tensor, *, out: Optional[Tensor]) -> Tensor: ...
def _o_list(x: Tensor, *, out: List[Tensor]) -> Tensor: ...
def _o_none(x: Tensor, *, alpha: float = 1.0) -> Tensor: ...
def _o_two_returns_one(x: Tensor, *, o1: Tensor, o2: Tensor) -> Tensor: ...
def _o_two_ok(x: Tensor, *, o1: Tensor, o2: Tensor) -> Tuple[Tensor, Tensor]: ...
def _o_returns_none(x: Tensor, *, out: Tensor) -> None: ...
def _o_no_return(x: Tensor, *, out: Tensor): ...  # noqa: ANN201


# (kind, function, mutates_args or None for the default, 2.13's sentence)
CASES: list[tuple[str, Callable[..., Any], Any, str]] = [
    ("inplace", _f_no_positional, None, f"{IP} requires a positional Tensor argument."),
    ("inplace", _f_int_first, None, f"{IP} requires the first positional argument to be a Tensor."),
    ("inplace", _f_int_first, ("x",), f"{IP} requires the first positional argument to be a Tensor."),
    ("inplace", _f_optional_first, None, f"{IP} requires the first positional argument to be a Tensor."),
    ("inplace", _f_list_first, None, f"{IP} requires the first positional argument to be a Tensor."),
    ("inplace", _f_two, (), f"{IP} requires mutates_args to contain exactly the first positional argument, got ()."),
    (
        "inplace",
        _f_two,
        ("y",),
        f"{IP} requires mutates_args to contain exactly the first positional argument, got ('y',).",
    ),
    (
        "inplace",
        _f_two,
        ("x", "y"),
        f"{IP} requires mutates_args to contain exactly the first positional argument, got ('x', 'y').",
    ),
    (
        "inplace",
        _f_two,
        "unknown",
        f"{IP} requires mutates_args to contain exactly the first positional argument, got unknown.",
    ),
    ("inplace", _f_returns_none, None, f"{IP} requires the return annotation to be torch.Tensor."),
    ("inplace", _f_returns_int, None, f"{IP} requires the return annotation to be torch.Tensor."),
    ("inplace", _f_no_return, None, "No return type annotation was provided. Please add one."),
    ("inplace", _f_no_param_annotation, ("x",), "Parameter x must have a type annotation."),
    # a bad mutates_args string is reported only after the first parameter's own checks, as 2.13 does
    ("inplace", _f_no_param_annotation, "all", "Parameter x must have a type annotation."),
    ("out", _o_positional, ("out",), f"{OUT} requires mutable arguments to be keyword-only."),
    ("out", _o_positional, "unknown", f"{OUT} requires mutable arguments to be keyword-only."),
    ("out", _o_optional, ("out",), f"{OUT} only supports mutable keyword-only Tensor arguments."),
    ("out", _o_list, ("out",), f"{OUT} only supports mutable keyword-only Tensor arguments."),
    ("out", _o_none, None, f"{OUT} requires at least one mutable keyword-only Tensor argument."),
    (
        "out",
        _o_two_returns_one,
        None,
        f"{OUT} requires the return annotation to match the mutable keyword-only Tensor arguments ('o1', 'o2').",
    ),
    (
        "out",
        _o_returns_none,
        None,
        f"{OUT} requires the return annotation to match the mutable keyword-only Tensor arguments ('out',).",
    ),
    (
        "out",
        _o_no_return,
        None,
        f"{OUT} requires the return annotation to match the mutable keyword-only Tensor arguments ('out',).",
    ),
    (
        "inplace",
        _f_list_default,
        None,
        "Parameter dims has an unsupported default value type <class 'list'>. Please file an issue on GitHub so we can prioritize this.",
    ),
]


def _define(kind: str, name: str, fn: Callable[..., Any], mutates: Any) -> Any:
    define = tagged_ops.define_inplace if kind == "inplace" else tagged_ops.define_out
    if mutates is None:
        return define(name, fn)
    return define(name, fn, mutates_args=mutates)


@pytest.mark.parametrize(("kind", "fn", "mutates", "fragment"), CASES, ids=lambda v: getattr(v, "__name__", None))
def test_definition_error_message(
    path: str, ns: str, kind: str, fn: Callable[..., Any], mutates: Any, fragment: str
) -> None:
    with pytest.raises(ValueError) as info:
        _define(kind, f"{ns}::op", fn, mutates)
    # 2.13's whole sentence, on every release and path
    assert (
        str(info.value)
        == f"infer_schema(func): {fragment} Got func with signature {__import__('inspect').signature(fn)})"
    )
    # Nothing was registered under the name.
    assert not hasattr(getattr(torch.ops, ns), "op")


@pytest.mark.skipif(not tagged_ops.NATIVE_TAGS, reason="needs torch with native tags to compare against")
@pytest.mark.parametrize(("kind", "fn", "mutates", "fragment"), CASES, ids=lambda v: getattr(v, "__name__", None))
def test_definition_error_is_torchs_own(kind: str, fn: Callable[..., Any], mutates: Any, fragment: str) -> None:
    """Same text as torch.library.infer_schema(..., tags=...) on this torch."""
    from tagged_ops._inference import default_mutates_args

    tag = torch.Tag.inplace if kind == "inplace" else torch.Tag.out
    effective = default_mutates_args(fn, kind) if mutates is None else mutates  # type: ignore[arg-type]
    with pytest.raises(ValueError) as native:
        torch.library.infer_schema(fn, mutates_args=effective, tags=tag)
    with pytest.raises(ValueError) as ours:
        _define(kind, "tagged_ops_parity::op", fn, mutates)
    assert str(ours.value) == str(native.value)


def test_several_out_buffers_is_fine(path: str, ns: str) -> None:
    @tagged_ops.define_out(f"{ns}::two")
    def two(x: Tensor, *, o1: Tensor, o2: Tensor) -> Tuple[Tensor, Tensor]:
        o1.copy_(x)
        o2.copy_(-x)
        return o1, o2

    x = torch.randn(3)
    a, b = torch.empty(3), torch.empty(3)
    res = two(x, o1=a, o2=b)
    assert type(res) is tuple and res[0] is a and res[1] is b
    assert torch.equal(b, -x)


def test_name_must_be_qualified(path: str) -> None:
    with pytest.raises(ValueError, match=re.escape("must be qualified as 'namespace::name'")):
        tagged_ops.define_inplace("noname", _f_two, mutates_args=("x",))


@pytest.mark.parametrize(
    ("kind", "schema", "fragment"),
    [
        (
            "out",
            "(Tensor x, Tensor(a!) out) -> Tensor(a!)",
            "Schema tagged with torch.Tag.out requires all mutable arguments to be keyword-only (after the *).",
        ),
        (
            "out",
            "(Tensor x, *, Tensor out) -> Tensor",
            "Schema tagged with torch.Tag.out must have at least one mutable argument.",
        ),
        (
            "inplace",
            "(Tensor x) -> Tensor",
            "Schema tagged with torch.Tag.inplace requires the first positional argument to be mutable",
        ),
        ("inplace", "(Tensor(a!) x) -> ()", "Schema tagged with torch.Tag.inplace must return exactly one value"),
    ],
)
def test_explicit_schema_is_checked(path: str, ns: str, kind: str, schema: str, fragment: str) -> None:
    define = tagged_ops.define_inplace if kind == "inplace" else tagged_ops.define_out
    with pytest.raises(ValueError, match=re.escape(fragment)):
        define(f"{ns}::op", lambda x, **k: x, schema=schema)


def test_explicit_schema_works(path: str, ns: str) -> None:
    def kernel(x, *, out):  # noqa: ANN001, ANN202 - the schema says what the types are
        torch.sin(x, out=out)
        return out

    op = tagged_ops.define_out(f"{ns}::sin_out", kernel, schema="(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    x, o = torch.randn(4), torch.empty(4)
    assert op(x, out=o) is o
    assert torch.allclose(o, x.sin())
    assert ("->" in op.schema) and (op.is_native == (path == "native"))


def test_keyword_only_tensor_of_an_inplace_op_is_custom_ops_not_implemented(path: str, ns: str) -> None:
    def f_(x: Tensor, *, y: Tensor) -> Tensor:
        return x

    with pytest.raises(NotImplementedError) as info:
        tagged_ops.define_inplace(f"{ns}::f_", f_)
    assert str(info.value) == (
        "custom_op with kwarg-only Tensor args. Please make your tensors not kwarg-only. "
        "Got: f_(Tensor(a0!) x, *, Tensor y) -> Tensor(a0!)"
    )
    assert not hasattr(getattr(torch.ops, ns), "f_")


@pytest.mark.parametrize("schema_type", ["Tensor?", "Tensor[]", "Tensor?[]", "Tensor[]?", "Tensor?[]?"])
def test_every_keyword_only_tensor_type_of_an_inplace_op_is_refused(path: str, ns: str, schema_type: str) -> None:
    # As 2.13's custom_op (torch._library.utils.has_kwarg_only_tensors): optional lists count too.
    schema = f"(Tensor(a!) x, *, {schema_type} y=None) -> Tensor(a!)".replace("[] y=None", "[] y")
    with pytest.raises(NotImplementedError, match=re.escape("custom_op with kwarg-only Tensor args.")):
        tagged_ops.define_inplace(f"{ns}::f_", lambda x, *, y=None: x, schema=schema)
    assert not hasattr(getattr(torch.ops, ns), "f_")


def test_keyword_only_non_tensor_of_an_inplace_op_is_fine(path: str, ns: str) -> None:
    op = tagged_ops.define_inplace(
        f"{ns}::f_", lambda x, *, n=2: x.mul_(n), schema="(Tensor(a!) x, *, int n=2) -> Tensor(a!)"
    )
    x = torch.ones(2)
    assert op(x, n=3) is x and torch.equal(x, torch.full((2,), 3.0))


def test_keyword_only_tensor_that_is_not_an_out_buffer_is_fine(path: str, ns: str) -> None:
    def f_out(x: Tensor, *, out: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        torch.add(x, 0 if bias is None else bias, out=out)
        return out

    op = tagged_ops.define_out(f"{ns}::f_out", f_out)
    x, o = torch.randn(3), torch.empty(3)
    assert op(x, out=o, bias=torch.ones(3)) is o
    torch.testing.assert_close(o, x + 1)


@pytest.mark.parametrize("name", ["ns", "ns::", "ns::1op", "ns::op.", "ns::op.out.x", "ns::op.default", "a.b::op"])
def test_bad_names_are_refused_before_anything_is_registered(path: str, name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        tagged_ops.define_inplace(name, _f_two, mutates_args=("x",))


def _f_string_inside_optional(x: Tensor, n: Any) -> Tensor: ...


# Evaluated, not postponed: the Union itself holds the string (this module postpones annotations).
_f_string_inside_optional.__annotations__["n"] = Optional[list["int"]]  # noqa: UP037


def test_a_string_inside_optional_is_refused_as_on_2_13(path: str, ns: str) -> None:
    # 2.13's infer_schema rebuilds such a Union as a GenericAlias that matches no type it
    # accepts; the backport refuses it too rather than accept more than 2.13 does.
    with pytest.raises(ValueError, match=r"^infer_schema\(func\): Parameter n has unsupported type "):
        tagged_ops.define_inplace(f"{ns}::op", _f_string_inside_optional)
    assert not hasattr(getattr(torch.ops, ns), "op")
