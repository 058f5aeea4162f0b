"""PyTorch's test/custom_operator/test_out_variant.py (the ``torch.Tag.out`` version), re-expressed.

Upstream defines a functional op and its ``.out`` overload with
``Library.define(..., tags=[torch.Tag.out])``; here the ``.out`` overload goes
through ``tagged_ops.define_out(name, fn, schema=...)`` and the functional op
is defined as a library author would (``torch.library.define``). Same results,
same errors (type and full sentence) on every release and both paths. The
functional/out pairing (``to_out_variant``, ``torch._library.utils.is_out``)
is the native tag's: those assertions run where the op carries the tag and are
skipped, with the reason, where it cannot (the fallback path has no tag to find).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat as caps
from tagged_ops._fixes.out_variant_pairing import MANGLED_KINDS

from ._upstream import functionalized_forward, graphs_differ, rendered

OUT = "Schema tagged with torch.Tag.out"
_LIBS: list[torch.library.Library] = []


def _functional(ns: str, schema: str) -> Any:
    lib = torch.library.Library(ns, "FRAGMENT")
    _LIBS.append(lib)
    lib.define(schema)
    return getattr(getattr(torch.ops, ns), schema.split("(")[0].split(".")[0])


def _kernel(*args: Any, **outs: Tensor) -> Any:
    # writes x + y (or x) into every out buffer, returns them as the tag requires
    x = args[0]
    value = x + args[1] if len(args) > 1 and isinstance(args[1], Tensor) else x
    for o in outs.values():
        o.copy_(value)
    values = tuple(outs.values())
    return values[0] if len(values) == 1 else values


def _out(ns: str, schema: str) -> tagged_ops.TaggedOp:
    # pair=True: upstream's tag pairs a functional op with its out variant; tagged_ops does only when asked
    return tagged_ops.define_out(
        f"{ns}::{schema.split('(')[0]}", _kernel, schema=schema[schema.index("(") :], pair=True
    )


def _xfail_renamed_out_pairing(request: pytest.FixtureRequest) -> None:
    if "renamed-out" in MANGLED_KINDS:
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="deliberate: tagged_ops does not pair a single out buffer named other than 'out', "
                "which this torch's Inductor passes as out= (tests/test_pairing.py)",
            )
        )


def _pairing(op: tagged_ops.TaggedOp) -> Any:
    if not op.is_native:
        pytest.skip("functional/out pairing is torch.Tag.out's: the fallback's untagged op carries no tag to find")
    from torch._library import _out_variant

    return _out_variant


def test_single_out(path: str, ns: str, request: pytest.FixtureRequest) -> None:
    _functional(ns, "single_return_kwarg(Tensor x, Tensor y) -> Tensor")
    op = _out(ns, "single_return_kwarg.out(Tensor x, Tensor y, *, Tensor(a!) result) -> Tensor(a!)")
    x, y, r = torch.randn(3), torch.randn(3), torch.empty(3)
    assert op(x, y, result=r) is r
    torch.testing.assert_close(r, x + y)
    _functional(ns, "single_no_return(Tensor x, Tensor y) -> Tensor")
    schema = "single_no_return.out(Tensor x, Tensor y, *, Tensor(a!) result) -> ()"
    with pytest.raises(ValueError) as info:
        _out(ns, schema)
    assert (
        str(info.value)
        == f"{OUT} must return all mutable arguments (got 1 mutable args but 0 returns). Got: {rendered(schema)}"
    )
    pairing = _pairing(op)
    _xfail_renamed_out_pairing(request)
    pairing.check_out_variant(
        getattr(torch.ops, ns).single_return_kwarg.default, getattr(torch.ops, ns).single_return_kwarg.out
    )


def test_multiple_out(path: str, ns: str) -> None:
    _functional(ns, "multi_return(Tensor x, Tensor y) -> (Tensor, Tensor)")
    op = _out(
        ns, "multi_return.out(Tensor x, Tensor y, *, Tensor(a!) out1, Tensor(b!) out2) -> (Tensor(a!), Tensor(b!))"
    )
    x, y, o1, o2 = torch.randn(3), torch.randn(3), torch.empty(3), torch.empty(3)
    r1, r2 = op(x, y, out1=o1, out2=o2)
    assert r1 is o1 and r2 is o2
    _pairing(op).check_out_variant(getattr(torch.ops, ns).multi_return.default, op.opoverload)


def test_multi_out_overload(path: str, ns: str) -> None:
    _functional(ns, "overloaded_multi.Tensor(Tensor x, Tensor scale) -> (Tensor, Tensor)")
    t_out = _out(
        ns,
        "overloaded_multi.Tensor_out(Tensor x, Tensor scale, *, Tensor(a!) out1, Tensor(b!) out2) -> (Tensor(a!), Tensor(b!))",
    )
    _functional(ns, "overloaded_multi.scalar(Tensor x, float scale) -> (Tensor, Tensor)")
    s_out = _out(
        ns,
        "overloaded_multi.scalar_out(Tensor x, float scale, *, Tensor(a!) out1, Tensor(b!) out2) -> (Tensor(a!), Tensor(b!))",
    )
    packet = getattr(torch.ops, ns).overloaded_multi
    assert set(packet.overloads()) == {"Tensor", "Tensor_out", "scalar", "scalar_out"}
    assert t_out.opoverload is packet.Tensor_out and s_out.opoverload is packet.scalar_out
    pairing = _pairing(t_out)
    pairing.check_out_variant(packet.Tensor, packet.Tensor_out)
    pairing.check_out_variant(packet.scalar, packet.scalar_out)


def test_multiple_overloads_with_out_variants(path: str, ns: str) -> None:
    _functional(ns, "multi_overload_int(Tensor x, int n) -> Tensor")
    a = _out(ns, "multi_overload_int.out(Tensor x, int n, *, Tensor(a!) out) -> Tensor(a!)")
    _functional(ns, "multi_overload_float(Tensor x, float n) -> Tensor")
    b = _out(ns, "multi_overload_float.out(Tensor x, float n, *, Tensor(a!) out) -> Tensor(a!)")
    x = torch.randn(3)
    torch.testing.assert_close(a(x, 2, out=torch.empty(3)), x)
    torch.testing.assert_close(b(x, 2.0, out=torch.empty(3)), x)
    pairing = _pairing(a)
    pairing.check_out_variant(getattr(torch.ops, ns).multi_overload_int.default, a.opoverload)
    pairing.check_out_variant(getattr(torch.ops, ns).multi_overload_float.default, b.opoverload)


def test_out_variant_signature_mismatch(path: str, ns: str) -> None:
    mismatches = [
        (
            "sig_mismatch_op(Tensor x, Tensor y) -> Tensor",
            "sig_mismatch_op.out(Tensor x, *, Tensor(a!) result) -> Tensor(a!)",
        ),
        (
            "optional_mismatch(Tensor x) -> Tensor",
            "optional_mismatch.out(Tensor? x, *, Tensor(a!) result) -> Tensor(a!)",
        ),
        (
            "default_mismatch(Tensor x, int n=0) -> Tensor",
            "default_mismatch.out(Tensor x, int n=1, *, Tensor(a!) result) -> Tensor(a!)",
        ),
    ]
    ops = [(_functional(ns, f), _out(ns, o)) for f, o in mismatches]
    pairing = _pairing(ops[0][1])
    for packet, _ in ops:
        assert pairing.to_out_variant(packet.default) is None
        with pytest.raises(AssertionError, match="We did not find an out variant"):
            pairing.check_out_variant(packet.default, packet.out)


def test_mutable_op_not_functional(path: str, ns: str) -> None:
    # tagged_ops' in-place op is the mutable op here: nothing pairs with it
    op = tagged_ops.define_inplace(
        f"{ns}::mutating_op", lambda x, y: x, schema="(Tensor(a!) x, Tensor y) -> Tensor(a!)"
    )
    with pytest.raises(RuntimeError, match="schema is not functional"):
        _pairing(op).to_out_variant(op.opoverload)


# (upstream test name, schema, 2.13's full sentence before " Got: <schema>")
DEFINE_ERRORS = [
    (
        "bad_ret",
        "bad_ret.out(Tensor x, *, Tensor(a!) out) -> Tensor",
        "Return 0 of schema tagged with torch.Tag.out must alias mutable arg 'out'.",
    ),
    (
        "bad_alias_order",
        "bad_alias_order.out(Tensor x, *, Tensor(b!) out1, Tensor(a!) out2) -> (Tensor(a!), Tensor(b!))",
        "Return 0 of schema tagged with torch.Tag.out must alias mutable arg 'out1' (return aliases {'a'} but arg aliases {'b'}).",
    ),
    (
        "bad_num_ret",
        "bad_num_ret.out(Tensor x, *, Tensor(a!) result) -> (Tensor(a!), Tensor)",
        f"{OUT} must return all mutable arguments (got 1 mutable args but 2 returns).",
    ),
    ("no_mutable_args", "no_mutable(Tensor x) -> Tensor", f"{OUT} must have at least one mutable argument."),
    (
        "mutable_positional_arg",
        "mut_pos(Tensor x, Tensor(a!) out) -> Tensor(a!)",
        f"{OUT} requires all mutable arguments to be keyword-only (after the *). Found mutable positional args: ['out'].",
    ),
    (
        "optional_mutable_arg",
        "mut_opt(Tensor x, *, Tensor(a!)? out=None) -> Tensor(a!)?",
        f"{OUT} only supports Tensor mutable arguments. Found unsupported mutable args: ['out'].",
    ),
    (
        "tensorlist_mutable_arg",
        "mut_list(Tensor x, *, Tensor(a!)[] out) -> ()",
        f"{OUT} only supports Tensor mutable arguments. Found unsupported mutable args: ['out'].",
    ),
    (
        "return_not_mutable_alias",
        "bad_ret_alias(Tensor x, *, Tensor(a!) out) -> Tensor(a)",
        "Return 0 of schema tagged with torch.Tag.out must be a mutable alias (e.g., Tensor(a!), not Tensor(a)) of arg 'out'.",
    ),
]


@pytest.mark.parametrize(("case", "schema", "sentence"), DEFINE_ERRORS, ids=[c[0] for c in DEFINE_ERRORS])
def test_define_error(path: str, ns: str, case: str, schema: str, sentence: str) -> None:
    with pytest.raises(ValueError) as info:
        _out(ns, schema)
    assert str(info.value) == f"{sentence} Got: {rendered(schema)}"
    assert not hasattr(getattr(torch.ops, ns), schema.split("(")[0].split(".")[0])


def test_compile_out_variant(path: str, ns: str, request: pytest.FixtureRequest) -> None:
    div = _functional(ns, "div(Tensor x, Tensor y) -> Tensor")
    _LIBS[-1].impl("div", lambda x, y: x / y, "CompositeExplicitAutograd")
    caps.register_fake(f"{ns}::div", lambda x, y: torch.empty_like(x), lib=_LIBS[-1])

    def div_out(x: Tensor, y: Tensor, *, result: Tensor) -> Tensor:
        result.copy_(x / y)
        return result

    op = tagged_ops.define_out(f"{ns}::div.out", div_out, pair=True)

    def fn(x: Tensor, y: Tensor, out: Tensor) -> Tensor:
        op(x, y, result=out)
        return out

    x, y, out = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4)
    torch.compile(fn)(x, y, out)
    torch.testing.assert_close(out, x / y)
    torch.testing.assert_close(div.default(x, y), x / y)
    if op.is_native:
        _xfail_renamed_out_pairing(request)
        _pairing(op).check_out_variant(div.default, op.opoverload)


def test_is_out(path: str, ns: str) -> None:
    _functional(ns, "is_out_func(Tensor x) -> Tensor")
    op = _out(ns, "is_out_func.out(Tensor x, *, Tensor(a!) result) -> Tensor(a!)")
    assert op.kind == "out"
    _pairing(op)
    from torch._library.utils import is_out

    assert is_out(op.opoverload)
    assert not is_out(getattr(torch.ops, ns).is_out_func.default)


def _define_add_out(ns: str) -> tagged_ops.TaggedOp:
    _functional(ns, "add(Tensor x, Tensor y) -> Tensor")
    return _out(ns, "add.out(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_out(path: str, ns: str, backend: str) -> None:
    op = _define_add_out(ns)  # no fake registered: the tags' generated one

    def fn(x: Tensor, y: Tensor, out: Tensor) -> Tensor:
        return op(x, y, out=out)

    x, y, out = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4)
    result = torch.compile(fn, backend=backend, fullgraph=True)(x, y, out)
    torch.testing.assert_close(result, x + y)
    torch.testing.assert_close(out, x + y)


def test_compile_out_functionalized_graph(request: pytest.FixtureRequest, path: str, ns: str) -> None:
    op = _define_add_out(ns)
    graphs_differ(request, op.is_native)
    x, y, out = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4)
    code, result = functionalized_forward(lambda x, y, out: op(x, y, out=out), x, y, out)
    torch.testing.assert_close(result, x + y)
    torch.testing.assert_close(out, x + y)
    assert f"auto_functionalized_v2(torch.ops.{ns}.add.out, x = arg0_1, y = arg1_1, _out_size = (3, 4)" in code


def test_compile_out_uses_v2_hop_when_config_off(request: pytest.FixtureRequest, path: str, ns: str) -> None:
    op = _define_add_out(ns)
    graphs_differ(request, op.is_native)
    config = pytest.importorskip("torch._inductor.config")
    x, y, out = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4)
    with config.patch(enable_auto_functionalized_v2=False):
        code, result = functionalized_forward(lambda x, y, out: op(x, y, out=out), x, y, out)
    torch.testing.assert_close(result, x + y)
    torch.testing.assert_close(out, x + y)
    assert "auto_functionalized_v2" in code
    assert "torch.ops.higher_order.auto_functionalized(" not in code


def _define_add_mul_out(ns: str) -> tagged_ops.TaggedOp:
    def add_mul(x: Tensor, y: Tensor, *, add_out: Tensor, mul_out: Tensor) -> tuple[Tensor, Tensor]:
        add_out.copy_(x + y)
        mul_out.copy_(x * y)
        return add_out, mul_out

    return tagged_ops.define_out(
        f"{ns}::add_mul.out",
        add_mul,
        schema="(Tensor x, Tensor y, *, Tensor(a!) add_out, Tensor(b!) mul_out) -> (Tensor(a!), Tensor(b!))",
    )


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_multi_out(path: str, ns: str, backend: str) -> None:
    op = _define_add_mul_out(ns)

    def fn(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        # out buffers of another dtype and stride: per-tensor properties are kept
        add_out = torch.empty(3, 4)
        mul_out = torch.empty(4, 3, dtype=torch.float64).t()
        return op(x, y, add_out=add_out, mul_out=mul_out)

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    add_result, mul_result = torch.compile(fn, backend=backend, fullgraph=True)(x, y)
    torch.testing.assert_close(add_result, x + y)
    assert add_result.dtype == torch.float32 and add_result.stride() == (4, 1)
    torch.testing.assert_close(mul_result, (x * y).to(torch.float64))
    assert mul_result.dtype == torch.float64 and mul_result.stride() == (1, 3)


def test_auto_fake_kernel_single_out(path: str, ns: str) -> None:
    op = _out(ns, "auto_fake_single.out(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)")
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x, y, out = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4)
        assert op(x, y, out=out) is out


def test_auto_fake_kernel_multi_out(path: str, ns: str) -> None:
    op = _define_add_mul_out(ns)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x, y, a, m = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4), torch.empty(3, 4)
        r1, r2 = op(x, y, add_out=a, mul_out=m)
        assert r1 is a and r2 is m


def test_warn_register_fake_for_out_op(path: str, ns: str) -> None:
    op = _out(ns, "warn_fake(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        op.register_fake(lambda x, *, out: out)
    out_warnings = [x for x in w if "torch.Tag.out" in str(x.message)]
    assert len(out_warnings) == 1
    assert "already get an autogenerated fake kernel" in str(out_warnings[0].message)
