"""The capability probe: the one place that knows what the installed torch can do.

Every version-specific decision in tagged_ops asks this module a question.
Features are detected, never inferred from version strings: 2.10-2.12 ship a
``torch.Tag.out_variant`` that is *not* the 2.13 ``torch.Tag.out``, and local or
nightly builds (``2.13.0+cpu``, ``2.14.0a0+git...``) defeat string comparisons.

Laid out as typing_extensions lays out its backports: one section per upstream
capability, headed by the upstream name (and the release that has it), the
probe and its fallback side by side. Names are upstream's, without a leading
underscore. Probes that cost anything run on first use, not at import.
Each section that decides between releases names, in a ``# Breakpoint:`` line, the
upstream pull request that moved it (or says that none was identified), so the
branch can be deleted once the oldest supported release is past it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any, Callable, Literal, Mapping, NamedTuple

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


def split_overload(name: str) -> tuple[str, str]:
    """``"foo.out"`` -> ``("foo", "out")``, ``"foo"`` -> ``("foo", "")``: an op name's packet and overload.

    The one place tagged_ops splits a name (torch has no helper for it).
    """
    packet, _, overload = name.partition(".")
    return packet, overload


# -- torch._library.utils.lookup_op (2.2) ------------------------------------------
# Breakpoint: none in the matrix (2.2-2.15 all have it); the else serves a torch that moves it.

if hasattr(getattr(getattr(torch, "_library", None), "utils", None), "lookup_op"):
    from torch._library.utils import lookup_op
else:

    def lookup_op(qualname: str) -> Any:  # type: ignore[misc]
        """``"ns::name.overload"`` -> ``torch.ops.ns.name.overload``, as torch's own (moved or gone here)."""
        namespace, name = parse_namespace(qualname)
        packet, overload = split_overload(name)
        return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")


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


def _accepts_keyword(fn: Callable[..., Any] | None, name: str) -> bool:
    try:
        return fn is not None and name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


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
        and _accepts_keyword(getattr(torch.library, "infer_schema", None), "tags")
        and _accepts_keyword(torch.library.Library.define, "tags")
    )


#: The installed torch has native tagged mutable custom ops (``torch.Tag.inplace``
#: and ``torch.Tag.out`` with tag-aware schema inference and registration). tagged_ops
#: then infers schemas, and raises definition errors, through torch's own ``infer_schema``.
NATIVE_TAGS: bool = _probe_native_tags()

#: What an op does to its arguments: mutates its first one (``torch.Tag.inplace``), or
#: writes keyword-only out buffers (``torch.Tag.out``).
Kind = Literal["inplace", "out"]


def tag_for(kind: Kind) -> Any:
    """``torch.Tag.inplace`` or ``torch.Tag.out`` (only where :data:`NATIVE_TAGS`)."""
    return getattr(torch.Tag, kind)


# Breakpoint: pytorch/pytorch#181099 / #180851 (Library.define validates tagged schemas).
#: torch.library._validate_inplace_schema / _validate_out_schema, the checks
#: Library.define(tags=) runs (2.13); _schema_rules backports them elsewhere.
SCHEMA_VALIDATORS: bool = hasattr(torch.library, "_validate_inplace_schema") and hasattr(
    torch.library, "_validate_out_schema"
)


# -- torch._library.infer_schema (2.4; torch._custom_op.impl before) ----------------
# Breakpoint: torch 2.4, with torch.library.custom_op (pytorch/pytorch#122344); 2.2/2.3 keep
# the same table in torch._custom_op.impl (the PR that moved it is not identified).


@functools.cache
def _schema_inference() -> Any:
    # The annotation -> schema-type table and return parsing behind custom_op's schema
    # inference: private names, looked up on first use by the backport that needs them
    # (releases without native tags), so a torch that moves them still imports us.
    for name in ("torch._library.infer_schema", "torch._custom_op.impl"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "SUPPORTED_PARAM_TYPES") and hasattr(module, "parse_return"):
            return module
    raise ImportError(
        f"tagged_ops: torch {torch.__version__} has no custom-op schema inference where tagged_ops looks for it "
        "(torch._library.infer_schema.SUPPORTED_PARAM_TYPES / parse_return); see docs/SUPPORT.md"
    )


