"""Makes Inductor compute a pending read of a buffer before a mutating custom op writes it (2.4-2.15).

Inductor computes a pending read of a buffer (``t = b * 2``, not yet stored) only
when it registers the buffer's mutation, which comes after the kernel of a mutating
custom op: ``t = b * 2; op(t, out=b); return t * 1`` then computes ``t`` from the
written ``b``. Raw ``custom_op`` ops too (untagged on 2.4.1, 2.13.0, 2.15.0; tagged on
2.13.0, 2.15.0). 2.13 also reuses the memory of a tagged op's out buffer while the
tensor the op returned, that very buffer, is still to be read; and Inductor takes
what a mutating op returns for new buffers, so a later write of the argument is not
ordered after reads of what the op returned.

The fix: for each op a compiled graph may hold, a lowering that marks every written
buffer mutated (so Inductor computes its pending reads) before Inductor's own
lowering of the op, keeps buffers the op returns from reuse, and hands back the
written arguments themselves as the op's results. Installed at the op's first trace,
once Inductor's lowering table is imported. Canaries: tests/test_compile_reads.py
(the raw custom_op patterns).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from ._after_import import when_imported

if TYPE_CHECKING:
    from . import Op

# op -> its lowering, while installed in Inductor's table
_INSTALLED: dict[Any, Callable[..., Any]] = {}
_PENDING: set[Any] = set()


def at_first_trace(op: Op) -> None:
    _PENDING.update(op.recorded_ops())
    when_imported("torch._inductor.lowering", _install_pending)


def at_destroy(op: Op) -> None:
    lowering = sys.modules.get("torch._inductor.lowering")
    for o in op.recorded_ops():
        _PENDING.discard(o)
        lower = _INSTALLED.pop(o, None)
        lowerings = getattr(lowering, "lowerings", None)
        if lower is not None and isinstance(lowerings, dict) and lowerings.get(o) is lower:
            del lowerings[o]


def _install_pending(lowering: ModuleType) -> None:
    while _PENDING:
        _install(lowering, _PENDING.pop())


def _install(lowering: ModuleType, op: Any) -> None:
    lowerings = getattr(lowering, "lowerings", None)
    virtualized = sys.modules.get("torch._inductor.virtualized")
    if op in _INSTALLED or not isinstance(lowerings, dict) or op in lowerings or not hasattr(virtualized, "V"):
        return  # installed, or Inductor lowers it some other way here: leave it alone
    schema = op._schema
    # The written arguments by alias set, and for each return the one it is (``Tensor(a!) x ->
    # Tensor(a!)``), if any.
    alias_of = {
        frozenset(info.before_set): (i, a.name)
        for i, a in enumerate(schema.arguments)
        if (info := a.alias_info) is not None and info.is_write
    }
    written = list(alias_of.values())
    returned = [alias_of.get(frozenset(r.alias_info.before_set)) if r.alias_info else None for r in schema.returns]
    own: list[Callable[..., Any]] = []  # Inductor's lowering of the op, once it made one

    def argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
        return kwargs[name] if name in kwargs else args[index] if index < len(args) else None

    def lower(*args: Any, **kwargs: Any) -> Any:
        graph = virtualized.V.graph  # type: ignore[union-attr]
        for index, name in written:
            value = argument(args, kwargs, index, name)
            try:
                buffer = value.get_name()
            except (AttributeError, NotImplementedError):  # not stored yet, so nothing reads it yet
                continue
            graph.mark_buffer_mutated(buffer)  # computes the pending reads of ``buffer`` now
            if any(returned) and hasattr(graph, "never_reuse_buffers"):
                graph.never_reuse_buffers.add(buffer)  # the op returns this buffer: not free after the call
        if own:
            result = own[0](*args, **kwargs)
        else:
            del lowerings[op]  # Inductor makes its lowering of an op it has none for, as for any op
            try:
                result = graph.call_function(op, args, kwargs)
            finally:
                if op in lowerings:
                    own.append(lowerings[op])
                lowerings[op] = lower
        return _returned_arguments(result, [None if r is None else argument(args, kwargs, *r) for r in returned])

    lowerings[op] = lower
    _INSTALLED[op] = lower


def _returned_arguments(result: Any, arguments: list[Any]) -> Any:
    """``result`` with each returned alias of a written argument replaced by that argument.

    Inductor takes the tensor a mutating op returns for a new buffer, so it does not
    order reads of it against later writes of the argument it is: ``y = op_(x); z = y[2:6]
    * 2; x.copy_(...)`` may write ``x`` before computing ``z`` from ``y``. Reading the
    argument itself, whose writes Inductor tracks, keeps that order (the fallback's
    calls, which return nothing, read it so already).
    """
    if all(a is None for a in arguments):
        return result
    if len(arguments) == 1:
        return arguments[0]
    # strict: a result of another shape fails the compile rather than keeping Inductor's aliases
    return type(result)(r if a is None else a for r, a in zip(result, arguments, strict=True))
