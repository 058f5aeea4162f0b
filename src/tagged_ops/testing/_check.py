"""``check``: opcheck plus what opcheck misses, on every layout, device and path stage."""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any, Callable, Literal, NamedTuple, Sequence

import torch
from torch import Tensor

from .._handle import TaggedOp
from .._opcheck import opcheck
from ._compiled import check_compile, check_compile_clone, check_export, clones_to_try, same
from ._variants import Sample, variants

__all__ = ["check"]

Example = Sample | tuple[tuple[Any, ...]] | tuple[tuple[Any, ...], dict[str, Any]]


def _as_sample(example: Example) -> Sample:
    if isinstance(example, Sample):
        return example
    args = example[0]
    kwargs = example[1] if len(example) > 1 else {}  # type: ignore[misc]
    return Sample("example", tuple(args), dict(kwargs))


def _fill(t: Tensor, garbage: int) -> None:
    """Pre-fill an out buffer with a sentinel (NaN for floating point) or other garbage."""
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(math.nan if garbage == 0 else -3.0e38 if t.dtype != torch.float16 else -6.0e4)
        elif t.dtype == torch.bool:
            t.fill_(garbage == 0)
        else:
            t.fill_(-7 if garbage == 0 else 113)


def _brief(e: Exception) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def _layout(t: Tensor) -> tuple[Any, ...]:
    return tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().data_ptr(), t.dtype, t.device


def check(
    op: TaggedOp,
    examples: Sequence[Example],
    *,
    reference: Callable[..., Any] | None = None,
    reference_form: Literal["functional", "call"] | None = None,
    compile: bool = True,
    export: bool = False,
    dtypes: Sequence[torch.dtype] = (),
    devices: Sequence[str] | None = None,
) -> str:
    """Test a tagged_ops op the way the sin ops are tested, and catch what opcheck misses.

    ``examples`` are calls in the handle's form: ``((x,),)`` or ``((x,), {"out": o})``
    (or :class:`Sample`). For every example and every :func:`variants` sample:

    * ``opcheck``: :func:`tagged_ops.opcheck` on a copy of the sample;
    * ``reference``: the op's effect must match ``reference``'s: the mutated
      tensor of an in-place op, the out buffers of an out= op; and an in-place op
      must change its input whenever the reference's result differs from it.
      Two forms: functional, as OpInfo and NumPy references are written
      (``reference=lambda x: x.clamp(min=0)`` for an in-place relu,
      ``lambda x: x * 2`` for an out= op): called with the example's inputs only,
      out buffers left out, it returns a Tensor, a tuple of Tensors or NumPy
      arrays, one per mutated tensor; or mutating, in the handle's call form
      (``lambda x, *, out: torch.sin(x, out=out)``), returning None. The form is
      ``reference_form`` where given; otherwise an out= op's reference is in the call
      form when its signature names every out buffer, functional when it does not
      (or has no readable signature); an in-place op's is functional unless it returns None;
    * ``returns``: the op returns the very object(s) it mutated;
    * ``out-buffers``: out buffers are written, never read: results must not change
      when they are pre-filled with a sentinel (NaN) and then with other garbage;
      and they keep their shape, strides, dtype, device and storage;
    * ``compile``: ``torch.compile(fullgraph=True)`` gives the eager effect;
    * ``compile-clone`` (with ``compile``, first sample of each example): so does
      ``y = m.clone(); op(..., y, ...)`` for each read Tensor ``y`` shaped like a
      mutated ``m``. Inductor 2.3-2.14 drops that clone with raw ops
      (pytorch/pytorch#198031), which a kernel that reads ``y`` after writing ``m``
      turns into wrong values; tagged_ops keeps it, and a failure here says how to
      avoid it (``compile_functional=True``) until that is fixed;
    * ``export`` (opt-in): an exported module calling the op gives the eager effect.

    Raises AssertionError with one line per (sample, stage) that failed;
    returns a one-line summary otherwise.

    >>> from tagged_ops.testing import check
    >>> print(check(sin_out, [((torch.randn(3),), {"out": torch.empty(3)})], reference=torch.sin, compile=False))
    docs::sin_out: tagged_ops.testing.check passed ... checks on 4 samples (... path)
    """
    form = _reference_form(op, reference, reference_form)
    samples = [
        Sample(f"{ex.label}:{s.label}", s.args, s.kwargs)
        for ex in map(_as_sample, examples)
        for s in variants(op, ex.args, ex.kwargs, dtypes=dtypes, devices=devices)
    ]
    wanted = {"reference": reference is not None, "compile": compile, "export": export, "compile-clone": compile}
    failures: list[str] = []
    checks_run = 0
    examples_seen: set[str] = set()
    for sample in samples:
        example = sample.label.split(":", 1)[0]
        run = _Run(op, sample, reference, form, first_of_example=example not in examples_seen)
        examples_seen.add(example)
        for stage in _STAGES:
            if not wanted.get(stage.name, True) or not stage.applies(run):
                continue
            checks, messages = stage.run(run)
            checks_run += checks
            failures.extend(f"{op.qualname} [{sample.label}] {stage.name}: {m}" for m in messages)
            if messages and stage.stops_sample:
                break

    if failures:
        raise AssertionError(
            f"{op.qualname}: tagged_ops.testing.check found {len(failures)} failure(s)\n" + "\n".join(failures)
        )
    path = "native" if op.is_native else "fallback"
    return f"{op.qualname}: tagged_ops.testing.check passed {checks_run} checks on {len(samples)} samples ({path} path)"


