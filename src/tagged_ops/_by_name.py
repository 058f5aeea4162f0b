"""torch.library's registration functions, called with a tagged_ops op's name, reach its handle.

Kernel libraries register kernels by qualified name from modules of their own:
bitsandbytes' backends, and out-of-tree backends loaded through entry points, call
``torch.library.register_kernel("ns::op.out", "cuda")(fn)``. Without this module such
a kernel lands on the dispatcher op directly, past tagged_ops' adapter: on 2.13 the
op returns what the kernel returns (None for a classic kernel), and the
compile-time ``__untagged`` twin never gets it.

``torch.library.register_kernel`` / ``register_fake`` / ``register_autograd`` /
``register_torch_dispatch`` / ``register_vmap`` / ``register_autocast`` (2.4+) first
ask ``torch._library.custom_ops`` for the op's ``CustomOpDef`` (its ``OPDEFS``
table, filled by ``custom_op``) and hand the call to it. Each tagged_ops op gets an
entry there that forwards to its handle, so a registration by name does exactly
what the handle's method does, on both paths. torch 2.2/2.3 have no such table
(and no ``register_kernel``): register through the handle there.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import _compat

__all__ = ["on_the_dispatcher", "publish", "withdraw"]

# For type checkers only: a Protocol class costs every process that defines an op.
if TYPE_CHECKING:
    from typing import Protocol

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
    the name's record (``_names.OpName``) keeps it.
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
