"""The public handle and the two decorators that make it.

One handle type on every release and path. Handles follow their qualified name:
defining the same name again (a module reload) re-points every handle made
earlier at the newest definition, so an old handle never calls a destroyed op.
``torch.ops.<ns>.<name>.default`` objects and compiled graphs captured earlier call
the newest definition too while the schema stays the same (a module reload; see
``_anchor.py``); a redefinition with another schema leaves them holding the
destroyed op. That holds for one thread: redefining a name while other threads
call its handles can crash the process (as with native ``custom_op``); define ops
at import time, before threads call them.
"""

from __future__ import annotations

import importlib
import pickle
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar, overload

import torch

from . import _by_name, _pairing
from . import _capabilities as caps
from ._fallback import register_fallback, separate_fallback_compile_caches
from ._native import register_native
from ._registration import Registration
from ._signature import Kind, define_signature
from ._switches import fallback_forced

__all__ = ["TaggedOp", "declare_inplace", "declare_out", "define_inplace", "define_out", "is_native"]

F = TypeVar("F", bound=Callable[..., Any])
Fn = Callable[..., Any]
Mutates = str | Iterable[str] | None
Devices = str | Sequence[str] | None

if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    class Options(TypedDict, total=False):
        """The keyword arguments of ``define_inplace`` / ``define_out``."""

        mutates_args: Mutates
        device_types: Devices
        schema: str | None
        fallback: bool
        compile_functional: bool

    class OutOptions(Options, total=False):
        """The keyword arguments of ``define_out``."""

        pair: bool

    Decorator = Callable[[Fn], "TaggedOp"]

# qualified name -> current definition, and the live handles that follow it
_CURRENT: dict[str, Registration] = {}
_HANDLES: dict[str, weakref.WeakSet[TaggedOp]] = {}


