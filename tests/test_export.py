"""Contract 9: torch.export of a module that mutates a buffer through our ops matches eager."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
from torch import Tensor

from tagged_ops._selfcheck import SinOps, define_sin_ops

_STRICT = [False, True] if "strict" in inspect.signature(torch.export.export).parameters else [None]


@pytest.fixture
def ops(path: str, ns: str) -> SinOps:
    return define_sin_ops(ns)


class BufferUpdate(torch.nn.Module):
    def __init__(self, ops: SinOps) -> None:
        super().__init__()
        self.ops = ops
        self.register_buffer("state", torch.randn(4))
        self.register_buffer("scratch", torch.zeros(4))

    def forward(self, x: Tensor) -> Tensor:
        self.ops.sin_(self.state)  # in-place on a buffer
        self.ops.sin_out(x, out=self.scratch)  # out= into a buffer
        return x + self.state + self.scratch


@pytest.mark.parametrize("strict", _STRICT, ids=lambda s: f"strict={s}")
def test_export_matches_eager(ops: SinOps, strict: bool | None) -> None:
    eager = BufferUpdate(ops)
    exported_from = copy.deepcopy(eager)
    x = torch.randn(4)
    kwargs = {} if strict is None else {"strict": strict}
    ep = torch.export.export(exported_from, (x,), **kwargs)
    module = ep.module()
    for _ in range(2):  # the second call sees the first call's mutation
        expected = eager(x)
        got = module(x)
        torch.testing.assert_close(got, expected)
    torch.testing.assert_close(module.state, eager.state)
    torch.testing.assert_close(module.scratch, eager.scratch)
    # The program calls our ops (which op on which release: compat_matrix.md).
    assert f"torch.ops.{ops.sin_.qualname.replace('::', '.')}" in ep.graph_module.code
    assert f"torch.ops.{ops.sin_out.qualname.replace('::', '.')}" in ep.graph_module.code
    # Functionalized (the inference IR), it records both buffer mutations and still matches.
    functional = ep.run_decompositions() if hasattr(ep, "run_decompositions") else ep
    assert {"state", "scratch"} <= set(functional.graph_signature.buffers_to_mutate.values())
    fresh = copy.deepcopy(eager)
    torch.testing.assert_close(functional.module()(x), fresh(x))
