"""The test kit's compiled and exported checks: each runs the op's call compiled (or exported) against eager."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from .._handle import TaggedOp
from ._variants import Sample

__all__ = ["Slot", "check_compile", "check_compile_clone", "check_export", "clones_to_try", "same", "slots_of"]


def same(a: Tensor, b: Tensor) -> str | None:
    """None where ``a`` and ``b`` hold the same values (NaNs alike), else what differs."""
    try:
        torch.testing.assert_close(a.cpu(), b.cpu(), equal_nan=True)
    except AssertionError as e:
        return " ".join(str(e).split())[:300]
    return None


def check_export(op: TaggedOp, sample: Sample, eager_mutated: tuple[Any, ...]) -> None:
    """Export a module that holds the mutated tensors as buffers and takes the other tensors as inputs."""
    mutated_ids = {id(t) for t in op.mutated_in_call(sample.args, sample.kwargs)}
    values = [*sample.args, *sample.kwargs.values()]
    buffers = [v for v in values if isinstance(v, Tensor) and id(v) in mutated_ids]
    inputs = tuple(v for v in values if isinstance(v, Tensor) and id(v) not in mutated_ids)
    # Where each call argument comes from, decided here: forward must stay traceable
    # and close over no tensor (strict export refuses that).
    plan: list[tuple[str, Any]] = []
    for v in values:
        if isinstance(v, Tensor):
            pool = buffers if id(v) in mutated_ids else inputs
            plan.append(("buffer" if pool is buffers else "input", next(i for i, t in enumerate(pool) if t is v)))
        else:
            plan.append(("const", v))
    n_args, keywords, n_buffers = len(sample.args), list(sample.kwargs), len(buffers)

    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for i, t in enumerate(buffers):
                self.register_buffer(f"mutated{i}", t)

        def forward(self, *tensors: Tensor) -> Any:
            call = [
                getattr(self, f"mutated{i}") if kind == "buffer" else tensors[i] if kind == "input" else i
                for kind, i in plan
            ]
            op(*call[:n_args], **dict(zip(keywords, call[n_args:], strict=True)))
            return tuple(getattr(self, f"mutated{i}").clone() for i in range(n_buffers))

    _assert_as_eager(op, torch.export.export(Holder(), inputs).module()(*inputs), eager_mutated)


def check_compile(op: TaggedOp, sample: Sample, eager_mutated: tuple[Any, ...]) -> None:
    torch.compiler.reset()
    with torch.no_grad():
        torch.compile(lambda *a, **k: op(*a, **k), fullgraph=True)(*sample.args, **sample.kwargs)
    _assert_as_eager(op, op.mutated_in_call(sample.args, sample.kwargs), eager_mutated)


def _assert_as_eager(op: TaggedOp, got: Sequence[Tensor], eager_mutated: tuple[Any, ...]) -> None:
    for name, g, want in zip(op.mutated_args, got, eager_mutated, strict=True):
        if (diff := same(g, want)) is not None:
            raise AssertionError(f"'{name}' differs from eager: {diff}")


Slot = tuple[str, "int | str"]  # ("args", position) or ("kwargs", name)


def slots_of(sample: Sample) -> list[Slot]:
    """Every argument's place in the call, positional first."""
    return [("args", i) for i in range(len(sample.args))] + [("kwargs", k) for k in sample.kwargs]


def clones_to_try(op: TaggedOp, sample: Sample) -> list[tuple[Slot, int]]:
    """(slot of a read Tensor, index of the mutated tensor it is shaped like), for the clone pattern."""
    mutated = op.mutated_in_call(sample.args, sample.kwargs)
    found = []
    for slot in slots_of(sample):
        value = sample.args[slot[1]] if slot[0] == "args" else sample.kwargs[slot[1]]  # type: ignore[index]
        if not isinstance(value, Tensor) or any(value is m for m in mutated):
            continue
        for index, m in enumerate(mutated):
            if isinstance(m, Tensor) and (m.shape, m.dtype, m.device) == (value.shape, value.dtype, value.device):
                found.append((slot, index))
                break
    return found


def check_compile_clone(op: TaggedOp, sample: Sample, slot: Slot, index: int) -> None:
    """``y = m.clone(); op(..., y, ...)``: compiled must equal eager."""
    where, key = slot
    name = f"argument {key}" if where == "args" else f"'{key}'"

    def run(*args: Any, **kwargs: Any) -> None:
        copy = op.mutated_in_call(args, kwargs)[index].clone()
        if where == "args":
            args = (*args[: int(key)], copy, *args[int(key) + 1 :])
        else:
            kwargs = {**kwargs, str(key): copy}
        op(*args, **kwargs)

    def fresh(source: Sample) -> Sample:  # tensors of their own, not views: 2.3-2.5 compile views through the twin
        own = lambda v: v.clone() if isinstance(v, Tensor) else v  # noqa: E731
        return Sample(source.label, tuple(map(own, source.args)), {k: own(v) for k, v in source.kwargs.items()})

    start = fresh(sample)
    if op.kind == "out":  # what the buffer holds is garbage to the op: make the clone's rows tell apart
        with torch.no_grad():
            for t in op.mutated_in_call(start.args, start.kwargs):
                t.copy_(torch.arange(t.numel(), device=t.device).reshape(t.shape) % 251)
    eager = fresh(start)
    with torch.no_grad():
        run(*eager.args, **eager.kwargs)
    compiled = fresh(start)
    torch.compiler.reset()
    with torch.no_grad():
        torch.compile(run, fullgraph=True)(*compiled.args, **compiled.kwargs)
    for mutated_name, g, want in zip(
        op.mutated_args,
        op.mutated_in_call(compiled.args, compiled.kwargs),
        op.mutated_in_call(eager.args, eager.kwargs),
        strict=True,
    ):
        if (diff := same(g, want)) is not None:
            raise AssertionError(  # the remedy first: _brief keeps 300 characters
                f"compiled `{name} = {op.mutated_args[index]}.clone(); op(...)` differs from eager in "
                f"'{mutated_name}': Inductor dropped the clone (pytorch/pytorch#198031), which tagged_ops should "
                f"keep (please report it); defining the op with compile_functional=True avoids it. {diff}"
            )
