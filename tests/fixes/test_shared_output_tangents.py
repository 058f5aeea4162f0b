"""_fixes/shared_output_tangents.py: an output that needs no gradient never takes another output's.

Inductor returns one tensor for two outputs where it can (``h * 1`` and ``h.detach()`` are
``h``), and AOTAutograd marks non-differentiable outputs by tensor. Each program below is
compiled (``fullgraph=True``) against eager: outputs, which of them require grad, and the
gradients of a backward through every output that requires grad.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops

from .._raw_programs import _last_json_line
from .._training_step import assert_step_matches_eager, leaf_and_input

_RAW = r"""
import json, torch

def program(x):  # ATen alone: two views of y, and y.detach(), which Inductor returns as y itself
    y = torch.sin(x)
    return y[0:2], y[2:4], y.detach()

x = torch.randn(4, dtype=torch.float64, requires_grad=True)
outs = torch.compile(program, fullgraph=True)(x)
if any(o.requires_grad for o in outs):
    sum(o.sum() for o in outs if o.requires_grad).backward()
print(json.dumps(x.grad is None))
"""


def test_canary_a_shared_output_loses_its_gradient(record_property: Any) -> None:
    """torch (ATen alone, tagged_ops never imported) drops the gradient of two views whose base
    is also returned detached: measured on 2.2.2, 2.4.1, 2.5.1, 2.13.0 and 2.15.0. Fails once
    torch dealiases the outputs it marks (pytorch/pytorch#195688): then retire the fix."""
    wrong = _last_json_line(_RAW)
    record_property("torch_gets_wrong_in_training", {"an output sharing its tensor with a detached one": wrong})
    assert wrong, f"torch {torch.__version__} keeps the gradient itself: _fixes/shared_output_tangents.py can go"


def _trace_a_tagged_op(ns: str) -> None:
    """The fix is installed at a tagged op's first trace, for every program after it."""

    @tagged_ops.define_inplace(f"{ns}::twice_")
    def twice_(x: Tensor) -> Tensor:
        return x.mul_(2)

    torch.compile(lambda x: twice_(x), fullgraph=True)(torch.ones(2))


def _backward_through_outputs(program: Callable[..., Any], inputs: tuple[Tensor, ...], *, compiled: bool) -> Any:
    """The outputs, which require grad, and the inputs' gradients after a backward through them all."""
    torch.compiler.reset()
    args = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
    outs = (torch.compile(program, fullgraph=True) if compiled else program)(*args)
    differentiable = [o for o in outs if o.requires_grad]
    if differentiable:
        sum(o.sum() for o in differentiable).backward()
    return (
        [o.detach().clone() for o in outs],
        [o.requires_grad for o in outs],
        [None if a.grad is None else a.grad.clone() for a in args],
    )


def _assert_compiled_matches_eager(program: Callable[..., Any], inputs: tuple[Tensor, ...]) -> None:
    eager, compiled = (_backward_through_outputs(program, inputs, compiled=c) for c in (False, True))
    (e_outs, e_requires, e_grads), (c_outs, c_requires, c_grads) = eager, compiled
    assert c_requires == e_requires, ("requires_grad of each output", c_requires, e_requires)
    for c, e in zip(c_outs, e_outs, strict=True):
        torch.testing.assert_close(c, e)
    for c, e in zip(c_grads, e_grads, strict=True):
        assert (c is None) == (e is None), ("gradient", c, e)
        if e is not None:
            torch.testing.assert_close(c, e)


def _views_and_their_base_detached(x: Tensor) -> tuple[Tensor, ...]:
    y = torch.sin(x)
    return y[0:2], y[2:4], y.detach()


def _times_one_and_detached(x: Tensor) -> tuple[Tensor, ...]:
    h = x.sin()
    return h * 1, h.detach()


@pytest.mark.parametrize("program", [_views_and_their_base_detached, _times_one_and_detached])
def test_aten_programs_keep_their_gradients_once_a_tagged_op_was_traced(ns: str, program: Any) -> None:
    _trace_a_tagged_op(ns)
    _assert_compiled_matches_eager(program, (torch.randn(4, dtype=torch.float64, requires_grad=True),))


def test_a_written_leafs_new_value_shared_with_an_output(ns: str) -> None:
    """The loud form (2.15.0: ``TypeError: expected Tensor() for op: input``): a leaf written through
    ``.detach()`` and ``wd * 1`` come out of Inductor as one tensor."""
    _trace_a_tagged_op(ns)

    def step(x: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        wd = w.detach()
        wd.copy_(x * 2)
        x.copy_(wd + 1)
        return wd * 1, x, (w.sin() * x).sum()

    assert_step_matches_eager(step, lambda: leaf_and_input(0))


@pytest.mark.parametrize("functional", [False, True], ids=["default", "compile_functional"])
def test_tagged_ops_writing_a_detached_leaf_whose_new_value_is_returned(ns: str, functional: bool) -> None:
    """A tagged out= op and a tagged in-place op write ``w.detach()`` and an intermediate; the step
    returns the leaf's new value (``wd * 1``) and a product of the written intermediate twice, once
    detached; then two views of such a product and the product detached."""

    @tagged_ops.define_inplace(f"{ns}::scale_", compile_functional=functional)
    def scale_(x: Tensor, k: float) -> Tensor:
        return x.mul_(k)

    @tagged_ops.define_out(f"{ns}::sin_out", compile_functional=functional)
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        return torch.sin(x, out=out)

    def step(x: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        wd = w.detach()
        sin_out(x * 2, out=wd)
        scale_(wd, 3.0)
        h = x * 2
        scale_(h[1:], 0.5)
        g = w * h
        return wd * 1, g * 1, g.detach(), (w.sin() * x).sum() + g.sum()

    assert_step_matches_eager(step, lambda: leaf_and_input(1))

    def outputs(x: Tensor) -> tuple[Tensor, ...]:
        y = torch.sin(x.detach())
        scale_(y, 2.0)
        z = y * x
        return z[0:2], z[2:4], z.detach()

    _assert_compiled_matches_eager(outputs, (torch.randn(4, dtype=torch.float64, requires_grad=True),))
