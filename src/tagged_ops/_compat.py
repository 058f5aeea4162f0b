"""What the installed torch offers: feature probes, and backports of what it lacks.

Every version-specific decision in tagged_ops is a question asked here, of a
feature, never of a version string: 2.10-2.12 ship a ``torch.Tag.out_variant``
that is not 2.13's ``torch.Tag.out``, and local or nightly builds
(``2.13.0+cpu``, ``2.14.0a0+git...``) defeat string comparisons.

Laid out as typing_extensions lays out its backports: one section per upstream
name (and the release that has it), the probe and its backport side by side,
named as upstream names them, without a leading underscore. Each section that
decides between releases has a ``# Breakpoint:`` line naming the upstream pull
request that moved it (or saying none was identified), so the branch can go once
the oldest supported release is past it. Costly probes run on first use. With
``_compat_infer_schema`` and ``_fixes/``, the only place that touches torch's
private names (docs/ARCHITECTURE.md lists them).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import operator
from typing import Any, Callable, Sequence

import torch

# -- the oldest torch we support: 2.2 --------------------------------------------------
# Detected by what tagged_ops cannot work without, never by version string: a
# fake-kernel registration (torch.library.impl_abstract, 2.2; register_fake, 2.4).
# docs/SUPPORT.md says which releases are supported and how one is dropped.
if not (hasattr(torch.library, "register_fake") or hasattr(torch.library, "impl_abstract")):
    raise ImportError(
        f"tagged_ops supports torch 2.2 and newer (docs/SUPPORT.md); the installed torch {torch.__version__} "
        "cannot register fake kernels for custom ops (torch.library.impl_abstract): install torch 2.2 or newer."
    )

#: ``torch._ops.OpOverload``: the type of ``torch.ops.<ns>.<name>.<overload>`` (for annotations).
OpOverload = torch._ops.OpOverload
#: ``torch._ops.OpOverloadPacket``: the type of ``torch.ops.<ns>.<name>``.
OpOverloadPacket = torch._ops.OpOverloadPacket


def schema_of(op: Any) -> Any:
    """``op._schema``: the ``torch._C.FunctionSchema`` of an ``OpOverload`` (every release)."""
    return op._schema


def schema_defaults(op: Any) -> dict[str, Any]:
    """The default of each of ``op``'s arguments that has one, by name: what the dispatcher leaves
    out of a call's arguments when they equal it."""
    return {a.name: a.default_value for a in op._schema.arguments if a.has_default_value()}


#: ``t._base``: the tensor ``t`` is a view of, or None (every release; C speed, for the eager call).
view_base: Callable[[torch.Tensor], torch.Tensor | None] = operator.attrgetter("_base")
#: ``t._cdata``: the address of ``t``'s TensorImpl, equal for two Python objects of one tensor (every release).
tensor_impl: Callable[[torch.Tensor], int] = operator.attrgetter("_cdata")


def written_argument_names(schema: Any) -> list[str]:
    """The arguments a ``FunctionSchema`` marks written (``Tensor(a!)``), in order."""
    return [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]


#: ``torch._C.parse_schema``: a schema string -> ``torch._C.FunctionSchema``.
parse_schema: Callable[[str], Any] = torch._C.parse_schema


def accepts_keyword(fn: Callable[..., Any] | None, name: str) -> bool:
    """Whether ``fn`` takes a parameter ``name`` (False for builtins without a signature)."""
    try:
        return fn is not None and name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# -- torch._library.utils.parse_namespace (2.2) -------------------------------------
# Breakpoint: none in the matrix (2.2-2.15 all have it); the else serves a torch that moves it.

if hasattr(getattr(getattr(torch, "_library", None), "utils", None), "parse_namespace"):
    from torch._library.utils import parse_namespace
else:

    def parse_namespace(qualname: str) -> tuple[str, str]:
        """``"ns::name.overload"`` -> ``("ns", "name.overload")``, as torch's own (moved or gone here)."""
        splits = qualname.split("::")
        if len(splits) != 2:
            raise ValueError(f"Expected `qualname` to be of the form 'namespace::name', but got {qualname}")
        return splits[0], splits[1]


# -- torch._library.utils.lookup_op (2.2) ------------------------------------------
# Breakpoint: none in the matrix (2.2-2.15 all have it); the else serves a torch that moves it.

if hasattr(getattr(getattr(torch, "_library", None), "utils", None), "lookup_op"):
    from torch._library.utils import lookup_op
