"""``adopt_classic``: the classic mutable ops a library keeps beside its tagged ones get the compiler fixes.

Some ops have a shape no tag expresses (``scatter_min_(Tensor(a!) out, ...) -> Tensor``:
in place on ``out``, and a fresh ``argmin`` too), so a port keeps them as classic
mutable ops. torch compiles those alone; tagged_ops' fixes (``_fixes/``) reach a
compiled program once some tagged op has been traced in the process. Adopting an op
installs them for programs that call it, as its first trace would for a tagged op.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from . import _compat, _fixes

if TYPE_CHECKING:
    from ._fixes import Op

__all__ = ["adopt_classic"]

#: every op adopted so far: the fixes are asked once per op
_ADOPTED: set[Any] = set()
#: adopted ops whose fixes wait for torch's compiler to be imported
_WAITING: list[_Classic] = []


class _Classic:
    """What a fix sees of an adopted op: it is recorded in compiled graphs as itself."""

    tagged = False
    forced_fallback = False
    pair = False

    def __init__(self, op: Any) -> None:
        self.op = op

    def recorded_ops(self) -> tuple[Any, ...]:
        return (self.op,)


def adopt_classic(op: str | _compat.OpOverload) -> None:
    """Let tagged_ops' compiler fixes reach compiled programs that call a classic mutable op.

    ``op`` is an op you defined yourself, in Python (``torch.library.Library.define``,
    ``custom_op(mutates_args=...)``) or C++, that writes an argument its schema marks
    (``Tensor(a!)``), as ``"ns::name"`` / ``"ns::name.overload"`` or its
    ``torch.ops.ns.name.overload``. Compiled programs that call it then get the fixes of
    docs/hazards.md that are not about tags (a view of an intermediate written under
    ``auto_functionalized`` v1, a dropped clone, a read computed after the write, ...),
    as if a tagged_ops op had been traced. Adopting an op twice is harmless.

    It costs nothing until torch's compiler is imported: the fixes wait for the modules
    they patch. Raises ValueError, naming the op, for an op that writes nothing (a
    functional op needs none of these fixes), and the dispatcher's error for a name
    that is not defined.

    >>> lib = torch.library.Library("docs_classic", "DEF")
    >>> _ = lib.define("clamp_min_(Tensor(a!) out, Tensor src) -> Tensor")
    >>> lib.impl("clamp_min_", lambda out, src: out.copy_(torch.minimum(out, src)).clone(), "CompositeExplicitAutograd")
    >>> tagged_ops.adopt_classic("docs_classic::clamp_min_")
    >>> tagged_ops.adopt_classic("docs_classic::clamp_min_")  # again: harmless
    """
    overload = _compat.lookup_op(op) if isinstance(op, str) else op
    if overload in _ADOPTED:
        return
    schema = _compat.schema_of(overload)
    if not _compat.written_argument_names(schema):
        raise ValueError(
            f"tagged_ops.adopt_classic: {schema.name}.{schema.overload_name or 'default'} writes no argument "
            f"(its schema marks none with (a!)): a functional op needs none of the compiler fixes; "
            "adopt the ops that mutate."
        )
    _ADOPTED.add(overload)
    _WAITING.append(_Classic(overload))
    # The fixes' modules load (and wait for what they patch) when torch's compiler does: a
    # library that adopts ops at import, in a process that never compiles, loads none of them.
    _fixes.when_compiler_loads(_install_waiting)


def _install_waiting(_module: object) -> None:
    waiting = list(_WAITING)
    _WAITING.clear()
    for classic in waiting:
        _fixes.at_first_trace(cast("Op", classic))
