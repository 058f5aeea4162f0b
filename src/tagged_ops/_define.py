"""``define_inplace`` / ``define_out`` and ``declare_inplace`` / ``declare_out``: the public ways to make an op.

Each defines (or defines again) an op in small named steps: the signature and 2.13's
definition checks (``_signature``), the path (``_native`` where torch has the tags,
else ``_fallback``) and the user's kernels, built in place of the name's current
definition (``_names.OpName.define``), then a handle that follows the name. A step
that fails removes what the earlier ones registered, so the name is free again, and
handles of an earlier definition refuse calls until the name is defined again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, overload

from . import _compat, _names
from ._contract import Kind
from ._definition import Definition, Devices
from ._handle import TaggedOp
from ._inference import define_signature
from ._switches import fallback_forced

__all__ = ["declare_inplace", "declare_out", "define_inplace", "define_out"]

Fn = Callable[..., Any]
Mutates = str | Iterable[str] | None

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
    native = _compat.NATIVE_TAGS and not fallback and not fallback_forced()
    options = {"pair": pair, "classic_kernels": classic_kernels, "compile_functional": compile_functional}

    def build() -> Definition:
        # each path's module is loaded by its first definition: a process uses one
        if native:
            from ._native import NativeDefinition

            definition: Definition = NativeDefinition(sig, **options)
        else:
            from ._fallback import FallbackDefinition

            definition = FallbackDefinition(sig, forced=_compat.NATIVE_TAGS, **options)
        if fn is not None:
            try:
                definition.register_kernel(device_types, fn, classic=False)
            except Exception:
                definition.destroy()  # leave the name free for the next attempt
                raise
        return definition

    life = _names.named(name)
    handle = TaggedOp(life.define(build), fn)
    life.follow(handle)
    return handle


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
) -> TaggedOp | Callable[[Callable[..., Any]], TaggedOp]:
    """Define an in-place op: it mutates its first positional Tensor and returns it.

    Use it like ``torch.library.custom_op(name, tags=torch.Tag.inplace)``:

    >>> @tagged_ops.define_inplace("docs::sin_")
    ... def sin_(x: torch.Tensor) -> torch.Tensor:
    ...     x.sin_()
    ...     return x
    >>> x = torch.zeros(2)
    >>> sin_(x) is x
    True

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
    letting Inductor write the caller's tensors in place. The compiler hazards
    docs/hazards.md lists (a dropped clone, pytorch/pytorch#198031, among them) are
    fixed without it; it remains for a kernel you suspect of a hazard nobody has
    measured yet. ``TAGGED_OPS_COMPILE_FUNCTIONAL=1`` turns it on for every op.
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
) -> TaggedOp | Callable[[Callable[..., Any]], TaggedOp]:
    """Define an out= op: it writes keyword-only out buffers and returns them.

    Use it like ``torch.library.custom_op(name, tags=torch.Tag.out)``:

    >>> @tagged_ops.define_out("docs::cos_out")
    ... def cos_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    ...     torch.cos(x, out=out)
    ...     return out
    >>> o = torch.empty(2)
    >>> cos_out(torch.zeros(2), out=o) is o
    True
    >>> o
    tensor([1., 1.])

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
    ``torch.library.register_kernel(name, device_type)``:

    >>> triple_ = tagged_ops.declare_inplace("docs::triple_", "(Tensor(a!) x, float alpha) -> Tensor(a!)")
    >>> @triple_.register_kernel("cpu")
    ... def _(x, alpha):
    ...     x.mul_(alpha)
    ...     return x
    >>> triple_(torch.ones(2), 3.0)
    tensor([3., 3.])

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

    For libraries whose kernels live per device in backend modules (a backend registers
    with ``dequant_out.register_kernel("cuda")`` or, on torch 2.4+,
    ``torch.library.register_kernel("mylib::dequant.out", "cuda")``):

    >>> dequant_out = tagged_ops.declare_out(
    ...     "docs::dequant.out",
    ...     "(Tensor A, Tensor absmax, int[] shape, *, Tensor(a!) out) -> Tensor(a!)",
    ...     classic_kernels=True,  # the backends' kernels fill `out` and return None
    ... )
    >>> @dequant_out.register_kernel("cpu")
    ... def _(A, absmax, shape, out):
    ...     out.copy_((A * absmax).reshape(shape))
    >>> o = torch.empty(2, 2)
    >>> dequant_out(torch.ones(4), torch.tensor(0.5), [2, 2], out=o) is o
    True

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