else:

    def lookup_op(qualname: str) -> Any:  # type: ignore[misc]
        """``"ns::name.overload"`` -> ``torch.ops.ns.name.overload``, as torch's own (moved or gone here)."""
        namespace, name = parse_namespace(qualname)
        packet, _, overload = name.partition(".")
        return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")


# -- the tensors torch's tracers make (every release) -----------------------------------
# Breakpoint: none; FakeTensor lives in torch._subclasses, FunctionalTensor there or in torch._functorch.


def is_tracer_tensor(t: torch.Tensor) -> bool:
    """Whether ``t`` is one of the tensors torch's tracers make (fake, functional): no values of its own."""
    return type(t).__module__.startswith(("torch._subclasses", "torch._functorch"))


# -- torch._C._jit_resolve_packet (every release) --------------------------------------
# Breakpoint: none in the matrix (2.2-2.15 all have it): the dispatcher's own overload resolution.


def packet_name(packet: Any) -> str:
    """``"ns::name"`` of an ``OpOverloadPacket`` (``torch.ops.ns.name``)."""
    return str(packet._qualified_op_name)


def resolve_overload(packet: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The ``OpOverload`` of ``packet`` that a call with ``args`` and ``kwargs`` runs, as torch picks it."""
    overload = torch._C._jit_resolve_packet(packet_name(packet), *args, **kwargs)
    return getattr(packet, overload or "default")


# -- torch._library.utils.is_tensor_like_type / is_tensorlist_like_type (2.4) ---------
# Breakpoint: torch 2.4 (2.2/2.3 take the else; upstream PR not identified).

if hasattr(getattr(getattr(torch, "_library", None), "utils", None), "is_tensorlist_like_type"):
    from torch._library.utils import is_tensor_like_type, is_tensorlist_like_type
else:

    def is_tensorlist_like_type(typ: Any) -> bool:  # type: ignore[misc]
        """``Tensor[]``, ``Tensor?[]`` and either optional, as torch's own (absent here)."""
        tensor = torch.TensorType.get()
        lists = (torch.ListType(tensor), torch.ListType(torch.OptionalType(tensor)))
        return typ in (*lists, *map(torch.OptionalType, lists))

    def is_tensor_like_type(typ: Any) -> bool:  # type: ignore[misc]
        """``Tensor`` or ``Tensor?``, as torch's own (absent here)."""
        return typ in (torch.TensorType.get(), torch.OptionalType(torch.TensorType.get()))


# -- torch.Tag.inplace / torch.Tag.out (2.13) ---------------------------------
# Breakpoint: pytorch/pytorch#181099 (Tag.inplace), #180851 (Tag.out, renamed from the
# 2.10-2.12 Tag.out_variant), #184201 / #184202 (custom_op and infer_schema take tags=).


def _probe_native_tags() -> bool:
    # The 2.13 feature is three things at once: the two tags, tag-aware schema
    # inference, and tag-aware registration. Tag.out_variant (2.10-2.12) has none
    # of the semantics and must not count.
    return (
        hasattr(torch.Tag, "inplace")
        and hasattr(torch.Tag, "out")
        and accepts_keyword(getattr(torch.library, "infer_schema", None), "tags")
        and accepts_keyword(torch.library.Library.define, "tags")
    )


#: The installed torch has native tagged mutable custom ops (``torch.Tag.inplace``
#: and ``torch.Tag.out`` with tag-aware schema inference and registration). tagged_ops
#: then infers schemas, and raises definition errors, through torch's own ``infer_schema``.
NATIVE_TAGS: bool = _probe_native_tags()


# -- torch._library.custom_ops.CustomOpDef / OPDEFS (2.4+, methods added since) ----------
# Breakpoint: pytorch/pytorch#122344 (custom_op, 2.4); later methods such as register_vmap
# (pytorch/pytorch#130589, 2.5) are probed one by one.

_CUSTOM_OPS: Any = getattr(getattr(torch, "_library", None), "custom_ops", None)
#: ``torch._library.custom_ops.CustomOpDef``, the type ``custom_op`` returns; None before 2.4.
CustomOpDef: Any = getattr(_CUSTOM_OPS, "CustomOpDef", None)
#: qualified name -> ``CustomOpDef``: where ``torch.library.register_kernel`` and its
#: siblings look an op up before registering on the dispatcher; None before 2.4.
OPDEFS: Any = getattr(_CUSTOM_OPS, "OPDEFS", None)


def has_custom_op_method(name: str) -> bool:
    """Whether torch's own ``CustomOpDef`` has method ``name`` on this release.

    The handle offers the same optional registration methods as torch does, so a
    method the installed torch lacks is absent rather than broken.
    """
    return CustomOpDef is not None and hasattr(CustomOpDef, name)


# -- torch._library._out_variant.to_out_variant (2.13) --------------------------------
# Breakpoint: pytorch/pytorch#174473 (to_out_variant); Inductor asks it per compiled call.


def to_out_variant(functional_op: Any) -> Any:
    """The overload Inductor lowers compiled calls of ``functional_op`` to (its "out variant"), or None.

    None too where Inductor pairs no out variants (before 2.13), or where ``functional_op``
    is no functional op.
    """
    try:
        module = importlib.import_module("torch._library._out_variant")
        return module.to_out_variant(functional_op)
    except (ImportError, AttributeError, RuntimeError):
        return None


# -- torch.library.register_fake (2.4; impl_abstract before), into its registry entry --
# Breakpoint: pytorch/pytorch#123937 (2.4 renamed it); the holder's lib=: not identified (2.12.1 has it).


def register_fake(qualname: str, fn: Callable[..., Any], /, *, lib: torch.library.Library) -> None:
    """``torch.library.register_fake(qualname, fn, lib=lib)``, minus its reads of the caller's source (1.5 ms)."""
    entry = torch._library.simple_registry.singleton.find(qualname)
    holder: Any = entry.fake_impl if hasattr(entry, "fake_impl") else entry.abstract_impl  # 2.5 renamed it
    own_lib = (lib,) if _takes_lib(type(holder)) else ()  # type: ignore[arg-type]
    lib._registration_handles.append(holder.register(fn, f"tagged_ops' definition of {qualname}", *own_lib))


@functools.cache
def _takes_lib(holder_type: object) -> bool:  # else the holder makes a Library of its own (2.5.1)
    return "lib" in inspect.signature(holder_type.register).parameters  # type: ignore[attr-defined]


# -- torch.library.opcheck (2.4; torch.testing._internal.optests before) -------------
# Breakpoint: pytorch/pytorch#124496 (opcheck public, 2.4).


def _probe_opcheck() -> Callable[..., dict[str, str]]:
    public = getattr(torch.library, "opcheck", None)
    if public is not None:
        return public  # type: ignore[no-any-return]

    # 2.2/2.3 ship the same checks under torch.testing (it needs expecttest,
    # a test dependency), so import it only when someone asks for opcheck.
    def internal_opcheck(*args: Any, **kwargs: Any) -> dict[str, str]:
        try:
            optests = importlib.import_module("torch.testing._internal.optests")
        except ImportError as e:
            raise ImportError(
                f"tagged_ops.opcheck on torch {torch.__version__} uses torch.testing._internal.optests, "
                f"which needs the 'expecttest' package: pip install expecttest ({e})"
            ) from e
        return optests.opcheck(*args, **kwargs)  # type: ignore[no-any-return]

    return internal_opcheck


#: ``torch.library.opcheck``, or its 2.2/2.3 original.
opcheck: Callable[..., dict[str, str]] = _probe_opcheck()

#: The checks opcheck runs by default: torch's list (2.4+); on 2.2/2.3 that list, which
#: their optests' longer one (with test_aot_dispatch_static) later became.
OPCHECK_DEFAULT_UTILS: tuple[str, ...] = tuple(
    getattr(
        torch.library,
        "_OPCHECK_DEFAULT_UTILS",
        ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"),
    )
)


def opcheck_accepts_tolerances() -> bool:
    """``torch.library.opcheck(..., atol=, rtol=)`` exists (newer releases only)."""
    return accepts_keyword(opcheck, "atol")


# -- torch.library.Library._destroy (complete from 2.3) -------------------------
# Breakpoint: torch 2.3 (upstream PR not identified); the extra cleanup is harmless after it.


def destroy_library(lib: torch.library.Library) -> None:
    """``lib._destroy()``: remove everything ``lib`` registered, so the same op and keys can be registered again.

    On 2.2 ``Library._destroy`` leaves the library's Python kernels in
    torch.library's module-wide bookkeeping, and a new kernel for the same op and
    key is refused ("already a kernel registered from python"); it also keeps the
    cached ``torch.ops.<ns>.<name>`` packet, whose overloads point at the destroyed
    operator (calling it crashes). Both are dropped here, as 2.3+ does.
    """
    lib._destroy()
    for qualname in getattr(lib, "_op_defs", ()):
        ns, name = parse_namespace(qualname)
        packet = name.partition(".")[0]
        namespace = getattr(torch.ops, ns, None)
        if namespace is not None and packet in namespace.__dict__:
            delattr(namespace, packet)
    for registry, mine in (("_impls", "_op_impls"), ("_defs", "_op_defs")):
        known, owned = getattr(torch.library, registry, None), getattr(lib, mine, None)
        if isinstance(known, set) and isinstance(owned, set):
            known -= owned
            owned.clear()


# -- torch._C._dispatch_dump (every release) -------------------------------------------


def dispatcher_entry_exists(qualname: str) -> bool:
    """Whether the dispatcher still has an entry for ``qualname`` (a schema, or any kernel)."""
    return bool(torch._C._dispatch_dump(qualname))


# -- torch._C._dispatch_key_for_device / DispatchKey.Autocast<device> -------------------


def dispatch_key_for(qualname: str, device_type: str | None) -> str:
    """The key a kernel for ``device_type`` registers under (None or ``"default"``: every device,
    as in ``torch.library.register_kernel``)."""
    if device_type is None or device_type == "default":
        return "CompositeExplicitAutograd"
    try:
        # torch's own table: "cpu" -> "CPU", and renamed PrivateUse1 backends too
        return str(torch._C._dispatch_key_for_device(device_type))
    except RuntimeError as e:
        raise ValueError(f"{qualname}: unknown device type {device_type!r} ({e})") from None


def autocast_dispatch_key(device_type: str) -> Any:
    """The autocast dispatch key of ``device_type`` ("cpu" -> AutocastCPU), or None where it has none."""
    return getattr(torch._C.DispatchKey, f"Autocast{torch._C._dispatch_key_for_device(device_type)}", None)


def excluding(key: Any) -> Any:
    """A context in which the dispatcher skips ``key`` (``torch._C._ExcludeDispatchKeyGuard``)."""
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key))


