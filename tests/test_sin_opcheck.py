"""The sin-op suite, written with tagged_ops.testing: opcheck and the kit's checks on many layouts.

Every example also runs in the kit's variants (non-contiguous, storage offset,
non-contiguous out buffers, float64), on ``tagged_ops_device`` (CPU, and CUDA
where present), on both paths.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops.testing import SinOps, check, define_sin_ops


@pytest.fixture
def ops(path: str, ns: str) -> SinOps:
    return define_sin_ops(ns)


def _inplace_examples(device: str) -> list[Any]:
    return [
        ((torch.randn(5, device=device),),),
        ((torch.randn(0, 3, device=device),),),
        ((torch.randn(5, dtype=torch.float64, device=device),),),
        ((torch.randn(3, 4, device=device).t(),),),  # transposed
        ((torch.randn(10, device=device)[3:8],),),  # storage-offset slice
    ]


def _out_examples(device: str) -> list[Any]:
    return [
        ((torch.randn(5, device=device),), {"out": torch.empty(5, device=device)}),
        ((torch.randn(0, 3, device=device),), {"out": torch.empty(0, 3, device=device)}),
        (
            (torch.randn(5, dtype=torch.float64, device=device),),
            {"out": torch.empty(5, dtype=torch.float64, device=device)},
        ),
        ((torch.randn(3, 2, device=device),), {"out": torch.empty_strided((3, 2), (1, 3), device=device)}),
    ]


def _sin_out_reference(x: Tensor, *, out: Tensor) -> None:
    torch.sin(x, out=out)


def _sin_reference(x: Tensor) -> None:
    x.sin_()


def test_sin_inplace(ops: SinOps, tagged_ops_device: str) -> None:
    check(
        ops.sin_,
        _inplace_examples(tagged_ops_device),
        reference=_sin_reference,
        compile=False,
        devices=[tagged_ops_device],
    )
    check(
        ops.sin_,
        _inplace_examples(tagged_ops_device)[:1],
        reference=_sin_reference,
        dtypes=(torch.float64,),
        devices=[tagged_ops_device],
    )


def test_sin_out(ops: SinOps, tagged_ops_device: str) -> None:
    check(
        ops.sin_out,
        _out_examples(tagged_ops_device),
        reference=_sin_out_reference,
        compile=False,
        devices=[tagged_ops_device],
    )
    check(
        ops.sin_out,
        _out_examples(tagged_ops_device)[:1],
        reference=_sin_out_reference,
        dtypes=(torch.float64,),
        devices=[tagged_ops_device],
    )


def test_numpy_sin_inplace(ops: SinOps) -> None:
    check(ops.numpy_sin_, _inplace_examples("cpu"), reference=_sin_reference, compile=False, devices=["cpu"])
    check(ops.numpy_sin_, _inplace_examples("cpu")[:1], reference=_sin_reference, devices=["cpu"])


def test_numpy_sin_out(ops: SinOps) -> None:
    check(ops.numpy_sin_out, _out_examples("cpu"), reference=_sin_out_reference, compile=False, devices=["cpu"])
    check(ops.numpy_sin_out, _out_examples("cpu")[:1], reference=_sin_out_reference, devices=["cpu"])


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (lambda: torch.empty(4), r"numpy_sin_out: out has shape \(4,\), expected \(5,\)"),
        (
            lambda: torch.empty(5, dtype=torch.float64),
            "numpy_sin_out: out has dtype torch.float64, expected torch.float32",
        ),
    ],
    ids=["shape", "dtype"],
)
def test_numpy_kernel_checks_raise_and_leave_out_untouched(
    ops: SinOps, out: Callable[[], Tensor], message: str
) -> None:
    o = out().fill_(7)
    with pytest.raises(ValueError, match=message):
        ops.numpy_sin_out(torch.randn(5), out=o)
    assert bool((o == 7).all()) and o._version == 1  # only our fill_ bumped it
    result = tagged_ops.opcheck(ops.numpy_sin_out, (torch.randn(5),), {"out": o}, raise_exception=False)
    assert any(r != "SUCCESS" for r in result.values())
    with pytest.raises(AssertionError, match="numpy_sin_out: out has"):
        check(ops.numpy_sin_out, [((torch.randn(5),), {"out": out()})], devices=["cpu"], compile=False)


def test_opcheck_report_and_tolerances(ops: SinOps) -> None:
    result = tagged_ops.opcheck(ops.sin_, (torch.randn(5),), raise_exception=False)
    assert result == {k: "SUCCESS" for k in tagged_ops._opcheck.DEFAULT_TEST_UTILS}
    if tagged_ops._compat.opcheck_accepts_tolerances():
        tagged_ops.opcheck(ops.sin_, (torch.randn(5),), atol=1e-5, rtol=1e-5)
    else:
        with pytest.raises(TypeError, match="takes no atol/rtol"):
            tagged_ops.opcheck(ops.sin_, (torch.randn(5),), atol=1e-5, rtol=1e-5)


def test_opcheck_catches_a_lying_fake(path: str, ns: str) -> None:
    @tagged_ops.define_inplace(f"{ns}::bad_")
    def bad_(x: Tensor) -> Tensor:
        x.sin_()
        return x

    with pytest.warns(UserWarning, match="unnecessary"):
        bad_.register_fake(lambda x: torch._check(False, lambda: "fake refuses"))
    with pytest.raises(Exception, match="fake refuses"):
        tagged_ops.opcheck(bad_, (torch.randn(3),))