# -- the stages, in the order they run on each sample ------------------------------------


@dataclasses.dataclass
class _Run:
    """One sample going through the stages; ``eager`` fills in what the later ones compare with."""

    op: TaggedOp
    sample: Sample
    reference: Callable[..., Any] | None
    form: Literal["functional", "call"] | None
    first_of_example: bool
    original: Sample = dataclasses.field(init=False)
    result: Any = None  # what the eager run returned
    mutated: tuple[Any, ...] = ()  # the eager run's mutated tensors
    layouts_before: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.original = self.sample.clone()


class _Stage(NamedTuple):
    name: str
    applies: Callable[[_Run], bool]
    run: Callable[[_Run], tuple[int, list[str]]]  # (checks made, failure messages)
    stops_sample: bool = False  # a failure skips the sample's later stages


def _guarded(fn: Callable[[_Run], None]) -> Callable[[_Run], tuple[int, list[str]]]:
    """A one-check stage that fails with whatever ``fn`` raises."""

    def run(r: _Run) -> tuple[int, list[str]]:
        try:
            fn(r)
        except Exception as e:  # noqa: BLE001 - reported per sample and stage
            return 1, [_brief(e)]
        return 1, []

    return run


def _opcheck(r: _Run) -> None:
    s = r.sample.clone()
    opcheck(r.op, s.args, s.kwargs)


def _eager(r: _Run) -> None:
    eager = r.sample.clone()
    r.layouts_before = [_layout(t) for t in r.op.mutated_in_call(eager.args, eager.kwargs)]
    if r.op.kind == "out":
        for t in r.op.mutated_in_call(eager.args, eager.kwargs):
            _fill(t, 0)
    with torch.no_grad():
        r.result = r.op(*eager.args, **eager.kwargs)
    r.mutated = r.op.mutated_in_call(eager.args, eager.kwargs)


def _returns(r: _Run) -> tuple[int, list[str]]:
    returned = r.result if len(r.mutated) > 1 and type(r.result) is tuple else (r.result,)
    if len(returned) != len(r.mutated) or any(a is not b for a, b in zip(returned, r.mutated, strict=True)):
        return 1, [f"returned {type(r.result).__name__}, not the mutated tensor(s) {r.op.mutated_args}"]
    return 1, []


def _out_buffers(r: _Run) -> tuple[int, list[str]]:
    op, messages = r.op, []
    after = [_layout(t) for t in r.mutated]
    for name, b, a in zip(op.mutated_args, r.layouts_before, after, strict=True):
        if a != b:
            messages.append(
                f"out buffer '{name}' was resized or reallocated: (shape, strides, offset, storage, dtype, device) {b} -> {a}"
            )
    again = r.sample.clone()
    for t in op.mutated_in_call(again.args, again.kwargs):
        _fill(t, 1)
    with torch.no_grad():
        op(*again.args, **again.kwargs)
    for name, first, second in zip(
        op.mutated_args, r.mutated, op.mutated_in_call(again.args, again.kwargs), strict=True
    ):
        if bool(torch.isnan(first).any()) if first.is_floating_point() else False:
            messages.append(
                f"out buffer '{name}' still holds the NaN sentinel: the kernel does not write all of it, or reads it"
            )
        elif (diff := same(first, second)) is not None:
            messages.append(
                f"result depends on what out buffer '{name}' held before the call (the kernel reads it): {diff}"
            )
    return 1, messages