# -- torch._ops._refresh_packet (2.13) --------------------------------------------
# Breakpoint: torch 2.13 (upstream PR not identified).


def refresh_packet(namespace: str, packet: str) -> None:
    """Make a cached ``torch.ops.<namespace>.<packet>`` list an overload defined after it was built.

    2.13's ``Library.define`` does this itself; on older releases a packet keeps
    the overload names it saw first, so ``overloads()`` missed ``.Tensor``
    defined after ``.Scalar``. The backport refreshes the same packet object in
    place, as upstream does, so the ``OpOverload`` objects handles already hold
    stay the packet's own.
    """
    cached = vars(getattr(torch.ops, namespace)).get(packet)
    if cached is None:
        return
    refresh = getattr(torch._ops, "_refresh_packet", None)
    if refresh is not None:
        refresh(cached)
        return
    op, overload_names = torch._C._jit_get_operation(cached._qualified_op_name)
    if op is not None:
        op.__module__ = cached._op.__module__
        cached._op = op
        cached._overload_names = overload_names


# -- torch._C._increment_version (one Tensor before 2.5, a list of them after) -------
# Breakpoint: pytorch/pytorch#132652 (increment_version takes a list).

#: ``torch._C._increment_version`` as torch has it: one Tensor before 2.5, a list of them after.
torch_increment_version: Callable[[torch.Tensor], None] = torch._C._increment_version


