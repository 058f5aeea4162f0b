"""One op name's life: its current definition, the handles that follow it, its entry in torch's ``OPDEFS``.

As torch keeps ``OPDEFS`` beside its overwrite rule (torch/_library/custom_ops.py), one
record per qualified name (:class:`OpName`) holds everything that outlives a definition
of that name. Defining the name again (a module reload) withdraws its ``OPDEFS`` entry,
destroys the current definition, builds the next and re-points every live handle at it;
if building fails, nothing of it stays registered and the handles refuse calls until the
name is defined again: they never reach a destroyed op (2.13 can crash).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from . import _by_name

# For type checkers only: a Protocol class costs every process that defines an op.
if TYPE_CHECKING:
    from typing import Protocol

    from ._definition import Definition

    class Follower(_by_name.Handle, Protocol):
        """What follows a name: the handle (``_handle.TaggedOp``)."""

        def _point_at(self, definition: Definition) -> None: ...
        def _point_at_nothing(self, cause: Exception) -> None: ...


class OpName:
    """One qualified name: its current definition, its live handles (weakly), its ``OPDEFS`` entry."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname
        self.definition: Definition | None = None
        self.handles: weakref.WeakSet[Any] = weakref.WeakSet()
        self.entry: Any = None  # what torch.library's by-name functions find (None before 2.4)

    def define(self, build: Callable[[], Definition]) -> Definition:
        """Replace the current definition with ``build()``'s, and point every live handle at it.

        ``build`` removes what it registered before raising: the name is then free, and the
        handles raise the error (naming it) until the name is defined again.
        """
        previous, self.definition = self.definition, None
        if previous is not None:
            _by_name.withdraw(self.qualname, self.entry)
            self.entry = None
            previous.destroy()
        try:
            definition = build()
        except Exception as e:
            for handle in self.handles:
                handle._point_at_nothing(e)
            raise
        self.definition = definition
        for handle in self.handles:
            handle._point_at(definition)
        return definition

    def follow(self, handle: Follower) -> None:
        """``handle`` follows the name from now on, and ``torch.library``'s functions given the name reach it."""
        self.handles.add(handle)
        self.entry = _by_name.publish(handle)

    def live_handle(self) -> Any:
        """A handle that follows the name, or None."""
        return next(iter(self.handles), None)


#: qualified name -> its record: one per name ever defined in this process (small: a few fields)
_NAMES: dict[str, OpName] = {}


def named(qualname: str) -> OpName:
    """The record of ``qualname`` (made on first use)."""
    record = _NAMES.get(qualname)
    if record is None:
        record = _NAMES[qualname] = OpName(qualname)
    return record
