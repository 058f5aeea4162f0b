"""Watching one call of an op: which tensors its kernel wrote, whether the new contents depended on the old.

The call itself runs as it would without the audit; what it did is learned from
snapshots taken around it and from reruns of the op on copies, with the mode that
watches switched off and the random number generators put back afterwards, so the
suite's own results are unchanged. A written argument *updates* when different old
contents give different new ones (add-into, a partial write), and *overwrites*
otherwise. A call the audit cannot observe safely is recorded with the reason,
never guessed: arguments that share memory (the copies could not share it), a
kernel that gives other values on an identical rerun, a kernel that fails on a copy.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Sequence

import torch
from torch.overrides import TorchFunctionMode

from .. import _compat
from .._compat_compiler import is_dynamo_compiling

__all__ = ["Call", "Watch"]


class Call:
    """What one call of an op showed."""

    def __init__(self, op: str, schema: Any) -> None:
        self.op = op  # "ns::name.overload"
        self.schema = schema
        self.tensors: tuple[str, ...] = ()  # the arguments that held a tensor, as the schema names them
        self.writes: dict[str, str] = {}  # argument -> "updates" | "overwrites"
        self.aliases: tuple[str, ...] = ()  # arguments a returned tensor shares memory with
        self.fresh_outputs = 0  # returned tensors that share memory with no argument
        self.problem: str | None = None  # why the call could not be observed
        self.counted_only = False  # enough calls of its kind were observed: this one was only counted


def _tensor_arguments(schema: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The call's tensors by the schema's names (``name[i]`` inside a list)."""
    found: dict[str, torch.Tensor] = {}
    for i, argument in enumerate(schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if isinstance(value, torch.Tensor):
            found[argument.name] = value
        elif isinstance(value, (list, tuple)):
            found.update({f"{argument.name}[{j}]": v for j, v in enumerate(value) if isinstance(v, torch.Tensor)})
    return found


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _leaves(v)]
    return []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shapes, dtypes and values (NaNs in the same places count as equal)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        nan = a.isnan()
        return bool(torch.equal(nan, b.isnan())) and bool(torch.equal(a.masked_fill(nan, 0), b.masked_fill(nan, 0)))
    return bool(torch.equal(a, b))


def _other_contents(t: torch.Tensor) -> list[torch.Tensor]:
    """Copies of ``t`` with other values in every element: far above and far below them, so that a
    kernel that keeps the larger (or the smaller) of old and new still shows that it wrote."""
    if t.dtype is torch.bool:
        return [~t]
    if t.is_floating_point() or t.is_complex():
        step = (t.abs() + 1) * 1000
        return [t + step, t - step]
    return [t + 1, t - 1]


