"""Ops written to be audited: every honest kind, and every kind of lie a schema can tell.

Imported by tests/test_audit.py and by the suite it writes for the audit to run;
the namespace is the module's argument (``define(ns)``), so each test gets fresh ops.
"""

from __future__ import annotations

from typing import Any

import torch

#: what the audit must conclude about each op: (verdict, suggestion, writes)
EXPECTED: dict[str, tuple[str, str, dict[str, str]]] = {
    "functional": ("honest", "functional", {}),
    "add_": ("honest", "inplace", {"x": "updates"}),
    "sin_out": ("honest", "out", {"out": "overwrites"}),
    "accumulate": ("honest", "mutates_args", {"acc": "updates"}),
    "hidden_add": ("hides writes", "inplace", {"out": "updates"}),
    "hidden_overwrite": ("hides writes", "out", {"out": "overwrites"}),
    "hidden_pair": ("hides writes", "out", {"out": "overwrites"}),
    "hidden_min": ("hides writes", "mutates_args", {"out": "updates"}),
    "partial_write_": ("hides writes", "inplace", {"out": "updates"}),
    "never_writes_": ("declares writes it never made", "functional", {}),
    "hidden_view": ("hides an alias", "functional", {}),
    "random_out": ("honest", "out", {"out": "overwrites"}),
}
#: ops the audit must report as not observed, with the reason's start
UNOBSERVABLE = {"counter_out": "another run", "once_out": "the kernel failed"}

_COUNTER = [0]


def define(ns: str) -> torch.library.Library:
    lib = torch.library.Library(ns, "DEF")
    key = "CompositeExplicitAutograd"

    def op(schema: str, kernel: Any) -> None:
        lib.define(schema)
        lib.impl(schema.split("(")[0], kernel, key)

    # honest
    op("functional(Tensor x) -> Tensor", lambda x: x * 2)
    op("add_(Tensor(a!) x, Tensor y) -> ()", lambda x, y: (x.add_(y), None)[1])
    op("sin_out(Tensor x, *, Tensor(a!) out) -> ()", lambda x, out: (out.copy_(x.sin()), None)[1])
    op("accumulate(Tensor x, Tensor(a!) acc) -> Tensor", lambda x, acc: (acc.add_(x), x.sum())[1])
    op("random_out(Tensor x, *, Tensor(a!) out) -> ()", lambda x, out: (out.copy_(x + torch.rand_like(x)), None)[1])

    # lies: writes the schema does not declare
    def hidden_add(src: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return src.clone() if out is None else out.add_(src)

    def hidden_overwrite(src: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return src.cos() if out is None else out.copy_(src.cos())

    def hidden_pair(src: torch.Tensor, out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        result = src.abs() if out is None else out.copy_(src.abs())
        return result, (src < 0).long()

    def hidden_min(src: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        took = (src < out).long()
        torch.minimum(out, src, out=out)
        return took

    def partial_write(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        out[index] = src[index]
        return out

    op("hidden_add(Tensor src, Tensor? out=None) -> Tensor", hidden_add)
    op("hidden_overwrite(Tensor src, Tensor? out=None) -> Tensor", hidden_overwrite)
    op("hidden_pair(Tensor src, Tensor? out=None) -> (Tensor, Tensor)", hidden_pair)
    op("hidden_min(Tensor src, Tensor out) -> Tensor", hidden_min)
    op("partial_write_(Tensor src, Tensor index, Tensor out) -> Tensor", partial_write)
    # lies: a declared write that never happens; a returned view the schema calls fresh
    op("never_writes_(Tensor(a!) x, Tensor y) -> ()", lambda x, y: None)
    op("hidden_view(Tensor x) -> Tensor", lambda x: x.view(-1))

    # unobservable: other values on an identical rerun; a kernel that fails the second time
    def counter_out(x: torch.Tensor, *, out: torch.Tensor) -> None:
        _COUNTER[0] += 1
        out.fill_(_COUNTER[0])

    calls = [0]

    def once_out(x: torch.Tensor, *, out: torch.Tensor) -> None:
        calls[0] += 1
        if calls[0] > 1:
            raise RuntimeError("this kernel runs once per process")
        out.copy_(x)

    op("counter_out(Tensor x, *, Tensor(a!) out) -> ()", counter_out)
    op("once_out(Tensor x, *, Tensor(a!) out) -> ()", once_out)
    return lib


def call_every_op(ns: str) -> None:
    """One call of each op, as a library's tests would make them, checking eager results."""
    ops = getattr(torch.ops, ns)
    x, y = torch.tensor([0.5, -1.5, 2.0, -0.25]), torch.tensor([1.0, 0.25, -2.0, 3.0])  # both signs
    assert torch.equal(ops.functional(x), x * 2)
    a = x.clone()
    ops.add_(a, y)
    assert torch.equal(a, x + y)
    o = torch.empty(4)
    ops.sin_out(x, out=o)
    assert torch.equal(o, x.sin())
    acc = torch.zeros(4)
    ops.accumulate(x, acc)
    assert torch.equal(acc, x)
    ops.random_out(x, out=torch.empty(4))
    assert torch.equal(ops.hidden_add(x), x)  # without out: the functional form, nothing written
    o = torch.ones(4)
    assert ops.hidden_add(x, o) is o and torch.equal(o, x + 1)
    o = torch.empty(4)
    ops.hidden_overwrite(x, o)
    assert torch.equal(o, x.cos())
    o = torch.empty(4)
    first, sign = ops.hidden_pair(x, o)
    assert torch.equal(o, x.abs()) and torch.equal(sign, (x < 0).long())
    o = torch.zeros(4)
    ops.hidden_min(x, o)
    assert torch.equal(o, torch.minimum(torch.zeros(4), x))
    o = torch.zeros(4)
    ops.partial_write_(x, torch.tensor([0, 2]), o)
    assert torch.equal(o, torch.tensor([x[0].item(), 0.0, x[2].item(), 0.0]))
    a = x.clone()
    ops.never_writes_(a, y)
    assert torch.equal(ops.hidden_view(x.reshape(2, 2)), x)
    ops.counter_out(x, out=torch.empty(4))
    o = torch.empty(4)
    ops.once_out(x, out=o)
    assert torch.equal(o, x)