class TaggedOp:
    """A mutable custom op with the torch 2.13 tagged contract, on every release.

    Call it with the signature of the function you decorated: an in-place op
    returns its first argument (``op(x) is x``); an out= op returns its out
    buffers (``op(x, out=o) is o``, or a tuple of the very buffers).
    The dispatcher op is ``torch.ops.<namespace>.<name>``; :attr:`is_native`
    says whether it carries the native tag.

    Each handle is the one instance of a subclass of its own, named like this class:
    ``isinstance(op, TaggedOp)`` holds, ``type(op) is TaggedOp`` does not. The
    subclass's ``__call__`` is the op's generated call, so an eager call is one
    Python frame (a delegating ``__call__`` would add a third to its cost on 2.4).
    Handles pickle by qualified name.
    """

    _registration: Registration

    def __new__(cls, registration: Registration, fn: Callable[..., Any]) -> TaggedOp:
        # Each handle is the one instance of a class of its own, whose __call__ is the
        # op's generated calling function: a call is one Python frame, not two (a
        # third of an eager call's cost on 2.4). Dynamo traces it like any __call__.
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        return super().__new__(own)

    def __init__(self, registration: Registration, fn: Callable[..., Any] | None) -> None:
        self._point_at(registration)
        self.__name__ = registration.sig.name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", __name__)

    def _point_at(self, registration: Registration) -> None:
        assert registration.call is not None, "a handle points at the user's op, never at an untagged twin"
        self._registration = registration
        self._set_call(registration.call)

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
        return f"<TaggedOp({self._registration.sig.qualname})>"

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
        """``"<namespace>::<name>"``."""
        return self._registration.sig.qualname

    @property
    def kind(self) -> Kind:
        """``"inplace"`` or ``"out"``."""
        return self._registration.sig.kind

    @property
    def is_native(self) -> bool:
        """Registered with the native ``torch.Tag.inplace`` / ``torch.Tag.out``."""
        return self._registration.tagged

    @property
    def opoverload(self) -> torch._ops.OpOverload:
        """The dispatcher op, ``torch.ops.<namespace>.<name>.default``."""
        return self._registration.op

    @property
    def schema(self) -> str:
        """The registered schema, e.g. ``ns::sin_(Tensor(a0!) x) -> Tensor(a0!)``."""
        return str(self._registration.op._schema)

    @property
    def mutated_args(self) -> tuple[str, ...]:
        """Names of the arguments the op mutates: the first one (in-place), or the out buffers in order."""
        return self._registration.sig.mutated_names

    def mutated_in_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The objects a call ``op(*args, **kwargs)`` mutates, in :attr:`mutated_args` order."""
        return self._registration.sig.mutated_in_call(args, kwargs)

    def to_op_arguments(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Translate a call in the user's form into ``(args, kwargs)`` for :attr:`opoverload`."""
        bind = self._registration.bind
        assert bind is not None  # set with the call (see _point_at)
        return bind(*args, **kwargs)

    @property
    def paired(self) -> bool:
        """Whether Inductor lowers compiled calls of this out= op's functional op to it (2.13+).

        Only with ``pair=True``, on the native path, where this torch's lowering
        works for the op (see ``define_out``); asked of torch each time.
        """
        return self.is_native and self.kind == "out" and _pairing.is_paired(self.opoverload)

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
        """
        as_classic = self._registration.classic_kernels if classic is None else classic

        def inner(f: F) -> F:
            for device_type in _device_list(device_types):
                self._registration.set_kernel(device_type, f, classic=as_classic)
            return f

        return inner if fn is None else inner(fn)

    def register_fake(self, fn: Callable[..., Any] | None = None, /) -> Any:
        """Use ``fn`` as the fake (meta) kernel.

        Unnecessary, as on 2.13: tagged ops get a fake kernel automatically.
        Warns, then uses ``fn``: it may check shapes and dtypes; what it returns
        is ignored (the op returns its mutated tensors).
        """

        def inner(f: F) -> F:
            warnings.warn(
                f"The fake registration for {self} is unnecessary. Custom ops tagged with "
                f"torch.Tag.{self.kind} already get an autogenerated fake kernel. "
                "The provided fake impl will be used instead.",
                stacklevel=2 if fn is None else 3,  # the user's line, decorator or direct call
            )
            self._registration.set_fake(f)
            return f

        return inner if fn is None else inner(fn)

    def register_autograd(
        self, backward: Callable[..., Any], /, *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """Refused, as on 2.13: mutable ops have no autograd formula."""
        raise self._autograd_refusal(self)

    def _autograd_refusal(self, named: object) -> RuntimeError:
        """2.13's refusal, naming the op as ``named`` prints (the handle, or the OpOverload for torch.library)."""
        if self.kind == "out":
            return RuntimeError(
                f"Cannot register autograd formula for operator tagged with torch.Tag.out: {named}. "
                "Out variants do not support autograd."
            )
        return RuntimeError(
            f"Cannot register autograd formula for non-functional operator {named} with schema "
            f"{self._registration.op._schema}. Please create a functional operator and register "
            "an autograd formula for that."
        )

    if caps.has_custom_op_method("register_torch_dispatch"):

        def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Callable[..., Any] | None = None, /) -> Any:
            """As ``CustomOpDef.register_torch_dispatch``: ``fn(mode, func, types, args, kwargs)``.

            Write ``fn`` as for 2.13 (return what the op returns); on the fallback
            path its return value is dropped, as the untagged op returns nothing.
            ``args``/``kwargs`` are the registered op's (out buffers are positional
            on the fallback path; see :attr:`schema`).
            """

            def inner(f: F) -> F:
                rule: Callable[..., Any] = f
                if not self.is_native:

                    def rule(mode: Any, func: Any, types: Any, args: Any, kwargs: Any) -> None:
                        f(mode, func, types, args, kwargs)

                with _by_name.on_the_dispatcher(self._registration.qualname):
                    torch.library.register_torch_dispatch(
                        self._registration.qualname, torch_dispatch_class, rule, lib=self._registration.lib
                    )
                return f

            return inner if fn is None else inner(fn)

    if caps.has_custom_op_method("register_vmap"):

        def register_vmap(self, fn: Callable[..., Any] | None = None, /) -> Any:
            """As ``CustomOpDef.register_vmap``: ``fn(info, in_dims, *args, **kwargs) -> (output, out_dims)``.

            Write ``fn`` as for 2.13; on the fallback path its output is dropped
            (the untagged op returns nothing), so one rule serves both paths.
            Arguments are the registered op's (see :attr:`schema`).
            """

            def inner(f: F) -> F:
                rule: Callable[..., Any] = f
                if not self.is_native:

                    def rule(info: Any, in_dims: Any, *args: Any, **kwargs: Any) -> tuple[None, None]:
                        f(info, in_dims, *args, **kwargs)
                        return None, None

                self._registration.drop_vmap_loop()
                with _by_name.on_the_dispatcher(self._registration.qualname):
                    torch.library.register_vmap(self._registration.qualname, rule, lib=self._registration.lib)
                return f

            return inner if fn is None else inner(fn)

    if caps.has_custom_op_method("register_autocast"):

        def register_autocast(self, device_type: str, cast_inputs: torch.dtype, /) -> None:
            """As ``torch.library.register_autocast``: inside ``torch.autocast(device_type)`` the op's
            floating inputs are cast to ``cast_inputs``. What the op writes (the out buffers, an
            in-place op's first argument) is never cast: the op writes the caller's tensors."""
            self._registration.set_autocast(device_type, cast_inputs)


