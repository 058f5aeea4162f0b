"""Dispatcher glue shared by both paths: one registered op and its kernels.

Both paths register through ``torch.library.Library.define`` plus Python kernels
rather than ``torch.library.custom_op``: custom_op spends most of its per-call
cost in Python layers around the dispatcher (a Python autograd kernel, a
version-bump kernel, a backend kernel), and our users call ops in hot loops.
Here a call makes one trip into Python, the backend kernel, which:

* calls the user's function in its own argument form and enforces the 2.13
  identity rule (return the first argument / the out buffers);
* refuses to run under autograd (grad mode on, an argument requires grad),
  before anything is written. For out= ops that is 2.13's own error, whoever
  calls; an in-place handle takes those calls on a path of its own
  (``autograd_call``), so only a direct ``torch.ops`` call gets this error;
* bumps every mutated tensor's version counter (a numpy kernel does not).

The Autograd key is a fallthrough, so autograd adds nothing per call (kept across
a redefinition with the same schema, see ``_anchor.py``). The fake
kernel is the trivial one unless the user registers their own.

What differs between the native and the fallback path is only the schema (and
therefore tags, argument order and return); see ``_native.py`` and ``_fallback.py``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import torch
import torch.fx.operator_schemas
from torch.library import Library

from . import _by_name
from . import _capabilities as caps
from ._anchor import anchor, release_unless_same
from ._calling import make_binder, make_compiled_call, make_handle_call, make_kernel_adapter
from ._functional import FunctionalTwin, make_functionalize_kernel
from ._signature import OpSignature, Param
from ._switches import compile_functional_forced
from ._transforms import TRANSFORM_KEY, make_transform_kernel

__all__ = ["Registration", "dispatch_key_for"]


def dispatch_key_for(qualname: str, device_type: str | None) -> str:
    """The dispatch key a kernel for ``device_type`` registers under (None or ``"default"``: every device,
    as in ``torch.library.register_kernel``)."""
    if device_type is None or device_type == "default":
        return "CompositeExplicitAutograd"
    try:
        # torch's own table: "cpu" -> "CPU", and renamed PrivateUse1 backends too
        return str(torch._C._dispatch_key_for_device(device_type))
    except RuntimeError as e:
        raise ValueError(f"{qualname}: unknown device type {device_type!r} ({e})") from None


def _grad_messages(sig: OpSignature) -> tuple[str, Callable[[], RuntimeError]]:
    """What a backward through an in-place op's mutation raises, and the error a direct call under autograd gets."""
    backward = (
        f"Trying to backward through {sig.qualname} but no autograd formula was registered. "
        "An in-place op (torch.Tag.inplace) cannot have one: call it on tensors that do not "
        "require grad, or under torch.no_grad()."
    )
    out = (  # 2.13's own error, for handle and direct calls alike
        f"{sig.packet}(): functions with out=... arguments don't support automatic "
        "differentiation, but one of the arguments requires grad."
    )
    direct = (
        f"{sig.qualname}: called through torch.ops with grad mode on and an argument that "
        "requires grad. Call it through its tagged_ops handle (which makes a backward through "
        "the mutated tensor raise), or under torch.no_grad()."
    )
    return backward, functools.partial(RuntimeError, out if sig.kind == "out" else direct)


def _grad_enabled_outside_export() -> bool:
    return torch.is_grad_enabled() and not caps.is_exporting()


class _NoAutogradFormula(torch.autograd.Function):
    """Puts an in-place op's mutated tensor behind a node that refuses backward.

    Native 2.13 returns a *view* here and leaves the mutated tensor's history
    alone, so a backward through that tensor is silently wrong; marking it dirty
    makes every backward through the mutation raise.
    """

    # forward and setup_context apart: torch.func's transforms accept only this form
    @staticmethod
    def forward(message: str, x: torch.Tensor, *inputs: Any) -> torch.Tensor:  # type: ignore[override]
        return x

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.message = inputs[0]
        ctx.mark_dirty(inputs[1])

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
        raise RuntimeError(ctx.message)


