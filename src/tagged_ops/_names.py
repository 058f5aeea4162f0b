"""One op name's life: its current definition, the handles that follow it, its entry in torch's ``OPDEFS``.

As torch keeps ``OPDEFS`` beside its overwrite rule (torch/_library/custom_ops.py), one
record per qualified name (:class:`OpName`) holds everything that outlives a definition
of that name. Defining the name again (a module reload) withdraws its ``OPDEFS`` entry,
destroys the current definition, builds the next and re-points every live handle at it;
if building fails, nothing of it stays registered and the handles refuse calls until the
name is defined again: they never reach a destroyed op (2.13 can crash).

The ``OPDEFS`` entry is how ``torch.library``'s registration functions, called with a
tagged_ops op's name, reach its handle. Kernel libraries register kernels by qualified
name from modules of their own: bitsandbytes' backends, and out-of-tree backends loaded
through entry points, call ``torch.library.register_kernel("ns::op.out", "cuda")(fn)``.
``torch.library.register_kernel`` / ``register_fake`` / ``register_autograd`` /
``register_torch_dispatch`` / ``register_vmap`` / ``register_autocast`` (2.4+) first
ask ``OPDEFS`` (filled by ``custom_op``) for the op's ``CustomOpDef`` and hand the call
to it; without an entry such a kernel would land on the dispatcher op directly, past
tagged_ops' adapter (on 2.13 the op would return what the kernel returns, None for a
classic kernel). Each tagged_ops op's entry forwards to its handle, so a registration by
name does exactly what the handle's method does, on both paths. torch 2.2/2.3 have no
such table (and no ``register_kernel``): register through the handle there.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import _compat

__all__ = ["OpName", "named", "on_the_dispatcher", "publish", "withdraw"]

# For type checkers only: a Protocol class costs every process that defines an op.
if TYPE_CHECKING:
    from typing import Protocol, TypeVar

    class Definition(Protocol):
        """What a name's record needs of a definition (``_definition.Definition``)."""

        def destroy(self) -> None: ...

    D = TypeVar("D", bound=Definition)

    class Handle(Protocol):
        """What an entry forwards to: the handle (``_handle.TaggedOp``)."""

        @property
        def qualname(self) -> str: ...
        @property
        def opoverload(self) -> Any: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
        def _fake_kernel(self) -> Callable[..., Any]: ...
        def _autograd_refusal(self, named: object) -> RuntimeError: ...
        def register_kernel(self, device_types: Any, fn: Any = None, /) -> Any: ...
        def register_fake(self, fn: Any = None, /) -> Any: ...
        def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Any = None, /) -> Any: ...
        def register_vmap(self, fn: Any = None, /) -> Any: ...
        def register_autocast(self, device_type: str, cast_inputs: Any, /) -> None: ...

    class Follower(Handle, Protocol):
        """What follows a name: the handle (``_handle.TaggedOp``)."""

        def _point_at(self, definition: Any) -> None: ...  # a _definition.Definition
        def _point_at_nothing(self, cause: Exception) -> None: ...


if _compat.OPDEFS is not None:

    class _HandleEntry(_compat.CustomOpDef):  # type: ignore[misc,name-defined]
        """What ``torch.library`` finds for a tagged_ops op: every registration goes to the handle.

        Built without ``CustomOpDef.__init__``, which would define an op; torch reads
        only the methods below and ``_abstract_fn`` / ``_opoverload`` of an entry.
        """

        def __init__(self, handle: Handle) -> None:  # noqa: D107 - no super().__init__: see the class
            self._handle = handle

        @property
        def _qualname(self) -> str:  # type: ignore[override]
            return self._handle.qualname

        @property
        def _opoverload(self) -> Any:  # type: ignore[override]
            return self._handle.opoverload

        @property
        def _abstract_fn(self) -> Callable[..., Any]:  # type: ignore[override]
            return self._handle._fake_kernel()  # tagged ops always have a fake kernel

        def __repr__(self) -> str:
            return repr(self._handle)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self._handle(*args, **kwargs)

        def register_kernel(self, device_types: Any, fn: Callable[..., Any] | None = None, /) -> Any:
            return self._handle.register_kernel(device_types, fn)

        def register_fake(self, fn: Callable[..., Any], /) -> Callable[..., Any]:
            return self._handle.register_fake(fn)  # type: ignore[no-any-return]

        def register_autograd(
            self, backward: Callable[..., Any], /, *, setup_context: Callable[..., Any] | None = None
        ) -> None:
            # torch.library.register_autograd's own sentence, which names the OpOverload
            raise self._handle._autograd_refusal(self._handle.opoverload)

        def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Callable[..., Any] | None = None, /) -> Any:
            return self._handle.register_torch_dispatch(torch_dispatch_class, fn)

        def register_vmap(self, fn: Callable[..., Any] | None = None, /) -> Any:
            return self._handle.register_vmap(fn)

        def register_autocast(self, device_type: str, cast_inputs: Any, /) -> None:
            self._handle.register_autocast(device_type, cast_inputs)

        def register_effect(self, effect: Any) -> None:
            pass  # torch.library.register_effectful_op registers the effect itself afterwards

        def set_kernel_enabled(self, device_type: str, enabled: bool = True) -> Any:
            raise NotImplementedError(
                f"{self._qualname}: set_kernel_enabled is not supported for tagged_ops ops; "
                "register another kernel with register_kernel instead."
            )


def publish(handle: Handle) -> Any:
    """Make ``torch.library``'s functions, given ``handle``'s qualified name, call ``handle``.

    Returns the entry (None where torch has no ``OPDEFS``): ``OPDEFS`` holds it weakly, so
    the name's record (:class:`OpName`) keeps it.
    """
    if _compat.OPDEFS is None:
        return None
    entry = _HandleEntry(handle)
    _compat.OPDEFS[handle.qualname] = entry
    return entry


def withdraw(qualname: str, entry: Any) -> None:
    """Take ``entry`` out of ``OPDEFS`` (its definition is going), unless another took its place."""
    if entry is not None and _compat.OPDEFS is not None and _compat.OPDEFS.get(qualname) is entry:
        del _compat.OPDEFS[qualname]


@contextlib.contextmanager
def on_the_dispatcher(qualname: str) -> Iterator[None]:
    """While the handle itself registers through ``torch.library`` by name: the dispatcher op, not the handle.

    Without this, ``torch.library.register_vmap(qualname, ...)`` called by the handle
    would find the handle's entry and hand the call straight back to it.
    """
    entry = _compat.OPDEFS.pop(qualname, None) if _compat.OPDEFS is not None else None
    try:
        yield
    finally:
        if entry is not None:
            _compat.OPDEFS[qualname] = entry


class OpName:
    """One qualified name: its current definition, its live handles (weakly), its ``OPDEFS`` entry."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname
        self.definition: Definition | None = None
        self.handles: weakref.WeakSet[Any] = weakref.WeakSet()
        self.entry: Any = None  # what torch.library's by-name functions find (None before 2.4)

    def define(self, build: Callable[[], D]) -> D:
        """Replace the current definition with ``build()``'s, and point every live handle at it.

        ``build`` removes what it registered before raising: the name is then free, and the
        handles raise the error (naming it) until the name is defined again.
        """
        previous, self.definition = self.definition, None
        if previous is not None:
            withdraw(self.qualname, self.entry)
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
        self.entry = publish(handle)

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
