"""Postponed annotations, typing.Optional/List and builtin generics, on every release."""

from __future__ import annotations

import torch

import tagged_ops
import tagged_ops._compat_compiler

from . import _postponed_ops


def test_postponed_annotations_define_and_run(path: str, ns: str) -> None:
    scale_, gather_out = _postponed_ops.define(ns)
    # 2.2's fallback schema leaves defaults out (_compat_compiler.schema_defaults_survive_functionalization()); the handle keeps them.
    defaults = scale_.is_native or tagged_ops._compat_compiler.schema_defaults_survive_functionalization()
    d = (lambda text: text) if defaults else (lambda text: text.split("=")[0])
    assert d("float[]? factors=None") in scale_.schema and d("SymInt repeat=1") in scale_.schema
    assert d("Tensor? bias=None") in scale_.schema
    x = torch.ones(2, 3)
    assert scale_(x, [1.0, 2.0, 3.0], 2) is x
    assert torch.equal(x[0], torch.tensor([1.0, 4.0, 9.0]))
    assert scale_(x, bias=torch.ones(3)) is x
    assert torch.equal(x[1], torch.tensor([2.0, 5.0, 10.0]))

    src = torch.arange(5.0)
    o = torch.empty(2)
    assert gather_out(src, [4, 1], out=o) is o
    assert torch.equal(o, torch.tensor([4.0, 1.0]))
    assert gather_out(src, [0, 0], out=o, bias=torch.ones(2)) is o
    assert torch.equal(o, torch.ones(2))
    # only the Tensor-annotated keyword-only parameter is an out buffer
    assert d("Tensor? bias=None") in gather_out.schema  # no alias annotation: not mutated
