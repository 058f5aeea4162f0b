"""_fixes/returned_written_input.py: a graph that returns an input it writes keeps every output in its slot.

The training step it covers: a leaf that requires grad is written through ``.detach()``
(AOTAutograd replays that write outside the graph), and the graph returns another
input it writes in place (``x.add_(1)``, ``torch.add(..., out=x)``, an op's out=
buffer). Every output, input and gradient is compared with eager's.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat_compiler
from tagged_ops._compat_compiler import compiler_lowers_mutable_ops
from tagged_ops._fixes import returned_written_input

from .._raw_programs import _last_json_line
from .._training_step import assert_step_matches_eager, direct, leaf_and_input

_RAW = r"""
import json, torch

def program(x, w):  # ATen alone: a write replayed outside the graph, then a returned written input
    w.detach().add_(1)
    y = x * 2
    return y, x.add_(1)

def run(fn):
    x, w = torch.arange(4.0), torch.zeros(4, requires_grad=True)
    y, z = fn(x, w)
    return [y.tolist(), z.tolist(), x.tolist(), w.tolist()]

eager = run(program)
torch.compiler.reset()
print(json.dumps(run(torch.compile(program, fullgraph=True)) != eager))
"""


def torch_misplaces_the_input() -> bool | None:
    """What the fix asks of this torch (None: it calls no ``create_functionalized_fn`` the fix knows)."""
    for name in returned_written_input.CALLERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        original = getattr(module, "create_functionalized_fn", None)
        if original is not None:
            original = getattr(original, "__wrapped__", original)
            return _compat_compiler.aot_misplaces_returned_written_inputs(original)
    return None


def test_canary_a_returned_written_input_takes_another_outputs_slot(record_property: Any) -> None:
    """torch (ATen alone, where tagged_ops was never imported) compiles the program wrongly exactly
    where the probe says so, which is where the fix acts. Fails once torch fixes it without the
    probe noticing (retire the fix, or teach the probe), or where torch is wrong and the fix idle."""
    misplaces = torch_misplaces_the_input()
    wrong = _last_json_line(_RAW)
    record_property("torch_gets_wrong_in_training", {"return an input written in the graph": wrong})
    assert wrong is bool(misplaces), {
        "the probe says torch misplaces it": misplaces,
        "torch compiles it wrongly": wrong,
    }


def _ops(ns: str, *, compile_functional: bool) -> tuple[Any, Any]:
    @tagged_ops.define_out(f"{ns}::mix_out", compile_functional=compile_functional)
    def mix_out(a: Tensor, b: Tensor, k: float = 1.0, *, out: Tensor) -> Tensor:
        return out.copy_(a * 2 + b.flip(0) * k)

    @tagged_ops.define_out(f"{ns}::minmax_out", compile_functional=compile_functional)
    def minmax_out(a: Tensor, b: Tensor, flip: bool = False, *, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        low, high = torch.minimum(a, b), torch.maximum(a, b) + a
        if flip:
            low, high = high, low
        lo.copy_(low)
        hi.copy_(high)
        return lo, hi

    return mix_out, minmax_out


@pytest.mark.parametrize("route", ["handle", "torch.ops"])
@pytest.mark.parametrize("functional", [False, True], ids=["default", "compile_functional"])
def test_a_training_step_that_writes_a_detached_leaf_and_returns_an_out_buffer(
    path: str, ns: str, functional: bool, route: str
) -> None:
    """The program that found it: out= into a transposed fresh buffer from ``w.detach()``, then
    ``w.detach()`` and ``x`` written by a two-buffer op, then ATen's out= into ``x`` returned.
    Through ``torch.ops`` the buffer is not transposed: Dynamo refuses a strided out= there, loudly."""
    if route == "torch.ops" and not compiler_lowers_mutable_ops():
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no direct call of a mutating custom op")
    mix_out, minmax_out = _ops(ns, compile_functional=functional)
    transposed = route == "handle"
    if route == "torch.ops":
        mix_out, minmax_out = direct(mix_out), direct(minmax_out)

    def program(x0: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        wd = w.detach()
        t2b = wd.new_zeros(wd.mT.shape)
        t2 = t2b.mT if transposed else t2b
        t3 = mix_out(wd, wd, k=3.0, out=t2)
        t4 = minmax_out(t2, t2, flip=True, lo=wd, hi=x0)[1]
        torch.add(wd, t3, alpha=1, out=t4)
        loss = (w.sin() * x0).sum() + (w * t2b).sum() + (w * t2).sum() + (w * t3).sum() + (w * t4).sum()
        return wd * 1, t2b, t2 * 1, t3 * 1, t4, loss

    assert_step_matches_eager(program, lambda: leaf_and_input(0))


def test_aten_programs_compile_right_once_a_tagged_op_was_traced(ns: str) -> None:
    """The fix is torch's process-wide once installed: ATen's own form of the pattern compiles right too."""

    @tagged_ops.define_inplace(f"{ns}::twice_")
    def twice_(x: Tensor) -> Tensor:
        return x.mul_(2)

    torch.compile(lambda x: twice_(x), fullgraph=True)(torch.ones(2))  # the first trace installs it

    def program(x: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        w.detach().add_(1)
        y = x * 2
        return y, x.add_(1)

    def step(x: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        y, z = program(x, w)
        return y, z, (w.sin() * x).sum()

    assert_step_matches_eager(
        step, lambda: (torch.arange(4.0, dtype=torch.float64), leaf_and_input(0)[1][0].detach().requires_grad_())
    )
