"""The public handle, ``TaggedOp``.

One handle type on every release and path. Handles follow their qualified name:
defining the same name again (a module reload) re-points every handle made
earlier at the newest definition (``_names.OpName.define``), so an old handle never
calls a destroyed op. ``torch.ops.<ns>.<name>.default`` objects and compiled graphs captured
earlier call the newest definition too while the schema stays the same (a module
reload; see ``_anchor``); a redefinition with another schema leaves them holding the
destroyed op. That holds for one thread: redefining a name while other threads call
its handles can crash the process (as with native ``custom_op``); define ops at
import time, before threads call them.
"""

from __future__ import annotations

import importlib
import pickle
import warnings
from typing import Any, Callable, Sequence, TypeVar

import torch

from . import _compat, _names
from ._contract import Kind, autograd_refusal, fake_registration_warning
from ._definition import Definition, Devices

__all__ = ["Devices", "TaggedOp", "is_native"]

F = TypeVar("F", bound=Callable[..., Any])


class TaggedOp:
    """A mutable custom op with the torch 2.13 tagged contract, on every release.

    Call it with the signature of the function you decorated: an in-place op
    returns its first argument (``op(x) is x``); an out= op returns its out
    buffers (``op(x, out=o) is o``, or a tuple of the very buffers).
    The dispatcher op is ``torch.ops.<namespace>.<name>``; :attr:`is_native`
    says whether it carries the native tag.

    Each handle is the one instance of a subclass of its own, named like this class:
    ``isinstance(op, TaggedOp)`` holds, ``type(op) is TaggedOp`` does not. From the
    op's first call on, the subclass's ``__call__`` is the op's generated call, so an
    eager call is one Python frame (a delegating ``__call__`` would add a third to its
    cost on 2.4).
    Handles pickle by qualified name.

    >>> isinstance(sin_out, tagged_ops.TaggedOp)
    True
    >>> o = torch.empty(2)
    >>> sin_out(torch.zeros(2), out=o) is o
    True
    """

    _definition: Definition

    def __new__(cls, definition: Definition, fn: Callable[..., Any] | None) -> TaggedOp:
        # Each handle is the one instance of a class of its own, whose __call__ is the
        # op's generated calling function: a call is one Python frame, not two (a
        # third of an eager call's cost on 2.4). Dynamo traces it like any __call__.
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        return super().__new__(own)

    def __init__(self, definition: Definition, fn: Callable[..., Any] | None) -> None:
        self._point_at(definition)
        self.__name__ = definition.sig.name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", __name__)

    def _point_at(self, definition: Definition) -> None:
        self._definition = definition
        definition.handles.add(self)
        self._set_call(definition.call)

    def _set_call(self, call: Callable[..., Any]) -> None:
        type(self).__call__ = call  # type: ignore[method-assign]

    def _point_at_nothing(self, cause: Exception) -> None:
        """The op was defined again and that failed: calls raise until it is defined again."""
        qualname = self.qualname

        def call(handle: TaggedOp, /, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(
                f"{qualname}: its latest definition failed ({type(cause).__name__}: {cause}); "
                "define it again before calling it."
            )

        self._set_call(call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per handle (see __new__)
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<TaggedOp({self._definition.sig.qualname})>"

    # A handle names a process-wide op: copying a module that holds one must
    # share it, not try to copy the dispatcher registration behind it.
    def __copy__(self) -> TaggedOp:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> TaggedOp:
        return self

    # Pickled by name, as functions are: a spawn worker (DataLoader, Pool) gets the handle
    # of the op its own import of the defining module defined, not a copy of ours.
    def __reduce__(self) -> tuple[Callable[..., TaggedOp], tuple[str, str]]:
        return _handle_named, (self.qualname, self.__module__)

    # -- what it is ----------------------------------------------------------

    @property
    def qualname(self) -> str:
        """``"<namespace>::<name>"``.

        >>> sin_out.qualname
        'docs::sin_out'
        """
        return self._definition.sig.qualname

    @property
    def kind(self) -> Kind:
        """``"inplace"`` or ``"out"``.

        >>> sin_out.kind, scale_.kind
        ('out', 'inplace')
        """
        return self._definition.sig.kind

    @property
    def is_native(self) -> bool:
        """Registered with the native ``torch.Tag.inplace`` / ``torch.Tag.out`` (torch 2.13+, not forced to the fallback).

        >>> sin_out.is_native == tagged_ops.NATIVE_TAGS
        True
        """
        return self._definition.tagged

    @property
    def opoverload(self) -> _compat.OpOverload:
        """The dispatcher op, ``torch.ops.<namespace>.<name>.default``.

        >>> sin_out.opoverload is torch.ops.docs.sin_out.default
        True
        """
        return self._definition.op

    @property
    def schema(self) -> str:
        """The registered schema: 2.13's tagged one on the native path, the untagged one on the fallback.

        >>> scale_.schema in ("docs::scale_(Tensor(a0!) x, float alpha=2.) -> Tensor(a0!)",
        ...                   "docs::scale_(Tensor(a0!) x, float alpha=2.) -> ()")
        True
        """
        return str(_compat.schema_of(self._definition.op))

    @property
    def mutated_args(self) -> tuple[str, ...]:
        """Names of the arguments the op mutates: the first one (in-place), or the out buffers in order.

        >>> sin_out.mutated_args, scale_.mutated_args
        (('out',), ('x',))
        """
        return self._definition.sig.mutated_names

    def mutated_in_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The objects a call ``op(*args, **kwargs)`` mutates, in :attr:`mutated_args` order.

        >>> x, o = torch.zeros(3), torch.empty(3)
        >>> sin_out.mutated_in_call((x,), {"out": o})[0] is o
        True
        """
        return self._definition.sig.mutated_in_call(args, kwargs)

    def to_op_arguments(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Translate a call in the user's form into ``(args, kwargs)`` for :attr:`opoverload`.

        Out buffers are keyword arguments on the native path and positional on the fallback:

        >>> x, o = torch.zeros(3), torch.empty(3)
        >>> args, kwargs = sin_out.to_op_arguments(x, out=o)
        >>> _ = sin_out.opoverload(*args, **kwargs)  # the same call through torch.ops
        >>> torch.equal(o, torch.sin(x))
        True
        """
        return self._definition.bind(*args, **kwargs)

    @property
    def paired(self) -> bool:
        """Whether Inductor lowers compiled calls of this out= op's functional op to it (2.13+).

        Only with ``pair=True``, on the native path, where this torch's lowering
        works for the op (see ``define_out``); asked of torch each time.

        >>> sin_out.paired  # defined without pair=True
        False
        """
        return self._definition.paired()

    # -- registrations, mirroring torch.library.CustomOpDef ----------------------

    def register_kernel(
        self, device_types: Devices, fn: Callable[..., Any] | None = None, /, *, classic: bool | None = None
    ) -> Any:
        """Register the kernel for ``device_types`` ("cpu", "cuda", ...), as ``CustomOpDef.register_kernel``.

        ``None`` or ``"default"``: every device. The kernel takes the op's arguments
        (out buffers by keyword on every path) and, as on 2.13, returns its mutated
        tensor(s); a ``classic=True`` kernel mutates and returns None instead, as
        kernels of untagged mutable ops are written (``classic=None``: the op's
        ``classic_kernels``, see ``declare_out``). Either way the op returns the
        mutated tensor(s). ``torch.library.register_kernel`` by the op's qualified
        name (2.4+) comes here too.

        >>> halve_ = tagged_ops.declare_inplace("docs::halve_", "(Tensor(a!) x) -> Tensor(a!)")
        >>> @halve_.register_kernel("cpu")
        ... def _(x):
        ...     return x.mul_(0.5)
        >>> halve_(torch.ones(2))
        tensor([0.5000, 0.5000])
        """
        definition = self._definition
        as_classic = definition.classic_kernels if classic is None else classic

        def inner(f: F) -> F:
            definition.register_kernel(device_types, f, classic=as_classic)
            return f

        return inner if fn is None else inner(fn)

    def register_fake(self, fn: Callable[..., Any] | None = None, /) -> Any:
        """Use ``fn`` as the fake (meta) kernel.

        Unnecessary, as on 2.13: tagged ops get a fake kernel automatically.
        Warns, then uses ``fn``: it may check shapes and dtypes; what it returns
        is ignored (the op returns its mutated tensors).

        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     @sin_out.register_fake
        ...     def _(x, *, out):
        ...         torch._check(out.shape == x.shape, lambda: "out must have x's shape")
        >>> "is unnecessary" in str(caught[0].message)
        True
        """

        def inner(f: F) -> F:
            warnings.warn(
                fake_registration_warning(self, self.kind),
                stacklevel=2 if fn is None else 3,  # the user's line, decorator or direct call
            )
            self._definition.kernels.set_fake(f)
            return f

        return inner if fn is None else inner(fn)

    def register_autograd(
        self, backward: Callable[..., Any], /, *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """Refused, as on 2.13: mutable ops have no autograd formula.

        >>> sin_out.register_autograd(lambda ctx, grad: grad)
        Traceback (most recent call last):
        ...
        RuntimeError: Cannot register autograd formula for operator tagged with torch.Tag.out: ...
        """
        raise self._autograd_refusal(self)

    def register_sharding(self, rule: Callable[..., Any] | None = None, /) -> Any:
        """How the op runs on DTensors (tensor parallel, FSDP2): a sharding rule, written once.

        ``rule`` takes the op's arguments as you call the handle (out buffers by keyword;
        each DTensor argument as its ``DTensorSpec``) and returns what DTensor's
        ``register_sharding`` rules return, ``[(output placements, input placements), ...]``:
        one output placement per tensor the op writes, input placements in the order of the
        handle's parameters, ``None`` for a non-Tensor one. A written tensor's input and output
        placements must be the same (the op writes it in place). tagged_ops registers it on
        every op a call can reach (the op itself, and the untagged and functional twins
        compiled code calls), on both paths, eager and compiled. :func:`pointwise_sharding`
        is the rule of an elementwise op. Needs torch 2.5+ (``torch.distributed.tensor``);
        elsewhere it raises, naming the op and the release. Nothing of
        ``torch.distributed.tensor`` is imported until this is called.

        >>> from torch.distributed.tensor import Replicate, Shard
        >>> @scale_.register_sharding
        ... def _(x, alpha=2.0):
        ...     return [([p], [p, None]) for p in (Shard(0), Shard(1), Replicate())]
        """

        def inner(f: F) -> F:
            self._definition.set_sharding(f)
            return f

        return inner if rule is None else inner(rule)

    def _fake_kernel(self) -> Callable[..., Any]:
        """The op's fake kernel, as torch.library's by-name functions read it."""
        return self._definition.registered.fake_kernel

    def _autograd_refusal(self, named: object) -> RuntimeError:
        """2.13's refusal, naming the op as ``named`` prints (the handle, or the OpOverload for torch.library)."""
        return autograd_refusal(named, self.kind, _compat.schema_of(self.opoverload))

    if _compat.has_custom_op_method("register_torch_dispatch"):

        def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Callable[..., Any] | None = None, /) -> Any:
            """As ``CustomOpDef.register_torch_dispatch``: ``fn(mode, func, types, args, kwargs)``.

            Write ``fn`` as for 2.13 (return what the op returns); on the fallback
            path its return value is dropped, as the untagged op returns nothing.
            ``args``/``kwargs`` are the registered op's (out buffers are positional
            on the fallback path; see :attr:`schema`).

            >>> from torch.utils._python_dispatch import TorchDispatchMode
            >>> class Logging(TorchDispatchMode):
            ...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ...         return func(*args, **(kwargs or {}))
            >>> seen = []
            >>> @sin_out.register_torch_dispatch(Logging)
            ... def _(mode, func, types, args, kwargs):
            ...     seen.append(func)
            ...     return func(*args, **kwargs)
            >>> with Logging():
            ...     _ = sin_out(torch.zeros(2), out=torch.empty(2))
            >>> len(seen)
            1
            """

            def inner(f: F) -> F:
                self._definition.register_torch_dispatch(torch_dispatch_class, f)
                return f

            return inner if fn is None else inner(fn)

    if _compat.has_custom_op_method("register_vmap"):

        def register_vmap(self, fn: Callable[..., Any] | None = None, /) -> Any:
            """As ``CustomOpDef.register_vmap``: ``fn(info, in_dims, *args, **kwargs) -> (output, out_dims)``.

            Write ``fn`` as for 2.13; on the fallback path its output is dropped
            (the untagged op returns nothing), so one rule serves both paths.
            Arguments are the registered op's (see :attr:`schema`).

            >>> @scale_.register_vmap
            ... def _(info, in_dims, x, alpha=2.0):
            ...     x.mul_(alpha)  # elementwise: batched as it is
            ...     return x, in_dims[0]
            >>> torch.vmap(scale_)(torch.ones(3, 2))
            tensor([[2., 2.],
                    [2., 2.],
                    [2., 2.]])
            """

            def inner(f: F) -> F:
                self._definition.register_vmap(f)
                return f

            return inner if fn is None else inner(fn)

    if _compat.has_custom_op_method("register_autocast"):

        def register_autocast(self, device_type: str, cast_inputs: torch.dtype, /) -> None:
            """As ``torch.library.register_autocast``: inside ``torch.autocast(device_type)`` the op's
            floating inputs are cast to ``cast_inputs``. What the op writes (the out buffers, an
            in-place op's first argument) is never cast: the op writes the caller's tensors.

            >>> sin_out.register_autocast("cpu", torch.bfloat16)
            >>> o = torch.empty(2)
            >>> with torch.autocast("cpu"):
            ...     _ = sin_out(torch.zeros(2), out=o)
            >>> o.dtype  # the caller's buffer, written in place
            torch.float32
            """
            self._definition.kernels.set_autocast(device_type, cast_inputs)


def _handle_named(qualname: str, module: str) -> TaggedOp:
    """The live handle of ``qualname``, importing ``module`` (where it was defined) if this process has none."""
    name = _names.named(qualname)
    if name.live_handle() is None:
        importlib.import_module(module)
    handle = name.live_handle()
    if handle is not None:
        return handle  # type: ignore[no-any-return]
    raise pickle.UnpicklingError(
        f"{qualname}: no op of that name is defined in this process, and importing {module!r} did not "
        "define it; define the op before unpickling a handle to it."
    )


def is_native(op: Any) -> bool:
    """Whether ``op`` (a handle from this package) was registered with native tags.

    >>> tagged_ops.is_native(sin_out) == tagged_ops.NATIVE_TAGS
    True
    >>> tagged_ops.is_native(torch.sin)
    False
    """
    return isinstance(op, TaggedOp) and op.is_native
