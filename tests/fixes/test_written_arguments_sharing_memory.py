"""_fixes/written_arguments_sharing_memory.py: two buffers an op writes stay two in a compiled training step.

``lo = t.new_zeros(n); hi = t.new_zeros(n); op(t, lo=lo, hi=hi)`` in grad mode:
AOTAutograd makes the two equal fresh tensors one, and Inductor must not then write
both in place into it. Values, inputs after the step and gradients against eager's.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops._compat_compiler import compiler_lowers_mutable_ops
from tagged_ops._fixes.written_arguments_sharing_memory import torch_reinplaces_them_into_one

from .._raw_programs import _last_json_line
from .._training_step import assert_step_matches_eager, direct, leaf_and_input

_RAW = r"""
import json, torch
fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
lib = torch.library.Library("shared_written", "DEF")
lib.define("cos_sin(Tensor a, Tensor(a!) lo, Tensor(b!) hi) -> ()")
def cos_sin(a, lo, hi):
    lo.copy_(a.cos() * 3)
    hi.copy_(a.sin())
lib.impl("cos_sin", cos_sin, "CompositeExplicitAutograd")
fake("shared_written::cos_sin", lambda a, lo, hi: None, lib=lib)

def program(x, w):
    t = w.detach().reshape(-1)
    lo, hi = t.new_zeros(t.shape), t.new_zeros(t.shape)
    torch.ops.shared_written.cos_sin(t, lo, hi)
    return lo, hi, (w.sin() * x).sum()

def run(fn):
    x = torch.ones(2, 3, dtype=torch.float64)
    w = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).requires_grad_()
    lo, hi, loss = fn(x, w)
    loss.backward()
    return [lo.detach(), hi.detach(), w.grad]

eager = run(program)
torch.compiler.reset()
try:
    compiled = run(torch.compile(program, fullgraph=True))
except Exception:
    compiled = None
print(json.dumps(None if compiled is None else not all(torch.allclose(c, e) for c, e in zip(compiled, eager))))
"""


def test_canary_two_written_arguments_get_one_buffer(record_property: Any) -> None:
    """A raw classic op (tagged_ops never imported) compiles the program wrongly exactly where the
    probe says torch reinplaces both into one buffer, which is where the fix acts."""
    wrong = _last_json_line(_RAW)
    record_property("torch_gets_wrong_in_training", {"two equal fresh buffers one call writes": wrong})
    if wrong is None:
        assert not compiler_lowers_mutable_ops()
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no mutating custom op")
    assert wrong is torch_reinplaces_them_into_one(), {"compiled wrongly": wrong}


def _cos_sin(ns: str, *, compile_functional: bool) -> Any:
    @tagged_ops.define_out(f"{ns}::cos_sin", compile_functional=compile_functional)
    def cos_sin(a: Tensor, *, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        lo.copy_(a.cos() * 3)  # written before ``a`` is read again: wrong if they alias
        hi.copy_(a.sin())
        return lo, hi

    return cos_sin


@pytest.mark.parametrize("route", ["handle", "torch.ops"])
@pytest.mark.parametrize("functional", [False, True], ids=["default", "compile_functional"])
def test_two_equal_fresh_buffers_written_by_one_call(path: str, ns: str, functional: bool, route: str) -> None:
    """The program that found it: both buffers fresh zeros of one shape, the source a reshaped
    view of a detached leaf, and a loss through the leaf."""
    if route == "torch.ops" and not compiler_lowers_mutable_ops():
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no direct call of a mutating custom op")
    cos_sin = _cos_sin(ns, compile_functional=functional)
    if route == "torch.ops":
        cos_sin = direct(cos_sin)

    def program(x0: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        wd = w.detach()
        t1 = wd.reshape(-1)
        t2, t3 = t1.new_zeros(t1.shape), t1.new_zeros(t1.shape)
        cos_sin(t1, lo=t2, hi=t3)
        return wd * 1, t1 * 1, t2, t3, (w.sin() * x0).sum()

    assert_step_matches_eager(program, lambda: leaf_and_input(1))


def test_buffers_that_are_views_of_one_fresh_tensor(path: str, ns: str) -> None:
    """Rows of two equal fresh tensors that overlap once the tensors are one: each keeps its values."""
    cos_sin = _cos_sin(ns, compile_functional=False)

    def program(x0: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        a = torch.zeros(8, 4, dtype=x0.dtype)
        b = torch.zeros(8, 4, dtype=x0.dtype)
        cos_sin(w.detach(), lo=a[:4], hi=b[2:6])
        return a * 1, b * 1, (w.sin() * x0).sum()

    assert_step_matches_eager(program, lambda: leaf_and_input(1))