def supported_param_types() -> Mapping[Any, str]:
    """Annotation -> schema type, as torch's own schema inference accepts them."""
    return _schema_inference().SUPPORTED_PARAM_TYPES  # type: ignore[no-any-return]


def parse_return(annotation: Any, error_fn: Callable[[str], Any]) -> str:
    """torch's own return-type parsing: the schema text of ``annotation``."""
    return _schema_inference().parse_return(annotation, error_fn)  # type: ignore[no-any-return]


# -- torch._library.custom_ops.CustomOpDef.register_* (2.4+, methods added since) ----
# Breakpoint: pytorch/pytorch#122344 (custom_op, 2.4); later methods such as register_vmap
# (pytorch/pytorch#130589, 2.5) are probed one by one.

_CUSTOM_OP_DEF: Any = getattr(getattr(getattr(torch, "_library", None), "custom_ops", None), "CustomOpDef", None)


def has_custom_op_method(name: str) -> bool:
    """Whether torch's own ``CustomOpDef`` has ``register_<name>`` on this release.

    The handle offers the same optional registration methods as torch does, so a
    method the installed torch lacks is absent rather than broken.
    """
    return _CUSTOM_OP_DEF is not None and hasattr(_CUSTOM_OP_DEF, name)


# -- torch._library.custom_ops.OPDEFS (2.4) -------------------------------------------
# Breakpoint: torch 2.4 (pytorch/pytorch#122344 brought custom_ops.py; None before).

#: qualified name -> ``CustomOpDef``: where ``torch.library.register_kernel`` and its
#: siblings look an op up before registering on the dispatcher (see ``_by_name.py``);
#: None before 2.4, whose ``torch.library`` has no such functions.
CUSTOM_OP_DEFS: Any = getattr(getattr(getattr(torch, "_library", None), "custom_ops", None), "OPDEFS", None)


# -- torch._library._out_variant.to_out_variant (2.13) --------------------------------
# Breakpoint: pytorch/pytorch#174473 (to_out_variant); Inductor asks it per functional call.

#: The module whose ``to_out_variant(functional_op)`` Inductor asks, per compiled call
#: of a functional custom op, for a same-packet overload tagged ``torch.Tag.out`` to
#: lower it to (see ``_pairing.py``); None where Inductor pairs no out variants.
OUT_VARIANT_PAIRING: Any = getattr(getattr(torch, "_library", None), "_out_variant", None)
if OUT_VARIANT_PAIRING is None:
    try:
        OUT_VARIANT_PAIRING = importlib.import_module("torch._library._out_variant")
    except ImportError:
        pass
if not hasattr(OUT_VARIANT_PAIRING, "to_out_variant"):
    OUT_VARIANT_PAIRING = None


# -- torch.library.register_fake (Library._register_fake, 2.4; impl_abstract before) --


def register_fake(qualname: str, fn: Callable[..., Any], /, *, lib: torch.library.Library) -> None:
    """``torch.library.register_fake(qualname, fn, lib=lib)``: ``fn`` is the op's fake (meta) kernel.

    Through the library's own method where it has one (2.4+: no warning about a
    Python kernel in the op's module), ``impl_abstract`` (the older name) before.
    """
    if hasattr(lib, "_register_fake"):  # Breakpoint: pytorch/pytorch#123937 (2.4 renamed impl_abstract)
        lib._register_fake(parse_namespace(qualname)[1], fn)
    else:
        torch.library.impl_abstract(qualname, fn, lib=lib)


# -- torch.library.register_vmap (2.5) ------------------------------------------------
# Breakpoint: pytorch/pytorch#130589.

if hasattr(torch.library, "register_vmap"):
    register_vmap = torch.library.register_vmap
