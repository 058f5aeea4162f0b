"""Ops declared the way real kernel libraries declare them, through tagged_ops.

bitsandbytes (bitsandbytes/_ops.py) and vLLM define a functional op from a schema
string first and an ``.out`` overload beside it; their arguments are ints,
floats, bools, strs, ``int[]``, ``ScalarType`` and optional Tensors and dtypes,
with defaults; a kernel is registered for every device and then replaced per
device type; in-place overloads are called on views. Each idiom runs eagerly,
under opcheck, compiled (views of inputs and of intermediates) and exported.
"""

from __future__ import annotations

from typing import List, Optional

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat as caps

from ._views import assert_compiled_matches_eager, inplace_patterns, out_patterns, require_exported_input_mutations

_LIBS: list[torch.library.Library] = []

# The functional op, schema-first, as bitsandbytes writes it.
FUNCTIONAL = (
    'dequant(Tensor A, int blocksize=64, float scale=0.5, bool flip=False, str quant_type="add", int[] dims=[0], '
    "ScalarType dtype=float, Tensor? bias=None, ScalarType? acc=None) -> Tensor"
)
# ("ScalarType dtype=float": parsers before 2.13 read only "float"/"long" or a number there.)
# (An argument named "mode" breaks torch's own compile path for mutable ops: redirect_to_mode's
# impl(mode, ...) gets it twice. bitsandbytes calls it quant_type.)
# Its out overload: the same arguments, then the keyword-only buffer (what to_out_variant pairs on).
OUT = (
    '(Tensor A, int blocksize=64, float scale=0.5, bool flip=False, str quant_type="add", int[] dims=[0], '
    "ScalarType dtype=float, Tensor? bias=None, ScalarType? acc=None, *, Tensor(a!) out) -> Tensor(a!)"
)


def _dequant_value(
    A: Tensor,
    blocksize: int = 64,
    scale: float = 0.5,
    flip: bool = False,
    quant_type: str = "add",
    dims: List[int] = [0],  # noqa: B006 - the schema's default
    dtype: torch.dtype = torch.float32,
    bias: Optional[Tensor] = None,
    acc: Optional[torch.dtype] = None,
) -> Tensor:
    y = A.to(acc or A.dtype) * (scale * blocksize / 64)
    y = -y if flip else y
    y = y + A.sum(dims, keepdim=True) if quant_type == "add" else y
    y = y + bias if bias is not None else y
    return y.to(dtype)


def _define(ns: str) -> tagged_ops.TaggedOp:
    lib = torch.library.Library(ns, "FRAGMENT")
    _LIBS.append(lib)
    lib.define(FUNCTIONAL)
    lib.impl("dequant", _dequant_value, "CompositeExplicitAutograd")
    caps.register_fake(
        f"{ns}::dequant",
        lambda A, *args, **kwargs: torch.empty_like(
            A, dtype=kwargs.get("dtype", args[5] if len(args) > 5 else torch.float32)
        ),
        lib=lib,
    )

    def dequant_out(
        A: Tensor,
        blocksize: int = 64,
        scale: float = 0.5,
        flip: bool = False,
        quant_type: str = "add",
        dims: List[int] = [0],  # noqa: B006 - the schema's default, as the library writes it
        dtype: torch.dtype = torch.float32,
        bias: Optional[Tensor] = None,
        acc: Optional[torch.dtype] = None,
        *,
        out: Tensor,
    ) -> Tensor:
        out.copy_(_dequant_value(A, blocksize, scale, flip, quant_type, dims, dtype, bias, acc))
        return out

    return tagged_ops.define_out(f"{ns}::dequant.out", dequant_out, schema=OUT)


