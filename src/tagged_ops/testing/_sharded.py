"""``check_sharded``: a handle on DTensors, eager and compiled, against the same call on plain tensors.

Run inside an initialized process group (each rank runs the same check on the same
examples); nothing of ``torch.distributed.tensor`` is imported before it is called.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from .. import _compat_dtensor
from .._contract import sharding_unavailable
from .._handle import TaggedOp
from ._check import Example, _as_sample, _brief
from ._compiled import Slot, same, slots_of
from ._variants import Sample

__all__ = ["check_sharded"]


def check_sharded(
    op: TaggedOp,
    examples: Sequence[Example],
    mesh: Any,
    *,
    placements: Sequence[Any] | None = None,
    compile: bool = True,
) -> str:
    """Test ``op`` on DTensors of a 1-dimensional ``mesh``, with the sharding rule you registered
    through :meth:`TaggedOp.register_sharding`. Call it on every rank of the mesh.

    ``examples`` are calls in the handle's form on plain tensors, as for :func:`check`;
    the first rank's values are broadcast, so every rank tests the same call. For every
    example and every placement (default: ``Shard(d)`` for each dimension of the first
    Tensor argument, then ``Replicate()``), each Tensor argument is distributed with that
    placement (``Replicate()`` where it has no such dimension), and:

    * ``eager``: the call runs; a refusal is reported with the error, and with the
      arguments it changed if it changed any;
    * ``returns``: it returns the very DTensor(s) it wrote (an in-place op its input, an
      out= op the caller's ``out``);
    * ``placements``: every argument keeps its placement (a written DTensor is never
      redistributed);
    * ``values``: the written DTensors hold what the same call writes on plain tensors, and
      the read ones are unchanged;
    * ``compile`` (with ``compile``): ``torch.compile(fullgraph=True)`` of the call writes the
      same values, and keeps the placements;
    * ``compile-intermediate`` (with ``compile``): so does a compiled program that writes
      clones of the written arguments made inside it.

    Raises AssertionError with one line per (example, placement, stage) that failed;
    returns a one-line summary otherwise.

    >>> import torch.distributed as dist
    >>> from torch.distributed.device_mesh import init_device_mesh
    >>> from tagged_ops.testing import check_sharded
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # one rank, for the example
    >>> mesh = init_device_mesh("cpu", (1,))
    >>> _ = scale_.register_sharding(tagged_ops.pointwise_sharding)
    >>> print(check_sharded(scale_, [((torch.arange(8.0).reshape(4, 2),),)], mesh, compile=False))
    docs::scale_: tagged_ops.testing.check_sharded passed 12 checks on 1 example(s) and 3 placement(s) (... path)
    >>> dist.destroy_process_group()
    """
    if _compat_dtensor.register_sharding() is None:
        raise sharding_unavailable(op.qualname)
    from torch.distributed.tensor import Replicate, Shard

    if mesh.ndim != 1:
        raise ValueError(f"{op.qualname}: check_sharded takes a 1-dimensional mesh, not a {mesh.ndim}-dimensional one")
    samples = [_broadcast(_as_sample(ex), mesh) for ex in examples]
    failures: list[str] = []
    checks = 0
    tried: set[str] = set()
    for number, sample in enumerate(samples):
        choices = list(placements) if placements is not None else _default_placements(sample, Shard, Replicate)
        for placement in choices:
            tried.add(repr(placement))
            label = f"example {number} on {placement!r}"
            made, messages = _check_one(op, sample, mesh, placement, Replicate, compile)
            checks += made
            failures.extend(f"{op.qualname} [{label}] {m}" for m in messages)
    if failures:
        raise AssertionError(
            f"{op.qualname}: tagged_ops.testing.check_sharded found {len(failures)} failure(s)\n" + "\n".join(failures)
        )
    path = "native" if op.is_native else "fallback"
    return (
        f"{op.qualname}: tagged_ops.testing.check_sharded passed {checks} checks on "
        f"{len(samples)} example(s) and {len(tried)} placement(s) ({path} path)"
    )


def _default_placements(sample: Sample, shard: Callable[[int], Any], replicate: Callable[[], Any]) -> list[Any]:
    first = next((v for v in (*sample.args, *sample.kwargs.values()) if isinstance(v, Tensor)), None)
    dims = first.dim() if first is not None else 0
    return [shard(d) for d in range(dims)] + [replicate()]


def _broadcast(sample: Sample, mesh: Any) -> Sample:
    """The sample with the mesh's first rank's values on every rank (each rank built its own)."""
    source = int(mesh.mesh.flatten()[0].item())
    group = mesh.get_group()

    def from_first_rank(t: Tensor) -> Tensor:
        copy = t.detach().clone()
        torch.distributed.broadcast(copy, src=source, group=group)
        return copy

    return sample.mapped("", from_first_rank)


def _check_one(
    op: TaggedOp, sample: Sample, mesh: Any, placement: Any, replicate: Callable[[], Any], compile: bool
) -> tuple[int, list[str]]:
    from torch.distributed.tensor import distribute_tensor

    def placed(t: Tensor) -> Tensor:
        dim = getattr(placement, "dim", None)
        fits = dim is None or -t.dim() <= dim < t.dim()
        return distribute_tensor(t.clone(), mesh, [placement if fits else replicate()])

    def distributed() -> Sample:
        return sample.mapped("", placed)

    expected = sample.clone()
    with torch.no_grad():
        op(*expected.args, **expected.kwargs)
    want = op.mutated_in_call(expected.args, expected.kwargs)
    slots = _written_slots(op, sample)

    call = distributed()
    before = _placements_and_values(call)
    try:
        with torch.no_grad():
            result = op(*call.args, **call.kwargs)
    except Exception as e:  # noqa: BLE001 - reported per example and placement
        changed = _changed(before, _placements_and_values(call))
        touched = f"; and it changed {', '.join(changed)}" if changed else "; every argument untouched"
        return 1, [f"eager: raised {_brief(e)}{touched}"]
    checks, messages = 4, []
    written = op.mutated_in_call(call.args, call.kwargs)
    returned = result if len(written) > 1 and type(result) is tuple else (result,)
    if len(returned) != len(written) or any(a is not b for a, b in zip(returned, written, strict=False)):
        messages.append(f"returns: returned {type(result).__name__}, not the DTensor(s) it wrote {op.mutated_args}")
    after = _placements_and_values(call)
    written_ids = {id(t) for t in written}
    for name, (placements_before, _) in before.items():
        if after[name][0] != placements_before:
            messages.append(f"placements: {name} was placed {placements_before}, is now {after[name][0]}")
    for (name, (_, value)), tensor in zip(before.items(), _tensors(call), strict=True):
        if id(tensor) not in written_ids and (diff := same(after[name][1], value)) is not None:
            messages.append(f"values: {name} is read, but changed: {diff}")
    messages.extend(_against(op, "values", written, want))
    if compile:
        checks += 2
        for stage, program in (("compile", _call(op, slots)), ("compile-intermediate", _into_clones(op, slots))):
            compiled = distributed()
            placed_as = [_placements(t) for t in _take(compiled.args, compiled.kwargs, slots)]
            torch.compiler.reset()
            try:
                with torch.no_grad():
                    got = torch.compile(program, fullgraph=True)(*compiled.args, **compiled.kwargs)
            except Exception as e:  # noqa: BLE001
                messages.append(f"{stage}: raised {_brief(e)}")
                continue
            # the caller's DTensors, written in place; or the clones the program wrote and returned
            held = _take(compiled.args, compiled.kwargs, slots) if stage == "compile" else got
            messages.extend(_against(op, stage, held, want))
            for name, t, before_call in zip(op.mutated_args, held, placed_as, strict=True):
                if _placements(t) != before_call:
                    messages.append(f"{stage}: {name!r} was placed {before_call}, is now {_placements(t)}")
    return checks, messages


def _written_slots(op: TaggedOp, sample: Sample) -> list[Slot]:
    """Where the written tensors sit in the call, found outside the compiled programs."""
    written = op.mutated_in_call(sample.args, sample.kwargs)
    slots = slots_of(sample)
    value = lambda slot: sample.args[slot[1]] if slot[0] == "args" else sample.kwargs[slot[1]]  # type: ignore[index]  # noqa: E731
    return [next(slot for slot in slots if value(slot) is t) for t in written]


def _take(args: tuple[Any, ...], kwargs: dict[str, Any], slots: list[Slot]) -> tuple[Tensor, ...]:
    return tuple(args[int(key)] if where == "args" else kwargs[str(key)] for where, key in slots)


def _call(op: TaggedOp, slots: list[Slot]) -> Callable[..., tuple[Tensor, ...]]:
    def call(*args: Any, **kwargs: Any) -> tuple[Tensor, ...]:
        op(*args, **kwargs)
        return _take(args, kwargs, slots)

    return call


def _into_clones(op: TaggedOp, slots: list[Slot]) -> Callable[..., tuple[Tensor, ...]]:
    """The call, with every written argument replaced by a clone made inside the compiled program."""

    def program(*args: Any, **kwargs: Any) -> tuple[Tensor, ...]:
        positional, kwargs = list(args), dict(kwargs)
        for where, key in slots:
            if where == "args":
                positional[int(key)] = positional[int(key)].clone()
            else:
                kwargs[str(key)] = kwargs[str(key)].clone()
        args = tuple(positional)
        op(*args, **kwargs)
        return _take(args, kwargs, slots)

    return program


def _against(op: TaggedOp, stage: str, got: Sequence[Any], want: Sequence[Tensor]) -> list[str]:
    messages = []
    for name, g, w in zip(op.mutated_args, got, want, strict=True):
        full = g.full_tensor() if hasattr(g, "full_tensor") else g
        if (diff := same(full, w)) is not None:
            messages.append(f"{stage}: {name!r} differs from the call on plain tensors: {diff}")
    return messages


def _placements(t: Any) -> tuple[Any, ...]:
    """A DTensor's placements (Any: mypy reads it as a Tensor)."""
    return tuple(t.placements)


def _tensors(sample: Sample) -> list[Tensor]:
    return [v for v in (*sample.args, *sample.kwargs.values()) if isinstance(v, Tensor)]


def _placements_and_values(sample: Sample) -> dict[str, tuple[tuple[Any, ...], Tensor]]:
    """Each Tensor argument, by its place in the call: its placements and its whole value."""
    names = [f"argument {i}" for i, v in enumerate(sample.args) if isinstance(v, Tensor)]
    names += [repr(k) for k, v in sample.kwargs.items() if isinstance(v, Tensor)]
    return {
        name: (_placements(t), t.full_tensor().clone())  # type: ignore[attr-defined]
        for name, t in zip(names, _tensors(sample), strict=True)
    }


def _changed(
    before: dict[str, tuple[tuple[Any, ...], Tensor]], after: dict[str, tuple[tuple[Any, ...], Tensor]]
) -> list[str]:
    return [
        name
        for name, (placements, value) in before.items()
        if after[name][0] != placements or same(after[name][1], value) is not None
    ]