def _handle_named(qualname: str, module: str) -> TaggedOp:
    """The live handle of ``qualname``, importing ``module`` (where it was defined) if this process has none."""
    if not _HANDLES.get(qualname):
        importlib.import_module(module)
    for handle in _HANDLES.get(qualname, ()):
        return handle
    raise pickle.UnpicklingError(
        f"{qualname}: no op of that name is defined in this process, and importing {module!r} did not "
        "define it; define the op before unpickling a handle to it."
    )


def _device_list(device_types: Devices) -> list[str | None]:
    if device_types is None or isinstance(device_types, str):
        return [device_types]
    return list(device_types)


def is_native(op: Any) -> bool:
    """Whether ``op`` (a handle from this package) was registered with native tags."""
    return isinstance(op, TaggedOp) and op.is_native


def _define(
    kind: Kind,
    name: str,
    fn: Fn | None,
    mutates_args: Mutates,
    device_types: Devices,
    schema: str | None,
    *,
    pair: bool = False,
    classic_kernels: bool = False,
    fallback: bool = False,
    compile_functional: bool = False,
) -> TaggedOp:
    """Define the op from ``fn`` (its kernel on ``device_types``), or declare it from ``schema`` alone."""
    sig = define_signature(fn, name, kind, mutates_args, schema)
    native = caps.NATIVE_TAGS and not fallback and not fallback_forced()
    if caps.NATIVE_TAGS and not native:
        separate_fallback_compile_caches()
    previous = _CURRENT.pop(name, None)
    if previous is not None:
        _forget(name)
        previous.destroy()
    try:
        registration = register_native(sig) if native else register_fallback(sig)
        registration.classic_kernels = classic_kernels
        registration.compile_functional = compile_functional
        try:
            if fn is not None:
                for device_type in _device_list(device_types):
                    registration.set_kernel(device_type, fn)
            if native and kind == "out":
                _pairing.permit(registration.op, pair)
        except Exception:
            _pairing.forget(name)
            registration.destroy()  # leave the name free for the next attempt
            raise
    except Exception as e:
        # Handles made earlier must never reach the destroyed op (2.13 can crash).
        for old in _HANDLES.get(name, ()):
            old._point_at_nothing(e)
        raise
    _CURRENT[name] = registration
    handle = TaggedOp(registration, fn)
    handles = _HANDLES.setdefault(name, weakref.WeakSet())
    for old in handles:
        old._point_at(registration)
    handles.add(handle)
    _by_name.publish(handle)
    return handle


def _forget(name: str) -> None:
    _by_name.withdraw(name)
    _pairing.forget(name)


def _decorator_or_define(kind: Kind, name: str, fn: Fn | None, *args: Any, **kwargs: Any) -> Any:
    if fn is None:
        return lambda f: _define(kind, name, f, *args, **kwargs)
    return _define(kind, name, fn, *args, **kwargs)


@overload
def define_inplace(name: str, fn: None = None, /, **options: Unpack[Options]) -> Decorator: ...
@overload
def define_inplace(name: str, fn: Fn, /, **options: Unpack[Options]) -> TaggedOp: ...
def define_inplace(
    name: str,
    fn: Fn | None = None,
    /,
    *,
    mutates_args: Mutates = None,
    device_types: Devices = None,
    schema: str | None = None,
    fallback: bool = False,
    compile_functional: bool = False,
) -> Any:
    """Define an in-place op: it mutates its first positional Tensor and returns it.

    Use it like ``torch.library.custom_op(name, tags=torch.Tag.inplace)``::

        @tagged_ops.define_inplace("mylib::sin_")
        def sin_(x: torch.Tensor) -> torch.Tensor:
            x.sin_()
            return x

    ``mutates_args`` defaults to the first positional parameter and, when given,
    must name exactly it. ``device_types`` restricts the kernel to those device
    types (default: every device). ``schema`` overrides inference with a 2.13
    tagged schema string such as ``"(Tensor(a!) x) -> Tensor(a!)"``.
    On torch with native tags the op is registered with ``torch.Tag.inplace``;
    elsewhere (or with ``TAGGED_OPS_FALLBACK=1``, or ``fallback=True`` for this op)
    as an untagged mutable op, with the same observable behaviour through the
    returned handle. ``fallback=True`` keeps the op's ``torch.ops`` schema classic on
    every release: a library whose callers call ``torch.ops.ns.op.out(x, out)``
    positionally keeps them working (see docs/adopting.md).

    ``compile_functional=True``: compiled calls run the op on fresh tensors and copy
    the results in (one extra buffer and copy per mutated tensor), instead of
    letting Inductor write the caller's tensors in place. Inductor 2.3-2.14 can drop
    a clone the op reads (``y = x.clone(); op(x, y)`` compiles to ``op(x, x)``,
    pytorch/pytorch#198031): a kernel that reads its inputs after writing its
    output then computes wrong values. ``tagged_ops.testing.check`` says whether
    an op needs this; ``TAGGED_OPS_COMPILE_FUNCTIONAL=1`` turns it on for every op.
    """
    return _decorator_or_define(
        "inplace",
        name,
        fn,
        mutates_args,
        device_types,
        schema,
        fallback=fallback,
        compile_functional=compile_functional,
    )