@functools.cache
def increment_version() -> Callable[[tuple[torch.Tensor, ...]], None]:
    """A function that bumps the version counter of every tensor in a tuple.

    Kernels that write through NumPy bypass the counter, so tagged_ops bumps it.
    Returns torch's own where it takes the tuple (the kernel calls it directly),
    as its public wrapper ``torch.autograd.graph.increment_version`` declares.
    Read from that declaration rather than tried: a tuple where torch wants a
    Tensor raises from C++, and a process's first C++ exception costs 1.25 MB (2.4.1).
    """
    raw = torch._C._increment_version
    declared = torch.autograd.graph.increment_version.__annotations__.get("tensor")
    if "Iterable" in str(declared):
        return raw  # type: ignore[no-any-return]

    def each(tensors: tuple[torch.Tensor, ...]) -> None:
        for t in tensors:
            raw(t)

    return each


# -- torch._C._any_requires_grad (2.5) ----------------------------------------------
# Breakpoint: torch 2.5 (upstream PR not identified).


def any_requires_grad_py(*args: Any, **kwargs: Any) -> bool:
    """The backport, in plain Python: Dynamo traces it (not torch's C++ helper)."""
    for a in (*args, *kwargs.values()):
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                return True
    return False


#: Whether any Tensor among the arguments requires grad.
any_requires_grad: Callable[..., bool] = getattr(torch._C, "_any_requires_grad", None) or any_requires_grad_py
