"""A tagged ``.out`` never changes how its functional op compiles, unless asked to (``pair=True``).

On torch 2.13+ Inductor lowers compiled calls of a functional op ``ns::op`` to an
overload ``ns::op.out`` tagged ``torch.Tag.out`` (its "out variant"), in code that
never calls ``.out``. That lowering splits ``int[]`` constants, passes defaulted
arguments twice, passes a buffer named other than ``out`` as ``out=``, and ignores
which devices ``.out`` has kernels for. These tests compile functional ops shaped
like bitsandbytes' (``dequantize_4bit``, ``gemv_4bit``, ``dequantize_blockwise``)
after their ``.out`` is defined, on views of inputs and of intermediates, and
compare with eager, on every release and both paths, paired or not.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat as caps
from tagged_ops._fixes import out_variant_pairing

from ._pairing_probe import _PROBES, lowering_passes
from ._views import assert_compiled_matches_eager

_LIBS: list[torch.library.Library] = []

# name -> (functional schema's inputs, functional kernel, a call's extra arguments, out buffer name)
SIGNATURES: dict[str, tuple[str, Callable[..., Tensor], tuple[Any, ...], str]] = {
    # bitsandbytes::dequantize_4bit: str, int[] and ScalarType constants
    "dequantize_4bit": (
        "Tensor A, Tensor absmax, int blocksize, str quant_type, int[] shape, ScalarType dtype",
        lambda A, absmax, blocksize, quant_type, shape, dtype: (A * absmax.sum() + blocksize).reshape(shape).to(dtype),
        (2, "nf4", [2, 6], torch.float64),
        "out",
    ),
    # bitsandbytes::gemv_4bit: an int[] between Tensors
    "gemv_4bit": (
        "Tensor A, Tensor B, int[] shapeB, Tensor absmax, Tensor code, int blocksize",
        lambda A, B, shapeB, absmax, code, blocksize: (A + B.sum() + absmax.sum() + code.sum() * blocksize).reshape(
            shapeB
        ),
        ([3, 4],),
        "out",
    ),
    # bitsandbytes::dequantize_blockwise: no list, no default (the lowering handles it)
    "dequantize_blockwise": (
        "Tensor A, Tensor absmax, Tensor code, int blocksize, ScalarType dtype",
        lambda A, absmax, code, blocksize, dtype: (A * absmax.sum() + code.sum() * blocksize).to(dtype),
        (3, torch.float64),
        "out",
    ),
    "defaulted": ("Tensor A, float s=2.0", lambda A, s=2.0: A * s, (), "out"),
    "optional-tensor": (
        "Tensor A, Tensor? bias=None",
        lambda A, bias=None: A * 3 if bias is None else A + bias,
        (),
        "out",
    ),
    "out-named-result": ("Tensor A", lambda A: A * 5, (), "result"),
}
TENSOR_INPUTS = {"dequantize_4bit": 2, "gemv_4bit": 1, "dequantize_blockwise": 1}


def _tensor_args(name: str, x: Tensor) -> tuple[Tensor, ...]:
    """The functional op's Tensor arguments after ``A``, made from ``x`` (so they follow its views)."""
    extra = {"dequantize_4bit": (x[:1] * 0 + 1,), "gemv_4bit": (x[:1] * 0 + 2, x[:2] * 0 + 1, x[:1] * 0)}
    return extra.get(name, (x[:1] * 0 + 0.5,) if name == "dequantize_blockwise" else ())


def _define_pair(ns: str, name: str, *, pair: bool, out_devices: str | None) -> tuple[Any, tagged_ops.TaggedOp]:
    """The functional op (CPU kernel, as bitsandbytes' CPU backend) and its ``.out``, declared with tagged_ops."""
    inputs, kernel, _, out = SIGNATURES[name]
    lib = torch.library.Library(ns, "FRAGMENT")
    _LIBS.append(lib)
    lib.define(f"op({inputs}) -> Tensor")
    lib.impl("op", kernel, "CPU")
    lib.impl("op", kernel, "CUDA")
    caps.register_fake(f"{ns}::op", kernel, lib=lib)
    out_op = tagged_ops.declare_out(
        f"{ns}::op.out", f"({inputs}, *, Tensor(a!) {out}) -> Tensor(a!)", classic_kernels=True, pair=pair
    )

    @out_op.register_kernel(out_devices)
    def _(*args: Any, **kwargs: Any) -> None:
        kwargs.pop(out).copy_(kernel(*args, **kwargs))

    return getattr(torch.ops, ns).op.default, out_op