@overload
def define_out(name: str, fn: None = None, /, **options: Unpack[OutOptions]) -> Decorator: ...
@overload
def define_out(name: str, fn: Fn, /, **options: Unpack[OutOptions]) -> TaggedOp: ...
def define_out(
    name: str,
    fn: Fn | None = None,
    /,
    *,
    mutates_args: Mutates = None,
    device_types: Devices = None,
    schema: str | None = None,
    pair: bool = False,
    fallback: bool = False,
    compile_functional: bool = False,
) -> Any:
    """Define an out= op: it writes keyword-only out buffers and returns them.

    Use it like ``torch.library.custom_op(name, tags=torch.Tag.out)``::

        @tagged_ops.define_out("mylib::sin_out")
        def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
            torch.sin(x, out=out)
            return out

    The out buffers are keyword-only ``Tensor`` parameters, written and never
    read, returned in declaration order (one Tensor, or a tuple for several).
    ``mutates_args`` defaults to every keyword-only ``Tensor`` parameter. Called
    with grad mode on and an argument that requires grad, it raises, as 2.13 does.

    ``pair``: on torch 2.13+, Inductor lowers compiled calls of a functional op
    ``ns::op`` to a tagged ``ns::op.out`` beside it (its "out variant"), also in code
    that never calls ``.out``. That lowering is broken for ``int[]`` and defaulted
    arguments and ignores which devices ``.out`` has kernels for, so by default
    (``pair=False``) tagged_ops keeps the two apart: the functional op compiles as it
    did before ``.out`` was defined. ``pair=True`` lets Inductor pair them wherever
    the lowering works on the installed torch (``.out`` has a kernel for every
    device the functional op has one for, and a probe compile shows the op's
    argument kinds pass intact); :attr:`TaggedOp.paired` says whether it does.
    ``fallback`` and ``compile_functional`` as for :func:`define_inplace`.
    """
    return _decorator_or_define(
        "out",
        name,
        fn,
        mutates_args,
        device_types,
        schema,
        pair=pair,
        fallback=fallback,
        compile_functional=compile_functional,
    )


def declare_inplace(
    name: str,
    schema: str,
    /,
    *,
    classic_kernels: bool = False,
    fallback: bool = False,
    compile_functional: bool = False,
) -> TaggedOp:
    """Declare an in-place op from its 2.13 tagged schema, with no kernel yet (as ``torch.library.define``).

    Kernels come later, per device, through :meth:`TaggedOp.register_kernel` or
    ``torch.library.register_kernel(name, device_type)``::

        scale_ = tagged_ops.declare_inplace("mylib::scale_", "(Tensor(a!) x, float alpha) -> Tensor(a!)")

        @scale_.register_kernel("cpu")
        def _(x, alpha):
            x.mul_(alpha)
            return x

    ``classic_kernels=True``: the op's kernels mutate and return None, as kernels of
    untagged ops are written; the op still returns its first argument.
    ``fallback`` and ``compile_functional`` as for :func:`define_inplace`. A call on a
    device with no kernel raises the dispatcher's "Could not run".
    """
    return _define(
        "inplace",
        name,
        None,
        None,
        None,
        schema,
        classic_kernels=classic_kernels,
        fallback=fallback,
        compile_functional=compile_functional,
    )


def declare_out(
    name: str,
    schema: str,
    /,
    *,
    classic_kernels: bool = False,
    pair: bool = False,
    fallback: bool = False,
    compile_functional: bool = False,
) -> TaggedOp:
    """Declare an out= op from its 2.13 tagged schema, with no kernel yet (as ``torch.library.define``).

    For libraries whose kernels live per device in backend modules::

        dequant_out = tagged_ops.declare_out(
            "mylib::dequant.out",
            "(Tensor A, Tensor absmax, int[] shape, *, Tensor(a!) out) -> Tensor(a!)",
            classic_kernels=True,  # the backends' kernels fill `out` and return None
        )

        @torch.library.register_kernel("mylib::dequant.out", "cuda")  # or dequant_out.register_kernel("cuda")
        def _(A, absmax, shape, out):
            ...

    ``classic_kernels``, ``pair``, ``fallback`` and ``compile_functional`` as for
    :func:`declare_inplace` and :func:`define_out`.
    """
    return _define(
        "out",
        name,
        None,
        None,
        None,
        schema,
        classic_kernels=classic_kernels,
        pair=pair,
        fallback=fallback,
        compile_functional=compile_functional,
    )
