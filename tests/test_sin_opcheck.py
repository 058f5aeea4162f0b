"""The sin-op suite: tagged_ops.opcheck on many layouts, CPU and CUDA, both paths."""

from __future__ import annotations

from typing import Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops._selfcheck import SinOps, define_sin_ops


@pytest.fixture
def ops(path: str, ns: str) -> SinOps:
    return define_sin_ops(ns)


def _inplace_inputs(device: str) -> dict[str, Callable[[], Tensor]]:
    return {
        "randn5": lambda: torch.randn(5, device=device),
        "empty0x3": lambda: torch.randn(0, 3, device=device),
        "float64": lambda: torch.randn(5, dtype=torch.float64, device=device),
        "transposed": lambda: torch.randn(3, 4, device=device).t(),
        "storage-offset": lambda: torch.randn(10, device=device)[3:8],
    }


def _out_inputs(device: str) -> dict[str, Callable[[], tuple[Tensor, Tensor]]]:
    return {
        "randn5": lambda: (torch.randn(5, device=device), torch.empty(5, device=device)),
        "empty0x3": lambda: (torch.randn(0, 3, device=device), torch.empty(0, 3, device=device)),
        "float64": lambda: (torch.randn(5, dtype=torch.float64, device=device), torch.empty(5, dtype=torch.float64, device=device)),
        "noncontiguous-out": lambda: (torch.randn(3, 2, device=device), torch.empty_strided((3, 2), (1, 3), device=device)),
    }


INPLACE_CASES = list(_inplace_inputs("cpu"))
OUT_CASES = list(_out_inputs("cpu"))


@pytest.mark.parametrize("case", INPLACE_CASES)
def test_sin_inplace(ops: SinOps, device: str, case: str) -> None:
    x = _inplace_inputs(device)[case]()
    tagged_ops.opcheck(ops.sin_, (x.clone(),))
    expected = x.sin()
    assert ops.sin_(x) is x
    torch.testing.assert_close(x, expected)


@pytest.mark.parametrize("case", OUT_CASES)
def test_sin_out(ops: SinOps, device: str, case: str) -> None:
    x, o = _out_inputs(device)[case]()
    tagged_ops.opcheck(ops.sin_out, (x,), {"out": o.clone()})
    stride = o.stride()
    assert ops.sin_out(x, out=o) is o
    torch.testing.assert_close(o, x.sin())
    assert o.stride() == stride  # written in place, layout kept


@pytest.mark.parametrize("case", INPLACE_CASES)
def test_numpy_sin_inplace(ops: SinOps, case: str) -> None:
    x = _inplace_inputs("cpu")[case]()
    tagged_ops.opcheck(ops.numpy_sin_, (x.clone(),))
    expected = x.sin()
    assert ops.numpy_sin_(x) is x
    torch.testing.assert_close(x, expected)


@pytest.mark.parametrize("case", OUT_CASES)
def test_numpy_sin_out(ops: SinOps, case: str) -> None:
    x, o = _out_inputs("cpu")[case]()
    tagged_ops.opcheck(ops.numpy_sin_out, (x,), {"out": o.clone()})
    assert ops.numpy_sin_out(x, out=o) is o
    torch.testing.assert_close(o, x.sin())


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (lambda: torch.empty(4), r"numpy_sin_out: out has shape \(4,\), expected \(5,\)"),
        (lambda: torch.empty(5, dtype=torch.float64), "numpy_sin_out: out has dtype torch.float64, expected torch.float32"),
    ],
    ids=["shape", "dtype"],
)
def test_numpy_kernel_checks_raise_and_leave_out_untouched(ops: SinOps, out: Callable[[], Tensor], message: str) -> None:
    o = out().fill_(7)
    with pytest.raises(ValueError, match=message):
        ops.numpy_sin_out(torch.randn(5), out=o)
    assert bool((o == 7).all()) and o._version == 1  # only our fill_ bumped it
    result = tagged_ops.opcheck(ops.numpy_sin_out, (torch.randn(5),), {"out": o}, raise_exception=False)
    assert any(r != "SUCCESS" for r in result.values())


def test_opcheck_report_and_tolerances(ops: SinOps) -> None:
    result = tagged_ops.opcheck(ops.sin_, (torch.randn(5),), raise_exception=False)
    assert result == {k: "SUCCESS" for k in tagged_ops._opcheck.DEFAULT_TEST_UTILS}
    if "atol" in __import__("inspect").signature(torch.library.opcheck).parameters:
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
