"""CUDA graphs (``torch.compile(mode="reduce-overhead")``) with tagged ops: eager's values, never skipped more.

torch records a compiled graph into a CUDA graph and replays it, except where it
skips cudagraphs (it counts each skip, "mutated inputs" among the reasons:
flashinfer#403). A tagged op's writes must replay like ATen's: the same values as
eager on every replay, and cudagraphs skipped exactly where the same program written
with ATen's in-place ops is skipped. CUDA only: elsewhere these report themselves
skipped with the reason.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops

pytestmark = pytest.mark.parametrize("tagged_ops_device", ["cuda"], indirect=True)


def _ops(ns: str) -> tuple[Any, Any]:
    @tagged_ops.define_inplace(f"{ns}::sin_")
    def sin_(x: Tensor) -> Tensor:
        return x.sin_()

    @tagged_ops.define_out(f"{ns}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        return torch.sin(x, out=out)

    return sin_, sin_out


def _programs(sin_: Any, sin_out: Any) -> dict[str, tuple[Callable[..., Tensor], Callable[..., Tensor]]]:
    """name -> (the program with tagged ops, the same with ATen's)."""

    def aten_out(x: Tensor, *, out: Tensor) -> Tensor:
        return torch.sin(x, out=out)

    def build(inplace: Any, out: Any) -> dict[str, Callable[..., Tensor]]:
        def inplace_on_an_intermediate(x: Tensor, o: Tensor) -> Tensor:
            y = x * 2
            inplace(y[1:])
            return y + 1

        def out_into_an_intermediate(x: Tensor, o: Tensor) -> Tensor:
            y = torch.empty_like(x)
            out(x + 1, out=y)
            return y * 3

        def inplace_on_an_input(x: Tensor, o: Tensor) -> Tensor:
            inplace(x)
            return x * 2

        def out_into_an_input(x: Tensor, o: Tensor) -> Tensor:
            out(x, out=o)
            return o + x

        return {
            f.__name__: f
            for f in (inplace_on_an_intermediate, out_into_an_intermediate, inplace_on_an_input, out_into_an_input)
        }

    ours, aten = build(sin_, sin_out), build(lambda t: t.sin_(), aten_out)
    return {name: (ours[name], aten[name]) for name in ours}


PROGRAMS = ("inplace_on_an_intermediate", "out_into_an_intermediate", "inplace_on_an_input", "out_into_an_input")


def _skips() -> int:
    from torch._dynamo.utils import counters

    return sum(counters["inductor"].get(k, 0) for k in ("cudagraph_skips",))


def _replays(program: Callable[..., Tensor], device: str) -> tuple[list[Tensor], int]:
    """Three calls of the compiled program on fresh inputs: each call's results, and the skips counted."""
    torch.compiler.reset()
    compiled = torch.compile(program, mode="reduce-overhead", fullgraph=True)
    before = _skips()
    results = []
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x, o = torch.randn(8, 4, generator=gen).to(device), torch.zeros(8, 4).to(device)
        eager = program(x.clone(), o.clone())
        got = compiled(x, o)
        torch.testing.assert_close(got, eager)
        results.append(got.clone())
    return results, _skips() - before


@pytest.mark.parametrize("name", PROGRAMS)
def test_reduce_overhead_replays_eagers_values_and_skips_where_aten_does(
    ns: str, path: str, name: str, tagged_ops_device: str
) -> None:
    ours, aten = _programs(*_ops(ns))[name]
    _, aten_skips = _replays(aten, tagged_ops_device)
    _, our_skips = _replays(ours, tagged_ops_device)
    assert (our_skips > 0) == (aten_skips > 0), {"tagged_ops skipped": our_skips, "ATen skipped": aten_skips}