else:

    class _VmapInfo:
        def __init__(self, batch_size: int, randomness: str) -> None:
            self.batch_size = batch_size
            self.randomness = randomness

    def register_vmap(  # type: ignore[misc]
        op: str, func: Callable[..., Any], /, *, lib: torch.library.Library
    ) -> None:
        """Backport of ``torch.library.register_vmap`` for what tagged_ops registers: a rule
        ``func(info, in_dims, *args, **kwargs) -> (None, None)`` of an op that returns nothing
        (the fallback in-place op's loop), run at the FuncTorchBatched key on the unbatched
        values, one vmap level down, as upstream's runs."""
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

        functorch = torch._C._functorch

        def batched(*args: Any, **kwargs: Any) -> None:
            interpreter: Any = retrieve_current_functorch_interpreter()
            level = interpreter.level()
            values, in_dims = [], []
            for a in args:
                if (
                    isinstance(a, torch.Tensor)
                    and functorch.is_batchedtensor(a)
                    and functorch.maybe_get_level(a) == level
                ):
                    value, dim = functorch._unwrap_batched(a, level)
                else:
                    value, dim = a, None
                values.append(value)
                in_dims.append(dim)
            info = _VmapInfo(interpreter.batch_size(), str(interpreter.randomness()))
            with interpreter.lower():
                outputs, _ = func(info, tuple(in_dims), *values, **kwargs)
            if outputs is not None:
                raise NotImplementedError(f"{op}: this torch's register_vmap backport takes rules that return nothing")

        lib.impl(parse_namespace(op)[1], batched, "FuncTorchBatched")


# -- torch.library.opcheck (2.4; torch.testing._internal.optests before) -------------
# Breakpoint: pytorch/pytorch#124496 (torch.library.opcheck).


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
    return _accepts_keyword(opcheck, "atol")


# -- torch.library.Library._destroy (complete from 2.3) -------------------------
# Breakpoint: torch 2.3 (upstream PR not identified); the extra cleanup is harmless after it.


def destroy_library(lib: torch.library.Library) -> None:
    """Remove everything ``lib`` registered, so the same op and keys can be registered again.

    On 2.2/2.3 ``Library._destroy`` leaves the library's Python kernels in
    torch.library's module-wide bookkeeping until it is garbage collected, and
    a new kernel for the same op and key is refused ("already a kernel
    registered from python"); drop them from it here.
    """
    lib._destroy()
    # 2.2 also keeps the cached torch.ops.<ns>.<name> packet, whose overloads
    # point at the destroyed operator (calling it crashes); drop it as 2.3+ does.
    for qualname in getattr(lib, "_op_defs", ()):
        ns, name = parse_namespace(qualname)
        packet = split_overload(name)[0]
        namespace = getattr(torch.ops, ns, None)
        if namespace is not None and packet in namespace.__dict__:
            delattr(namespace, packet)
    for registry, mine in (("_impls", "_op_impls"), ("_defs", "_op_defs")):
        known, owned = getattr(torch.library, registry, None), getattr(lib, mine, None)
        if isinstance(known, set) and isinstance(owned, set):
            known -= owned
            owned.clear()


# -- torch.fx.operator_schemas._SCHEMA_TO_SIGNATURE_CACHE (every release) ----------------


def forget_signature(namespace: str, opname: str) -> None:
    """Drop torch.fx's cached Python signature of ``namespace::opname`` when its definition goes.

    ``normalize_function`` (Inductor, opcheck's schema test) caches one signature per
    op name and overload, never invalidated: a name redefined with another schema
    (native <-> fallback in one process) must not be normalized with the old one.
    """
    cache = getattr(importlib.import_module("torch.fx.operator_schemas"), "_SCHEMA_TO_SIGNATURE_CACHE", None)
    if isinstance(cache, dict):
        packet, overload = split_overload(opname)
        cache.pop((f"{namespace}::{packet}", overload), None)


# -- torch._C._dispatch_dump (every release) -------------------------------------------


def dispatcher_entry_exists(qualname: str) -> bool:
    """Whether the dispatcher still has an entry for ``qualname`` (a schema, or any kernel)."""
    return bool(torch._C._dispatch_dump(qualname))


# -- torch.compiler.config.cache_key_tag (absent on 2.2 and 2.4; present on 2.13) --------
# Breakpoint: between 2.4 and 2.13 (not bisected; upstream PR not identified).