def _against_reference(r: _Run) -> tuple[int, list[str]]:
    op = r.op
    assert r.reference is not None
    try:
        ref_mutated = _reference_effect(op, r.reference, r.form, r.sample, r.mutated)
    except Exception as e:  # noqa: BLE001
        return 1, [f"the reference raised {_brief(e)}"]
    messages = []
    originals = op.mutated_in_call(r.original.args, r.original.kwargs)
    for name, got, want, orig in zip(op.mutated_args, r.mutated, ref_mutated, originals, strict=False):
        if op.kind == "inplace" and same(want, orig) is not None and same(got, orig) is None:
            messages.append(f"the op did not change its input '{name}', but the reference does")
        elif (diff := same(got, want)) is not None:
            messages.append(f"'{name}' differs from the reference: {diff}")
    return 1, messages


def _compile_clones(r: _Run) -> tuple[int, list[str]]:
    slots = clones_to_try(r.op, r.sample)
    messages = []
    for slot, index in slots:
        try:
            check_compile_clone(r.op, r.sample, slot, index)
        except Exception as e:  # noqa: BLE001
            messages.append(_brief(e))
    return len(slots), messages


def _always(r: _Run) -> bool:
    return True


#: What check runs on each sample, in order; a stage whose switch (reference=, compile=,
#: export=) is off is skipped. Each makes one check, except compile-clone (one per read
#: tensor shaped like a mutated one).
_STAGES: tuple[_Stage, ...] = (
    _Stage("opcheck", _always, _guarded(_opcheck)),
    _Stage("eager", _always, _guarded(_eager), stops_sample=True),
    _Stage("returns", _always, _returns),
    _Stage("out-buffers", lambda r: r.op.kind == "out", _out_buffers),
    _Stage("reference", _always, _against_reference),
    _Stage("compile", _always, _guarded(lambda r: check_compile(r.op, r.sample.clone(), r.mutated))),
    _Stage("export", _always, _guarded(lambda r: check_export(r.op, r.sample.clone(), r.mutated))),
    _Stage("compile-clone", lambda r: r.first_of_example, _compile_clones),
)


def _reference_form(
    op: TaggedOp, reference: Callable[..., Any] | None, given: str | None
) -> Literal["functional", "call"] | None:
    """The form ``reference`` is written in: as given, or read from its signature (never by trying it)."""
    if reference is None:
        return None
    if given is not None:
        if given not in ("functional", "call"):
            raise ValueError(f"reference_form must be 'functional' or 'call', not {given!r}")
        return given  # type: ignore[return-value]
    if op.kind == "inplace":
        return "functional"  # called alike in both forms; one that returns None is taken as mutating
    try:
        params = inspect.signature(reference).parameters
    except (TypeError, ValueError):  # a builtin without a signature: a functional torch op
        return "functional"
    named = all(
        name in params and params[name].kind is not inspect.Parameter.POSITIONAL_ONLY for name in op.mutated_args
    )
    return "call" if named else "functional"


def _reference_effect(
    op: TaggedOp, reference: Callable[..., Any], form: str | None, sample: Sample, mutated: tuple[Tensor, ...]
) -> tuple[Tensor, ...]:
    """What ``reference`` says the mutated tensors must hold after the call.

    A functional reference (returns a Tensor, a tuple of Tensors or NumPy arrays)
    is called with the example's inputs only, out buffers left out; its results
    stand for the mutated tensor (in-place) or the out buffers (out=), in order.
    A reference in the call form mutates, as the handle's call does, and returns None.
    """
    inputs = sample.clone()
    if form == "call":
        with torch.no_grad():
            result = reference(*inputs.args, **inputs.kwargs)
        if result is not None:
            raise ValueError(f"a reference in the call form returns None; it returned {type(result).__name__}")
        return op.mutated_in_call(inputs.args, inputs.kwargs)
    names = op.mutated_args if op.kind == "out" else ()
    kwargs = {k: v for k, v in inputs.kwargs.items() if k not in names}
    with torch.no_grad():
        result = reference(*inputs.args, **kwargs)
    if result is None:
        if names:
            raise ValueError(
                "a functional reference returns the out buffers' values; it returned None (write it in the "
                "call form, naming the out buffers as keyword parameters, or pass reference_form='call')"
            )
        return op.mutated_in_call(inputs.args, inputs.kwargs)
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(results) != len(mutated):
        raise ValueError(f"it returned {len(results)} result(s) for {len(mutated)} mutated tensor(s) {op.mutated_args}")
    return tuple(r if isinstance(r, Tensor) else _from_numpy(r, like=m) for r, m in zip(results, mutated, strict=True))


def _from_numpy(value: Any, *, like: Tensor) -> Tensor:
    import numpy as np  # only a NumPy reference needs it: a test dependency, not a runtime one

    return torch.as_tensor(np.asarray(value)).to(device=like.device, dtype=like.dtype)