class Registration:
    """``torch.ops.<ns>.<opname>`` defined from an :class:`OpSignature`, with tagged_ops' kernels."""

    def __init__(
        self,
        sig: OpSignature,
        *,
        opname: str,
        schema: str,
        schema_order: Sequence[Param],
        tags: Sequence[Any],
        returns: bool,
        untagged_twin: Registration | None = None,
    ) -> None:
        self.sig = sig
        # The op that compiled code calls instead of this one (see _native.py);
        # it gets every kernel this one gets.
        self.untagged_twin = untagged_twin
        self.schema_order = tuple(schema_order)
        self.returns = returns
        self.tagged = bool(tags)  # registered with torch.Tag.inplace / torch.Tag.out
        self.classic_kernels = False  # kernels registered without saying otherwise mutate and return None
        self.compile_functional = False  # compiled calls go through the functional twin (see define_out)
        self.opname = opname
        self.qualname = f"{sig.namespace}::{opname}"
        self._kernel_libs: dict[str, Library] = {}
        self.backward_message, self._direct_grad_error = _grad_messages(sig)
        self._fake: Callable[..., Any] = self._fake_adapter(lambda *a, **k: None)
        self.functional: FunctionalTwin | None = None
        # The handle's call and opcheck's binder; the native path's untagged twin, which only compiled
        # code calls, has none.
        self.call: Callable[..., Any] | None = None
        self.bind: Callable[..., Any] | None = None
        self.lib = Library(sig.namespace, "FRAGMENT")
        # Registered in small named steps, as torch/_library/custom_ops.py does; a step that
        # fails removes what the earlier ones registered, so the name is free again.
        try:
            self.op: torch._ops.OpOverload = self._define(schema, tags)
            caps.register_fake(self.qualname, self._fake_dispatch, lib=self.lib)
            if not tags:
                # Untagged ops get a functional twin for compilers that cannot lower them (2.2; views
                # with auto_functionalized v1: 2.3-2.5, or enable_auto_functionalized_v2=False). A
                # native op's handle uses its untagged twin's functional twin.
                self.functional = FunctionalTwin(sig, self.op, self._fake_dispatch, self.schema_order)
                if sig.kind == "inplace":
                    self._register_vmap_loop()
            self._register_transform_kernel()  # on the untagged twin too: compiled code calls it
            if untagged_twin is not None:
                self._register_functionalization()
            if opname == sig.name:
                self.call, self.bind = self._plan_calls()
        except Exception:
            self.destroy()  # leave the name, and its helpers' names, free for the next definition
            raise

    def _define(self, schema: str, tags: Sequence[Any]) -> torch._ops.OpOverload:
        """Define the op (tags, plus pt2_compliant) and its Autograd fallthrough, kept across reloads."""
        sig, opname = self.sig, self.opname
        definition = f"{opname}{schema[schema.index('(') :]}"
        all_tags = (*tags, torch.Tag.pt2_compliant_tag)
        anchor_key = f"{definition} {all_tags}"  # what the kept dispatcher entry was defined as
        release_unless_same(sig.namespace, opname, anchor_key, owner=sig.qualname)
        self.lib.define(definition, tags=all_tags)
        caps.refresh_packet(sig.namespace, caps.split_overload(opname)[0])
        op: torch._ops.OpOverload = caps.lookup_op(self.qualname)
        anchor(sig.namespace, opname, anchor_key, op)
        return op

    def _plan_calls(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The handle's call (with what it does while Dynamo traces) and opcheck's binder.

        Built apart from the dispatcher registration: they only call the ops registered above.
        """
        sig, untagged = self.sig, self.untagged_twin
        autograd_call = self.autograd_call if sig.kind == "inplace" else None
        compiled_call = make_compiled_call(
            sig,
            self.op,
            self.schema_order,
            untagged_twin=None if untagged is None else (untagged.op, untagged.schema_order),
            functional=self.functional if untagged is None else untagged.functional,
            autograd_call=autograd_call,
            prefer_functional=lambda: self.compile_functional or compile_functional_forced(),
        )
        grad_error = self._direct_grad_error if sig.kind == "out" else None  # 2.13's error, also under torch.func
        # Argument errors quote the 2.13 schema the handle takes, on the fallback too.
        declaration = str(self.op._schema) if self.tagged else f"{sig.namespace}::{sig.native_schema()}"
        call = make_handle_call(
            sig, self.op, self.schema_order, autograd_call, compiled_call, grad_error, declaration=declaration
        )
        return call, make_binder(sig, self.schema_order)

    def _register_transform_kernel(self) -> None:
        """Refusals under torch.func's grad and jvp, where only transforms pay (see ``_transforms.py``)."""
        twin_of = self if self.untagged_twin is None else self.untagged_twin
        assert twin_of.functional is not None
        kernel = make_transform_kernel(
            self.sig,
            self.op,
            self.schema_order,
            returns=self.returns,
            functional=twin_of.functional,
            grad_error=self._direct_grad_error,
        )
        self._replace_kernel(TRANSFORM_KEY, kernel)

    def _register_functionalization(self) -> None:
        """The tagged op functionalized as its untagged twin (see ``make_functionalize_kernel``)."""
        twin = self.untagged_twin
        assert twin is not None and twin.functional is not None
        kernel = make_functionalize_kernel(self.sig, self.op, twin.op, twin.functional)
        self._replace_kernel("Functionalize", kernel)

    VMAP_KEY = "FuncTorchBatched"

    def _register_vmap_loop(self) -> None:
        """``torch.vmap`` of an untagged in-place op: run it per batch entry on views, as torch's
        batched fallback does for an op tagged in-place (it refuses ops that return nothing)."""
        op, qualname = self.op, self.qualname

        def rule(info: Any, in_dims: tuple[Any, ...], *args: Any, **kwargs: Any) -> tuple[None, None]:
            if in_dims[0] is None:
                raise RuntimeError(
                    f"{qualname}: vmap: an in-place op cannot write a batched value into its unbatched "
                    "first argument; vmap over that argument too."
                )
            for i in range(info.batch_size):
                op(*(a if d is None else a.select(d, i) for a, d in zip(args, in_dims, strict=True)), **kwargs)
            return None, None

        fragment = Library(self.sig.namespace, "FRAGMENT")
        with _by_name.on_the_dispatcher(qualname):
            caps.register_vmap(qualname, rule, lib=fragment)
        self._kernel_libs[self.VMAP_KEY] = fragment

    def drop_vmap_loop(self) -> None:
        """Before a user's own vmap rule: the dispatcher holds one Python kernel per key."""
        self._replace_kernel(self.VMAP_KEY, None)

    # -- kernels -----------------------------------------------------------

    def set_kernel(self, device_type: str | None, fn: Callable[..., Any], *, classic: bool = False) -> None:
        """Register (or replace) the user's kernel for ``device_type`` (None: every device).

        A ``classic`` kernel mutates and returns nothing (``(..., out) -> None``, as
        kernels of untagged ops are written); the op still returns the mutated tensors.
        """
        if self.untagged_twin is not None:
            self.untagged_twin.set_kernel(device_type, fn, classic=classic)
        key = dispatch_key_for(self.sig.qualname, device_type)
        adapter = make_kernel_adapter(
            self.sig,
            fn,
            self.schema_order,
            returns=self.returns,
            identity_error=None if classic else self._identity_error(fn),
            grad_error=self._direct_grad_error,
            bump_versions=True,
        )
        self._replace_kernel(key, adapter)

    def set_autocast(self, device_type: str, cast_inputs: torch.dtype) -> None:
        """Under ``torch.autocast(device_type)``, run the op with its floating inputs cast to ``cast_inputs``.

        As ``torch.library.register_autocast``, except that what the op writes is
        never cast: torch's rule casts every floating Tensor, so an out buffer
        became a cast copy that the op wrote instead of the buffer (fallback path;
        native 2.13 refuses keyword arguments), and an in-place op mutated a copy.
        """
        if self.untagged_twin is not None:
            self.untagged_twin.set_autocast(device_type, cast_inputs)
        key = caps.autocast_dispatch_key(device_type)
        if key is None:
            raise ValueError(f"{self.sig.qualname}: device type {device_type!r} does not support autocast")
        exclude = torch._C.DispatchKeySet(key)
        positional = [p for p in self.schema_order if not p.keyword_only]
        written_at = {i for i, p in enumerate(positional) if p.mutated}
        written = {p.name for p in self.schema_order if p.mutated}
        op = self.op

        def cast(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                eligible = value.is_floating_point() and value.device.type == device_type
                return value.to(cast_inputs) if eligible and value.dtype is not torch.float64 else value
            if isinstance(value, (list, tuple)):
                return type(value)(cast(v) for v in value)
            return value

        def autocast_kernel(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(exclude):
                args = tuple(a if i in written_at else cast(a) for i, a in enumerate(args))
                kwargs = {k: v if k in written else cast(v) for k, v in kwargs.items()}
                return op(*args, **kwargs)

        self._replace_kernel(key.name, autocast_kernel)

    def _replace_kernel(self, key: str, kernel: Callable[..., Any] | None) -> None:
        """Put ``kernel`` (None: nothing) at dispatch key ``key``, in a fragment of its own.

        Replacing destroys the previous fragment first (older torch refuses a second
        Python kernel for a key).
        """
        previous = self._kernel_libs.pop(key, None)
        if previous is not None:
            caps.destroy_library(previous)
        if kernel is not None:
            fragment = Library(self.sig.namespace, "FRAGMENT")
            fragment.impl(self.opname, kernel, key)
            self._kernel_libs[key] = fragment

    def set_fake(self, fn: Callable[..., Any]) -> None:
        if self.untagged_twin is not None:
            self.untagged_twin.set_fake(fn)
        self._fake = self._fake_adapter(fn)

    def _fake_adapter(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        # Refused under autograd on fake tensors too, so compiled code refuses as eager does:
        # out= as 2.13 does (in its autograd kernel, before any fake kernel runs); in-place
        # while compiling only, where just a direct torch.ops call gets here with grad (the
        # handle runs such calls outside the graph), and a compiled backward through the
        # mutation would be silently wrong. An export keeps the handle's call in its graph.
        in_place = self.sig.kind == "inplace"
        return make_kernel_adapter(
            self.sig,
            fn,
            self.schema_order,
            returns=self.returns,
            identity_error=None,
            grad_error=self._direct_grad_error,
            grad_enabled=_grad_enabled_outside_export if in_place else torch.is_grad_enabled,
        )

    def _fake_dispatch(self, *args: Any, **kwargs: Any) -> Any:
        # Fake kernels run only while compiling or exporting: the place to prepare Inductor.
        caps.compute_reads_before_writes(self.op)
        return self._fake(*args, **kwargs)

    def _identity_error(self, fn: Callable[..., Any]) -> Callable[[], Exception]:
        if self.sig.kind == "inplace":
            what = "An operator tagged with torch.Tag.inplace must return its first argument."
        else:
            what = "An operator tagged with torch.Tag.out must return its mutable keyword-only arguments."
        return functools.partial(
            RuntimeError, f"{self.sig.name} (with implementation in {inspect.getmodule(fn)}): {what}"
        )

    # -- autograd ----------------------------------------------------------

    def autograd_call(self, *args: Any, **kwargs: Any) -> None:
        """An in-place handle's path for calls under autograd, in the registered op's form.

        The op runs, and the mutated tensor is put behind a node whose backward
        raises. Native 2.13 instead returns a view and leaves the mutated tensor's
        history alone, so a backward through that tensor is silently wrong; this
        never is. (out= ops have no such path: their kernel refuses, as on 2.13.)
        """
        qualname = self.sig.qualname
        x = args[0]
        # ATen refuses these before mutating; so do we (native 2.13 lets them through).
        if x.is_leaf and x.requires_grad:
            raise RuntimeError(
                f"{qualname}: a leaf Variable that requires grad is being used in an in-place operation."
            )
        base = x._base
        if base is not None and base.is_leaf and base.requires_grad:
            raise RuntimeError(
                f"{qualname}: a view of a leaf Variable that requires grad is being used in an in-place operation."
            )
        with torch.no_grad():
            self.op(*args, **kwargs)
        others = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor) and a.requires_grad]
        _NoAutogradFormula.apply(self.backward_message, x, *others)

    def destroy(self) -> None:
        """Remove the op from the dispatcher, before the name is defined again."""
        if self.untagged_twin is not None:
            self.untagged_twin.destroy()
        if self.functional is not None:
            self.functional.destroy()
        for lib in (*self._kernel_libs.values(), self.lib):
            caps.destroy_library(lib)
        caps.forget_signature(self.sig.namespace, self.opname)  # a redefinition may change the schema