def add_compile_cache_key_tag(mark: str) -> bool:
    """Add ``mark`` to every key of Inductor's on-disk caches in this process.

    False where torch has no such tag (no release without it has native tags, so
    none needs one).
    """
    config = getattr(torch.compiler, "config", None)
    tag = getattr(config, "cache_key_tag", None)
    if tag is None:
        return False
    if mark not in tag:
        config.cache_key_tag = f"{tag}:{mark}" if tag else mark  # type: ignore[union-attr]
    return True


# -- torch._C.DispatchKey.Autocast<device> (per device type) -------------------------


def autocast_dispatch_key(device_type: str) -> Any:
    """The autocast dispatch key of ``device_type`` ("cpu" -> AutocastCPU), or None where it has none."""
    return getattr(torch._C.DispatchKey, f"Autocast{torch._C._dispatch_key_for_device(device_type)}", None)


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


@functools.cache
def increment_version() -> Callable[[tuple[torch.Tensor, ...]], None]:
    """A function that bumps the version counter of every tensor in a tuple.

    Kernels that write through NumPy bypass the counter, so tagged_ops bumps it.
    Probed on first use (it runs torch's on a scratch tensor), and returns
    torch's own where it takes the tuple: the kernel calls it directly.
    """
    raw = torch._C._increment_version
    try:
        raw((torch.zeros(1),))
    except (TypeError, RuntimeError):  # 2.4: "increment_version expect a Tensor as input"

        def each(tensors: tuple[torch.Tensor, ...]) -> None:
            for t in tensors:
                raw(t)

        return each
    return raw  # type: ignore[no-any-return]


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


# -- torch._C._functorch's interpreter stack (torch.func, every release) -------------
# Read by popping the layers and pushing them back, as
# torch._functorch.pyfunctorch.temporarily_pop_interpreter_stack does (2.2 has no
# get_interpreter_stack, and no release exposes a level's saved grad modes otherwise).


class TransformLevel(NamedTuple):
    """One active torch.func transform, as an op called inside it sees it."""

    kind: str  # "Grad", "Jvp", "Vmap" or "Functionalize" (torch's TransformType names)
    level: int
    grad_enabled: bool  # grad mode at this level
    fwd_grad_enabled: bool  # forward grad mode at this level


def transform_levels() -> list[TransformLevel]:
    """The active torch.func transforms, innermost first (empty outside them).

    Each level's grad modes are read off the level above it, which saved them on entry.
    """
    functorch = torch._C._functorch
    interpreters: list[Any] = []
    popped: list[Any] = []
    try:
        while (interpreter := functorch.peek_interpreter_stack()) is not None:
            kind = interpreter.key().name
            saved = (  # the modes of the level below, saved when this one was entered
                functorch.CGradInterpreterPtr(interpreter).prevGradMode() if kind == "Grad" else None,
                functorch.CJvpInterpreterPtr(interpreter).prevFwdGradMode() if kind == "Jvp" else None,
            )
            interpreters.append((kind, interpreter.level(), saved))  # read before the pop frees it
            popped.append(functorch.pop_dynamic_layer_stack())
    finally:
        for layer in reversed(popped):
            functorch.push_dynamic_layer_stack(layer)
    levels = []
    grad, fwd_grad = torch.is_grad_enabled(), torch._C._is_fwd_grad_enabled()
    for kind, level, (prev_grad, prev_fwd_grad) in interpreters:
        levels.append(TransformLevel(kind, level, grad, fwd_grad))
        grad = grad if prev_grad is None else prev_grad
        fwd_grad = fwd_grad if prev_fwd_grad is None else prev_fwd_grad
    return levels


# -- torch.compiler.is_dynamo_compiling / assume_constant_result ---------------------

#: True only while Dynamo traces (it constant-folds this call); a plain
#: function returning False in eager, so the hot path pays next to nothing.
is_dynamo_compiling: Callable[[], bool] = (
    getattr(torch.compiler, "is_dynamo_compiling", None)
    or getattr(torch.compiler, "is_compiling", None)
    or torch._utils.is_compiling  # 2.2: the one Dynamo constant-folds there
)