def _functional_call(name: str, functional: Any) -> Callable[[Tensor], Tensor]:
    extra = SIGNATURES[name][2]

    def call(x: Tensor) -> Tensor:
        rest = _tensor_args(name, x)
        if name == "gemv_4bit":
            return functional(x, rest[0], extra[0], rest[1], rest[2], 4)
        if name == "dequantize_4bit":
            return functional(x, rest[0], *extra)
        if name == "dequantize_blockwise":
            return functional(x, rest[0], rest[0], *extra)
        return functional(x)

    return call


@pytest.mark.parametrize("name", sorted(SIGNATURES))
@pytest.mark.parametrize("pair", [False, True], ids=["unpaired", "pair"])
@pytest.mark.parametrize("out_devices", [None, "cuda"], ids=["out-every-device", "out-cuda-only"])
def test_functional_op_compiles_like_eager_after_its_out_is_defined(
    path: str, ns: str, name: str, pair: bool, out_devices: str | None
) -> None:
    functional, out_op = _define_pair(ns, name, pair=pair, out_devices=out_devices)
    call = _functional_call(name, functional)

    def on_views(x: Tensor) -> Tensor:
        h = x * 2  # an intermediate
        return call(x[1:]) + call(h[1:]) + 1  # a view of an input, a view of an intermediate

    assert_compiled_matches_eager(on_views, lambda: (torch.randn(13),))
    # Pairing only where asked, on the native path, and where the lowering works.
    assert not out_op.paired or (pair and out_op.is_native and out_devices is None)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_out_variant_pairs_only_when_asked_and_the_lowering_works(path: str, ns: str, name: str) -> None:
    _, unpaired = _define_pair(ns, name, pair=False, out_devices=None)
    assert unpaired.paired is False  # the default keeps the functional op as it was
    _, paired = _define_pair(f"{ns}_p", name, pair=True, out_devices=None)
    if not (paired.is_native and _inductor_pairs()):
        assert paired.paired is False  # no torch.Tag.out: nothing for Inductor to pair
        return
    kinds = out_variant_pairing.argument_kinds(paired.opoverload)
    assert paired.paired == (not kinds & out_variant_pairing.MANGLED_KINDS)


def _inductor_pairs() -> bool:
    try:
        import torch._library._out_variant  # noqa: F401
    except ImportError:
        return False
    return True


def test_paired_out_variant_is_what_inductor_calls(path: str, ns: str) -> None:
    functional, out_op = _define_pair(ns, "dequantize_blockwise", pair=True, out_devices=None)
    if not out_op.paired:
        pytest.skip("no out-variant pairing here (needs native tags on a torch whose Inductor pairs)")
    from torch._inductor.utils import run_and_get_code

    call = _functional_call("dequantize_blockwise", functional)
    x = torch.randn(12)
    result, code = run_and_get_code(torch.compile(lambda x: call(x) + 1, fullgraph=True), x)
    torch.testing.assert_close(result, call(x) + 1)
    assert f"torch.ops.{ns}.op.out(" in "\n".join(code)


@pytest.mark.parametrize("kind", sorted(_PROBES))
def test_canary_out_variant_call_still_mangles_arguments(kind: str) -> None:
    """Upstream bug (2.13-2.15): the out-variant call mangles these argument kinds.

    Fails once torch fixes a kind: then take it out of ``MANGLED_KINDS`` where the fix
    is (tagged_ops/_fixes/out_variant_pairing.py), so ``pair=True`` pairs such ops again.
    """
    if not _inductor_pairs():
        pytest.skip(f"torch {torch.__version__}'s Inductor pairs no out variants")
    assert kind in out_variant_pairing.MANGLED_KINDS
    assert lowering_passes(kind) is False


def test_out_without_a_functional_op_is_not_paired(path: str, ns: str) -> None:
    op = tagged_ops.declare_out(f"{ns}::solo.out", "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", pair=True)
    assert op.paired is False