CALLS = {
    "defaults": lambda op, x, o: op(x, out=o),
    "positional": lambda op, x, o: op(x, 128, 0.25, True, "none", [1], torch.float32, None, torch.float64, out=o),
    "keywords": lambda op, x, o: op(x, dims=[0, 1], bias=torch.ones(3), acc=torch.float64, scale=2.0, out=o),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_schema_first_out_overload_with_every_argument_type(path: str, ns: str, call: str) -> None:
    op = _define(ns)
    functional = getattr(torch.ops, ns).dequant.default
    assert op.opoverload is getattr(torch.ops, ns).dequant.out
    x = torch.randn(4, 3)
    o = torch.empty(4, 3)
    assert CALLS[call](op, x, o) is o
    expected = CALLS[call](lambda *a, out, **k: functional(*a, **k), x, None)
    torch.testing.assert_close(o, expected)
    tagged_ops.opcheck(op, (x,), {"out": torch.empty(4, 3), "dims": [1], "acc": torch.float64})


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(out_patterns(lambda x, o: o)))
def test_schema_first_out_overload_compiles_like_eager(path: str, ns: str, pattern: str, version: str) -> None:
    op = _define(ns)
    fn, make = out_patterns(lambda x, o: op(x, 128, flip=True, dims=[1], acc=torch.float64, out=o))[pattern]
    assert_compiled_matches_eager(fn, make, version)


def test_schema_first_out_overload_exports(path: str, ns: str) -> None:
    op = _define(ns)

    class M(torch.nn.Module):
        def forward(self, x: Tensor, o: Tensor) -> Tensor:
            op(x[1:3], dims=[1], out=o[:2])
            return o * 2

    x = torch.randn(4, 3)
    require_exported_input_mutations()
    exported = torch.export.export(M(), (x, torch.zeros(4, 3)))
    o1, o2 = torch.zeros(4, 3), torch.zeros(4, 3)
    torch.testing.assert_close(exported.module()(x, o1), M()(x, o2))
    torch.testing.assert_close(o1, o2)


def _define_minmax(ns: str) -> tagged_ops.TaggedOp:
    @tagged_ops.define_out(f"{ns}::minmax.out")
    def minmax(x: Tensor, dim: int = 0, *, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        torch.amin(x, dim, keepdim=True, out=lo)
        torch.amax(x, dim, keepdim=True, out=hi)
        return lo, hi

    return minmax


def test_several_out_buffers_on_views(path: str, ns: str) -> None:
    op = _define_minmax(ns)

    def fn(x: Tensor, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        y = x * 2
        scratch = hi * 0
        op(y[1:3], 0, lo=lo[1:2], hi=scratch[0:1])
        return lo, scratch + 1

    assert_compiled_matches_eager(fn, lambda: (torch.randn(4, 3), torch.zeros(3, 3), torch.zeros(3, 3)))
    tagged_ops.opcheck(op, (torch.randn(4, 3),), {"lo": torch.empty(1, 3), "hi": torch.empty(1, 3)})


def test_kernel_for_every_device_then_one_per_device_type(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::bump_.Scalar")
    def bump_(x: Tensor, v: float) -> Tensor:
        x.add_(v)
        return x

    x = torch.zeros(3)
    bump_(x, 1.0)
    torch.testing.assert_close(x, torch.ones(3))

    @bump_.register_kernel("cpu")
    def bump_cpu(x: Tensor, v: float) -> Tensor:
        x.add_(10 * v)
        return x

    bump_(x, 1.0)  # the CPU kernel replaced the every-device one for CPU tensors
    torch.testing.assert_close(x, torch.full((3,), 11.0))
    fn, make = inplace_patterns(lambda t: bump_(t, 0.5))["inplace-intermediate-view"]
    assert_compiled_matches_eager(fn, make)
    with torch.device("meta"):
        m = torch.empty(3)
        assert bump_(m, 1.0) is m  # other devices: the every-device kernel still serves (meta: the fake)


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(inplace_patterns(lambda x: x)))
def test_inplace_overloads_on_views(path: str, ns: str, pattern: str, version: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::clamp_.Scalar")
    def clamp_scalar_(x: Tensor, lo: float = 0.0) -> Tensor:
        x.clamp_(min=lo)
        return x

    @tagged_ops.define_inplace(f"{ns}::clamp_.Tensor")
    def clamp_tensor_(x: Tensor, lo: Tensor) -> Tensor:
        x.copy_(torch.maximum(x, lo))
        return x

    assert set(getattr(torch.ops, ns).clamp_.overloads()) == {"Scalar", "Tensor"}

    def both(t: Tensor) -> Tensor:
        clamp_scalar_(t, -0.5)
        return clamp_tensor_(t, torch.full_like(t, -0.25))

    fn, make = inplace_patterns(both)[pattern]
    assert_compiled_matches_eager(fn, make, version)