#: Mark a no-argument function so that Dynamo calls it while tracing and treats
#: the result as a constant (instead of tracing into it).
assume_constant_result: Callable[[Callable[[], Any]], Callable[[], Any]] = torch.compiler.assume_constant_result


# -- torch.compiler.is_exporting (2.7; 2.7-2.9 fold it to True under torch.compile) --
# Breakpoint: pytorch/pytorch#176499 (fixes #176347: is_exporting() True under torch.compile).

_HAS_EXPORTING_FLAG = hasattr(torch.compiler, "_is_exporting_flag")


def is_exporting() -> bool:
    """True while ``torch.export`` traces (strict export only where torch sets the flag there: 2.13).

    Reads the flag that ``torch.compiler.is_exporting()`` returns, as newer
    Dynamo does: Dynamo on 2.7-2.9 folds a call to that function to True under
    ``torch.compile`` too. False before 2.7, which cannot tell us.
    """
    return _HAS_EXPORTING_FLAG and bool(torch.compiler._is_exporting_flag)


# -- torch.compiler.disable(fn, reason=...) ---------------------------------------
# Breakpoint: pytorch/pytorch#150341 (the reason= argument).

_DISABLE_TAKES_REASON = _accepts_keyword(torch.compiler.disable, "reason")


def disable(fn: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """``fn`` run outside any graph (a graph break); fullgraph errors quote ``reason`` where torch can."""
    return torch.compiler.disable(fn, **({"reason": reason} if _DISABLE_TAKES_REASON else {}))


# -- torch._higher_order_ops.auto_functionalize (2.2; lowered by Inductor from 2.3) --
# Breakpoint: pytorch/pytorch#118673 (Inductor decomposes auto_functionalized, 2.3);
# pytorch/pytorch#134409 (auto_functionalized_v2, on by default from 2.6: views).


def _auto_functionalize_module() -> Any:
    try:
        return importlib.import_module("torch._higher_order_ops.auto_functionalize")
    except ImportError:
        return None


@functools.cache
def compiler_lowers_mutable_ops() -> bool:
    """Whether Inductor compiles a mutating custom op (``auto_functionalized``).

    AOTAutograd turns every mutating op into ``auto_functionalized`` (2.2+), but
    Inductor lowers that only from 2.3; 2.2 fails with "auto_functionalized is
    not an OpOverload". Asked only while Dynamo traces (importing Inductor takes
    seconds), never on the eager path.
    """
    lowering = importlib.import_module("torch._inductor.lowering")
    hop = getattr(_auto_functionalize_module(), "auto_functionalized", None)
    return hop is not None and hop in lowering.lowerings


def compiler_lowers_mutated_views() -> bool:
    """Whether Inductor compiles a mutating custom op on a view correctly.

    With ``auto_functionalized`` v1 (2.3-2.5, or ``enable_auto_functionalized_v2
    = False``) Inductor miscompiles an op that mutates a view of a tensor the graph
    itself made (``y = x + 1; op_(y[1:5]); return y``: wrong values, a hand-written
    op too); ``auto_functionalized_v2`` (on by default from 2.6) fixed it. Read at
    trace time, like the config it reads.
    """
    config = importlib.import_module("torch._inductor.config")
    return bool(getattr(config, "enable_auto_functionalized_v2", False))


# -- Inductor: a mutating op's kernel after the reads of what it writes (no release) ---------
# Breakpoint: none upstream (found by tagged_ops; 2.4.1, 2.13.0 and 2.15.0 measured). Inductor
# computes a pending read of a buffer (``t = b * 2``, not yet stored) only when it registers the
# buffer's mutation, which comes after the kernel of a mutating custom op: ``t = b * 2; op(t,
# out=b); return t * 1`` then computes ``t`` from the written ``b``. Native custom_op too. And
# 2.13 reuses the memory of a tagged op's out buffer while the tensor the op returned, that
# very buffer, is still to be read (``t = b * 2; op(a, out=b); return t``: b gets 2b). And
# Inductor's FallbackKernel says a mutating op's outputs alias none of its inputs (true until
# 2.13 let a custom op return what it mutates; still so in 2.15): a later write of the argument
# is not ordered after reads of what the op returned (tests/test_compile_reads.py, 2.13.0).

_READS_FIRST: set[Any] = set()


def compute_reads_before_writes(op: torch._ops.OpOverload) -> None:
    """Make Inductor compute every pending read of a buffer ``op`` writes before ``op``'s kernel.

    Installed on first use by the op's fake kernel, once Inductor is loaded (it is
    by the time AOTAutograd traces for it), so eager calls and import never pay.
    Inductor's own lowering of the op runs after that step, made as Inductor makes it;
    what the op returns is then the argument it wrote, whose writes Inductor orders.
    """
    lowering = sys.modules.get("torch._inductor.lowering")
    if op in _READS_FIRST or lowering is None:
        return
    lowerings = getattr(lowering, "lowerings", None)
    virtualized = sys.modules.get("torch._inductor.virtualized")
    if not isinstance(lowerings, dict) or op in lowerings or not hasattr(virtualized, "V"):
        return  # Inductor lowers it some other way here: leave it alone
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
    _READS_FIRST.add(op)


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


# -- auto_functionalized_v2 of a tagged op (2.13; no release fixed) ----------------------
# Breakpoint: none upstream (found by tagged_ops; 2.13.0 and 2.15.0 measured). Functionalization
# hands back what a tagged op returns as a new tensor, not as the argument it is: a later
# write through it (``torch.ops.ns.op_(torch.ops.ns.op_(x))``, ``op(a, out=o).mul_(2)``) is
# lost on that argument, under torch.compile and in ``run_decompositions()`` of an export
# (raw ``custom_op(tags=...)`` too; export records such a write for every call through the
# handle). ``_native.py`` therefore functionalizes the tagged op as its untagged twin.


def is_functional_base(t: torch.Tensor) -> bool:
    """Whether ``t`` is a tensor under functionalization and no view of another."""
    return torch._is_functional_tensor(t) and bool(torch._is_functional_tensor_base(t))


@functools.cache
def _generic_auto_functionalize() -> Callable[..., Any] | None:
    module = _auto_functionalize_module()
    helper = getattr(module, "_do_auto_functionalize_v2_for_generic_mutable_operator", None)
    functional_tensor = importlib.import_module("torch._subclasses.functional_tensor")
    cpp_api = getattr(functional_tensor, "CppFunctionalizeAPI", None)
    if helper is None or cpp_api is None:
        return None
    return lambda op, values: helper(cpp_api(), op, op._schema, values)


def auto_functionalize(op: torch._ops.OpOverload, values: dict[str, Any]) -> bool:
    """Record a call of the untagged mutating ``op`` as functionalization records it: ``auto_functionalized_v2``.

    For a kernel at the Functionalize key; ``values`` has every argument of ``op`` by
    name. Inductor writes its mutated arguments in place, as for any untagged op.
    False, recording nothing, where this torch has no such step (callers then record
    the functional twin).
    """
    record = _generic_auto_functionalize()
    if record is None:
        return False
    record(op, values)
    return True


def _probe_defaults_survive_functionalization() -> bool:
    # Breakpoint: torch 2.3 (upstream PR not identified).
    # 2.2's auto_functionalized(op, mutated_args_names, kwargs) rebuilds the
    # arguments by schema position, but the dispatcher drops trailing arguments
    # equal to their default: a mutable op called with a default value then fails
    # under functionalization (opcheck's AOT test, torch.ops calls in compiled
    # code) with IndexError. 2.3 made it auto_functionalized(op, **kwargs) and
    # fills in defaults.
    module = _auto_functionalize_module()
    if module is None:
        return True
    return not _accepts_keyword(type(module.auto_functionalized).__call__, "mutated_args_names")


#: Whether an untagged op's schema may carry defaults (False on 2.2: the
#: fallback schema then leaves them out, and the handle always passes them).
SCHEMA_DEFAULTS_SURVIVE_FUNCTIONALIZATION: bool = _probe_defaults_survive_functionalization()