def _storage(t: torch.Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


def _observable(tensors: dict[str, torch.Tensor]) -> str | None:
    """Why the audit cannot rerun this call on copies, or None."""
    for name, t in tensors.items():
        if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            return f"argument {name} is a {type(t).__name__} (a tensor subclass)"
        if t.layout is not torch.strided or t.device.type == "meta":
            return f"argument {name} has no values to compare ({t.layout}, {t.device})"
    storages = [_storage(t) for t in tensors.values() if t.numel()]
    if len(set(storages)) < len(storages):
        return "arguments share memory (copies could not share it)"
    return None


def observe(call: Call, op: Any, args: Sequence[Any], kwargs: dict[str, Any], record: Callable[[Call], None]) -> Any:
    """Run ``op(*args, **kwargs)`` for real and ``record`` what it did in ``call``; returns what the call returned."""
    schema = call.schema
    tensors = _tensor_arguments(schema, args, kwargs)
    call.tensors = tuple(tensors)
    call.problem = _observable(tensors)
    if call.problem is not None:
        record(call)
        return op(*args, **kwargs)
    with torch.no_grad():
        before = {n: t.clone() for n, t in tensors.items()}
    start = torch.get_rng_state()
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    start_cuda = torch.cuda.get_rng_state_all() if cuda else None
    result = op(*args, **kwargs)  # the real call, exactly as the suite makes it
    end, end_cuda = torch.get_rng_state(), torch.cuda.get_rng_state_all() if cuda else None
    try:
        with torch.no_grad():
            after = {n: t.clone() for n, t in tensors.items()}
            outputs = _leaves(result)
            by_storage = {_storage(t): n for n, t in tensors.items() if t.numel()}
            aliased = [by_storage.get(_storage(o)) if o.numel() else None for o in outputs]
            call.aliases = tuple(dict.fromkeys(n for n in aliased if n is not None))
            call.fresh_outputs = sum(n is None for n in aliased)

            def rerun(prior: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
                torch.set_rng_state(start)
                if start_cuda is not None:
                    torch.cuda.set_rng_state_all(start_cuda)
                copies = {n: prior.get(n, before[n]).clone() for n in tensors}
                new_args = [_swap(a, schema.arguments[i].name, copies) for i, a in enumerate(args)]
                new_kwargs = {k: _swap(v, k, copies) for k, v in kwargs.items()}
                op(*new_args, **new_kwargs)
                return copies

            try:
                again = rerun({})
                if not all(_same(again[n], after[n]) for n in tensors):
                    call.problem = "another run on identical copies wrote other values (a non-deterministic kernel)"
                else:
                    for name, t in tensors.items():
                        if t.numel() == 0:
                            continue
                        changed = not _same(before[name], after[name])
                        readable = t.is_floating_point() or t.is_complex() or t.dtype is torch.bool
                        if not changed and not readable and name not in _declared_writes(schema):
                            continue  # an index tensor left as it was: other contents could fault the kernel
                        others = _other_contents(before[name])
                        got = [rerun({name: other})[name] for other in others]
                        if changed or not all(_same(g, other) for g, other in zip(got, others, strict=True)):
                            independent = all(_same(g, after[name]) for g in got)
                            call.writes[name] = "overwrites" if independent else "updates"
            except Exception as e:  # noqa: BLE001 - the kernel's failure on a copy is what is recorded
                call.problem = f"the kernel failed on a copy of the arguments ({type(e).__name__}: {e})"[:300]
    finally:
        torch.set_rng_state(end)
        if end_cuda is not None:
            torch.cuda.set_rng_state_all(end_cuda)
        record(call)
    return result


def _declared_writes(schema: Any) -> list[str]:
    return _compat.written_argument_names(schema)


def _swap(value: Any, name: str, copies: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return copies[name]
    if isinstance(value, (list, tuple)):
        return type(value)(copies[f"{name}[{j}]"] if isinstance(v, torch.Tensor) else v for j, v in enumerate(value))
    return value


def _kind(value: Any) -> Any:
    """What tells two calls of an op apart for the audit: which arguments are tensors, of what dtype,
    rank and layout (contiguous or not); the values of everything else."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.dim(), value.is_contiguous(), value.device.type)
    if isinstance(value, (list, tuple)):
        return tuple(_kind(v) for v in value)
    return value if isinstance(value, (int, float, bool, str, type(None))) else type(value).__name__


def _traced(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """A call on the tensors torch's tracers make (fake, functional): tracing, not a call to observe."""
    tensors = _leaves(list(args)) + _leaves(list(kwargs.values()))
    return any(_compat.is_tracer_tensor(t) for t in tensors)


class Watch(TorchFunctionMode):
    """While active, every Python call of an op in ``namespaces`` is observed (``torch.ops.ns.name``,
    ``torch.ops.ns.name.overload``, a tagged_ops handle's call). Calls made while Dynamo traces are
    left alone."""

    def __init__(
        self,
        namespaces: Sequence[str],
        record: Callable[[Call], None],
        per_kind: int | None,
        skip: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.namespaces = frozenset(namespaces)
        self.record = record
        self.skip = frozenset(skip)  # "ns::name" or "ns::name.overload": counted, never rerun
        self.per_kind = per_kind  # calls observed per op and kind of call; None: every call
        self.kinds: collections.Counter[tuple[Any, ...]] = collections.Counter()

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if is_dynamo_compiling():  # first, and alone: Dynamo (2.5+) traces this method for every torch call
            return func(*args, **kwargs)
        op = self._audited(func, args, kwargs)
        if op is None or _traced(args, kwargs):
            return func(*args, **kwargs)
        schema = _compat.schema_of(op)
        call = Call(f"{schema.name}.{schema.overload_name or 'default'}", schema)
        kind = (op, *(_kind(v) for v in args), *((k, _kind(v)) for k, v in kwargs.items()))
        self.kinds[kind] += 1
        if call.op in self.skip or schema.name in self.skip:
            call.problem = "skipped: the op is not rerun (named in skip)"
        elif self.per_kind is not None and self.kinds[kind] > self.per_kind:
            call.counted_only = True
        else:
            return observe(call, op, args, kwargs, self.record)
        self.record(call)
        return func(*args, **kwargs)

    def _audited(self, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(func, _compat.OpOverloadPacket):
            if _compat.parse_namespace(_compat.packet_name(func))[0] in self.namespaces:
                return _compat.resolve_overload(func, args, kwargs)
        elif isinstance(func, _compat.OpOverload) and func.namespace in self.namespaces:
            return func
        return None
