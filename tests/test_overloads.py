"""Overload names, as ATen and real libraries name their mutable ops.

bitsandbytes declares ``dequantize_4bit.out`` beside ``dequantize_4bit``; vLLM
``scaled_fp4_quant.out``; ATen ``sin.out`` and ``add_.Tensor``. With tagged_ops
the same names work on every release and both paths: the handle's op is
``torch.ops.ns.op.out``, the user's packet lists only what the user defined,
direct dispatcher calls work eagerly and compiled, and on releases with native
tags the functional op and its ``.out`` overload are a pair Inductor knows.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat as caps
from tagged_ops._compat_compiler import compiler_lowers_mutable_ops

from ._views import assert_compiled_matches_eager, inplace_patterns, out_patterns, require_exported_input_mutations

HAS_CUSTOM_OP = hasattr(torch.library, "custom_op")


def _packet(ns: str, name: str) -> Any:
    return getattr(getattr(torch.ops, ns), name)


def _define_functional(ns: str, how: str, *, default: bool = False) -> None:
    """``ns::scale(Tensor x[, float s=2.0]) -> Tensor``, defined as a library author would."""
    if how == "custom_op":
        if not HAS_CUSTOM_OP:
            pytest.skip(f"torch {torch.__version__} has no torch.library.custom_op")
        if default:

            def scale_d(x: Tensor, s: float = 2.0) -> Tensor:
                return x * s

            # schema= as well: 2.4's custom_op cannot read this module's postponed annotations
            torch.library.custom_op(
                f"{ns}::scale", scale_d, mutates_args=(), schema="(Tensor x, float s=2.0) -> Tensor"
            ).register_fake(lambda x, s=2.0: torch.empty_like(x))
        else:

            def scale(x: Tensor) -> Tensor:
                return x * 2.0

            torch.library.custom_op(
                f"{ns}::scale", scale, mutates_args=(), schema="(Tensor x) -> Tensor"
            ).register_fake(lambda x: torch.empty_like(x))
        return
    # torch.library.define / impl: what C++ TORCH_LIBRARY users get too (same dispatcher entry)
    schema = "(Tensor x, float s=2.0) -> Tensor" if default else "(Tensor x) -> Tensor"
    lib = torch.library.Library(ns, "FRAGMENT")  # kept alive by the registry below
    lib.define(f"scale{schema}")
    lib.impl("scale", (lambda x, s=2.0: x * s) if default else (lambda x: x * 2.0), "CompositeExplicitAutograd")
    caps.register_fake(
        f"{ns}::scale", (lambda x, s=2.0: torch.empty_like(x)) if default else (lambda x: torch.empty_like(x)), lib=lib
    )
    _LIBS.append(lib)


_LIBS: list[torch.library.Library] = []


def _define_scale_out(ns: str, overload: str, *, pair: bool = False) -> tagged_ops.TaggedOp:
    @tagged_ops.define_out(f"{ns}::scale.{overload}", pair=pair)
    def scale_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.mul(x, 2.0, out=out)
        return out

    return scale_out


def _define_scale_(ns: str, overload: str) -> tagged_ops.TaggedOp:
    if overload == "int":

        @tagged_ops.define_inplace(f"{ns}::scale_.int")
        def scale_int_(x: Tensor, k: int = 2) -> Tensor:
            x.mul_(k)
            return x

        return scale_int_

    @tagged_ops.define_inplace(f"{ns}::scale_.{overload}")
    def scale_(x: Tensor, k: Tensor) -> Tensor:
        x.mul_(k)
        return x

    return scale_


def _direct_out(op: tagged_ops.TaggedOp) -> Callable[[Tensor, Tensor], Tensor]:
    """``torch.ops.ns.scale.<overload>`` called as each path documents it."""
    target = op.opoverload
    if op.is_native:
        return lambda x, o: target(x, out=o)  # 2.13's form: keyword-only out, returns it

    def call(x: Tensor, o: Tensor) -> Tensor:
        target(x, o)  # the fallback's form: out positional, returns nothing (see op.schema)
        return o

    return call


@pytest.mark.parametrize("overload", ["out", "Tensor_out"])
@pytest.mark.parametrize("functional", ["none", "define-before", "define-after", "custom_op-before", "custom_op-after"])
def test_out_overload_lives_in_the_users_packet(path: str, ns: str, overload: str, functional: str) -> None:
    how, _, when = functional.partition("-")
    if when == "before":
        _define_functional(ns, how)
    op = _define_scale_out(ns, overload)
    if when == "after":
        _define_functional(ns, how)
    packet = _packet(ns, "scale")
    assert op.opoverload is getattr(packet, overload)
    assert op.qualname == f"{ns}::scale.{overload}"
    expected = {overload} | ({"default"} if how != "none" else set())
    if when == "after" and not hasattr(torch._ops, "_refresh_packet"):
        # torch < 2.13 does not refresh a cached packet when someone else defines an overload
        # into it later: ask the dispatcher itself what the packet holds
        listed = {name or "default" for name in torch._C._jit_get_operation(f"{ns}::scale")[1]}
    else:
        listed = set(packet.overloads())
    assert listed == expected  # no twin or helper overloads among the user's
    x, o = torch.randn(3), torch.empty(3)
    assert op(x, out=o) is o
    torch.testing.assert_close(o, x * 2)
    o2 = torch.empty(3)
    result = _direct_out(op)(x, o2)
    assert result is o2
    torch.testing.assert_close(o2, x * 2)
    if how != "none":
        torch.testing.assert_close(packet.default(x), x * 2)  # the functional op is untouched


@pytest.mark.parametrize("overload", ["Tensor", "int"])
def test_inplace_overload_lives_in_the_users_packet(path: str, ns: str, overload: str) -> None:
    op = _define_scale_(ns, overload)
    packet = _packet(ns, "scale_")
    assert op.opoverload is getattr(packet, overload)
    assert packet.overloads() == [overload]
    x = torch.randn(3)
    expected = x * 2
    k: Any = torch.tensor(2.0) if overload == "Tensor" else 2
    assert op(x, k) is x
    torch.testing.assert_close(x, expected)
    y = torch.randn(3)
    r = op.opoverload(y, k)  # same positional form on both paths
    assert (r is y) if op.is_native else (r is None)
    torch.testing.assert_close(y.clone(), r if op.is_native else y)


@pytest.mark.parametrize("kind", ["inplace", "out"])
def test_overloads_export(path: str, ns: str, kind: str) -> None:
    ip = _define_scale_(ns, "int")
    out = _define_scale_out(ns, "out")

    class M(torch.nn.Module):
        def forward(self, x: Tensor, o: Tensor) -> Tensor:
            y = x * 2
            if kind == "inplace":
                ip(y[1:3], 3)
                ip(x[0:1], 2)
            else:
                out(y[1:3], out=o[0:2])
            return y + o

    x, o = torch.randn(4, 3), torch.zeros(4, 3)
    require_exported_input_mutations()
    exported = torch.export.export(M(), (x.clone(), o.clone()))
    x1, o1, x2, o2 = x.clone(), o.clone(), x.clone(), o.clone()
    torch.testing.assert_close(exported.module()(x1, o1), M()(x2, o2))
    torch.testing.assert_close(x1, x2)
    torch.testing.assert_close(o1, o2)


def test_both_overloads_of_one_packet_coexist(path: str, ns: str) -> None:
    a = _define_scale_out(ns, "out")
    b = _define_scale_out(ns, "Tensor_out")
    assert set(_packet(ns, "scale").overloads()) == {"out", "Tensor_out"}
    x = torch.randn(3)
    torch.testing.assert_close(a(x, out=torch.empty(3)), b(x, out=torch.empty(3)))
    # redefining one overload leaves the other working
    a2 = _define_scale_out(ns, "out")
    torch.testing.assert_close(a2(x, out=torch.empty(3)), x * 2)
    torch.testing.assert_close(b(x, out=torch.empty(3)), x * 2)


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(out_patterns(lambda x, o: o)))
def test_out_overload_handle_compiles_like_eager(path: str, ns: str, pattern: str, version: str) -> None:
    op = _define_scale_out(ns, "out")
    fn, make = out_patterns(lambda x, o: op(x, out=o))[pattern]
    assert_compiled_matches_eager(fn, make, version)


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(out_patterns(lambda x, o: o)))
def test_out_overload_direct_dispatcher_call_compiles_like_eager(
    request: pytest.FixtureRequest, path: str, ns: str, pattern: str, version: str
) -> None:
    op = _define_scale_out(ns, "out")
    if not op.is_native:
        _xfail_untagged_dispatcher_call(request, pattern, version)
    fn, make = out_patterns(_direct_out(op))[pattern]
    assert_compiled_matches_eager(fn, make, version)


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(inplace_patterns(lambda x: x)))
@pytest.mark.parametrize("form", ["handle", "dispatcher"])
def test_inplace_overload_compiles_like_eager(
    request: pytest.FixtureRequest, path: str, ns: str, pattern: str, version: str, form: str
) -> None:
    op = _define_scale_(ns, "int")
    if form == "dispatcher" and not op.is_native:
        _xfail_untagged_dispatcher_call(request, pattern, version)
    if form == "handle":
        call: Callable[[Tensor], Any] = lambda x: op(x, 3)  # noqa: E731
    else:
        target = op.opoverload

        def call(x: Tensor) -> Any:
            target(x, 3)
            return x

    fn, make = inplace_patterns(call)[pattern]
    assert_compiled_matches_eager(fn, make, version)


def _xfail_untagged_dispatcher_call(request: pytest.FixtureRequest, pattern: str, version: str) -> None:
    """Where a direct ``torch.ops`` call of the fallback's untagged op cannot compile: torch 2.2.

    The handle takes another route there (the functional twin, decided while
    Dynamo traces); a direct dispatcher call is the raw untagged op, and on 2.2
    Inductor lowers no mutable custom op at all. (With ``auto_functionalized`` v1,
    2.3-2.5 or the v2 switch off, a mutated view of an intermediate compiles right
    through ``_fixes/mutated_views_v1.py``: the "v1" runs here check it.)
    """
    if not compiler_lowers_mutable_ops():
        reason = f"torch {torch.__version__}: Inductor cannot lower a mutable custom op (call it through the handle)"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


# -- functional + out pairs ------------------------------------------------------------


def _to_out_variant() -> Callable[[Any], Any] | None:
    try:
        from torch._library._out_variant import to_out_variant
    except ImportError:
        return None
    return to_out_variant  # type: ignore[no-any-return]


@pytest.mark.parametrize("how", ["define", "custom_op"])
@pytest.mark.parametrize("pair", [False, True], ids=["unpaired", "pair"])
def test_functional_and_out_overload_are_a_pair(path: str, ns: str, how: str, pair: bool) -> None:
    _define_functional(ns, how)
    op = _define_scale_out(ns, "out", pair=pair)
    functional = _packet(ns, "scale").default
    to_out_variant = _to_out_variant()
    if op.is_native and pair:
        assert to_out_variant is not None
        assert to_out_variant(functional) is op.opoverload
        assert op.paired
    elif to_out_variant is not None:
        assert to_out_variant(functional) is None  # not asked to pair, or untagged: nothing to pair
        assert not op.paired

    x = torch.randn(4, 3)
    # eager, opcheck, compiled and exported, everywhere
    torch.testing.assert_close(op(x, out=torch.empty(4, 3)), functional(x))
    tagged_ops.opcheck(op, (x,), {"out": torch.empty(4, 3)})

    def uses_both(x: Tensor, o: Tensor) -> Tensor:
        y = functional(x) + 1
        op(y[1:3], out=o[:2])
        return o + functional(o)

    assert_compiled_matches_eager(uses_both, lambda: (torch.randn(4, 3), torch.zeros(4, 3)))

    class Both(torch.nn.Module):
        def forward(self, x: Tensor, o: Tensor) -> Tensor:
            return uses_both(x, o)

    require_exported_input_mutations()
    exported = torch.export.export(Both(), (x, torch.zeros(4, 3)))
    o1, o2 = torch.zeros(4, 3), torch.zeros(4, 3)
    torch.testing.assert_close(exported.module()(x, o1), uses_both(x, o2))
    torch.testing.assert_close(o1, o2)


def test_inductor_lowers_the_functional_op_to_its_out_overload(path: str, ns: str) -> None:
    _define_functional(ns, "define")
    op = _define_scale_out(ns, "out", pair=True)
    if not (op.is_native and _to_out_variant() is not None):
        pytest.skip("needs native tags: Inductor pairs a functional op only with an overload tagged torch.Tag.out")
    from torch._inductor.utils import run_and_get_code

    functional = _packet(ns, "scale").default
    x = torch.randn(4, 3)
    result, code = run_and_get_code(torch.compile(lambda x: functional(x) + 1, fullgraph=True), x)
    torch.testing.assert_close(result, x * 2 + 1)
    assert f"torch.ops.{ns}.scale.out(" in "\n".join(code)


@pytest.mark.parametrize("shape", ["defaulted-float", "int-list", "out-named-result"])
@pytest.mark.parametrize("definer", ["tagged_ops", "tagged_ops-pair", "custom_op"])
def test_inductor_out_variant_lowering_bug_of_2_13_to_2_15(path: str, ns: str, shape: str, definer: str) -> None:
    """Upstream bug, reproduced with raw ``custom_op``; tagged_ops ops compile right.

    With a ``.out`` overload tagged ``torch.Tag.out`` beside a functional op that
    has a defaulted argument, 2.13-2.15 pass that argument twice; with an
    ``int[]`` argument, they split the list into separate ints; an out buffer
    named other than ``out`` is passed as ``out=``. Raw ``custom_op`` breaks the
    functional op's compiled calls; a tagged_ops ``.out`` does not pair by default,
    and with ``pair=True`` pairs only where the lowering works (tests/test_pairing.py).
    The custom_op case fails once torch fixes it: then compat_matrix.md's note goes.
    """
    if path == "fallback" or not tagged_ops.NATIVE_TAGS or _to_out_variant() is None:
        pytest.skip("only where a .out overload is tagged torch.Tag.out (native tags)")
    lib = torch.library.Library(ns, "FRAGMENT")
    _LIBS.append(lib)
    if shape == "defaulted-float":
        lib.define("scale(Tensor x, float s=2.0) -> Tensor")
        lib.impl("scale", lambda x, s=2.0: x * s, "CompositeExplicitAutograd")
        caps.register_fake(f"{ns}::scale", lambda x, s=2.0: torch.empty_like(x), lib=lib)

        def kernel(x: Tensor, s: float = 2.0, *, out: Tensor) -> Tensor:
            torch.mul(x, s, out=out)
            return out

        call: Callable[[Tensor], Tensor] = lambda x: _packet(ns, "scale").default(x) + 1  # noqa: E731
    elif shape == "out-named-result":
        lib.define("scale(Tensor x) -> Tensor")
        lib.impl("scale", lambda x: x * 2.0, "CompositeExplicitAutograd")
        caps.register_fake(f"{ns}::scale", lambda x: torch.empty_like(x), lib=lib)

        def kernel(x: Tensor, *, result: Tensor) -> Tensor:  # type: ignore[misc]
            torch.mul(x, 2.0, out=result)
            return result

        call = lambda x: _packet(ns, "scale").default(x) + 1  # noqa: E731
    else:
        lib.define("scale(Tensor x, int[] dims) -> Tensor")
        lib.impl("scale", lambda x, dims: x.sum(dims), "CompositeExplicitAutograd")
        caps.register_fake(f"{ns}::scale", lambda x, dims: x.sum(dims), lib=lib)

        def kernel(x: Tensor, dims: list[int], *, out: Tensor) -> Tensor:  # type: ignore[misc]
            torch.sum(x, dims, out=out)
            return out

        call = lambda x: _packet(ns, "scale").default(x, [0]) + 1  # noqa: E731
    if definer.startswith("tagged_ops"):
        tagged_ops.define_out(f"{ns}::scale.out", kernel, pair=definer == "tagged_ops-pair")
        x = torch.randn(4, 3)
        torch.testing.assert_close(torch.compile(call, fullgraph=True)(x), call(x))
        return
    else:
        outs = {"result"} if shape == "out-named-result" else {"out"}
        torch.library.custom_op(f"{ns}::scale.out", kernel, mutates_args=outs, tags=torch.Tag.out)  # type: ignore[attr-defined,call-arg]
    x = torch.randn(4, 3)
    eager = call(x)
    with pytest.raises(
        Exception,
        match=r"expected at most \d+ argument|Expected a value of type 'List\[int\]'|missing value for argument 'result'",
    ):
        torch.testing.assert_close(torch.compile(call, fullgraph=True)(x), eager)
