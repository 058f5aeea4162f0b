"""One op on the dispatcher, and the table of the user's kernels that every such op runs.

An op is registered through ``torch.library.Library.define`` plus Python kernels
rather than ``torch.library.custom_op``: custom_op spends most of its per-call cost
in Python layers around the dispatcher (a Python autograd kernel, a version-bump
kernel, a backend kernel), and our users call ops in hot loops. Here a call makes
one trip into Python, the backend kernel (``_calls.make_kernel_adapter``), which
calls the user's function in its own argument form, enforces 2.13's identity rule,
refuses a call under autograd where 2.13 does, and bumps the written tensors'
version counters. The Autograd key is a fallthrough (kept across a redefinition with
the same schema, see ``_anchor``), so autograd adds nothing per call.

:class:`Kernels` holds what the user registered (a kernel per dispatch key, the
fake kernel, autocast casts); each :class:`RegisteredOp` subscribed to it registers
them in its own schema's argument order. A definition may register more than one op
from one table (the native path's untagged twin); this module knows nothing of why.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import torch
from torch.library import Library

from . import _compat
from ._anchor import anchor, release_unless_same
from ._contract import direct_call_under_autograd, identity_error, out_under_autograd
from ._signature import OpSignature, Param

__all__ = ["VMAP_KEY", "Kernels", "RegisteredOp"]

#: The dispatch key of ``torch.vmap``'s rule.
VMAP_KEY = "FuncTorchBatched"


class Kernels:
    """The user's registrations for one op; every subscribed :class:`RegisteredOp` runs them."""

    def __init__(self) -> None:
        self.by_key: dict[str, tuple[Callable[..., Any], bool]] = {}  # dispatch key -> (fn, classic)
        self.fake: Callable[..., Any] | None = None
        self.autocast: dict[str, torch.dtype] = {}  # device type -> dtype
        self._ops: list[RegisteredOp] = []

    def subscribe(self, op: RegisteredOp) -> None:
        """``op`` registers every kernel in the table now, and each one set later."""
        self._ops.append(op)
        for key, (fn, classic) in self.by_key.items():
            op.apply_kernel(key, fn, classic)
        for device_type, dtype in self.autocast.items():
            op.apply_autocast(device_type, dtype)

    def unsubscribe(self, op: RegisteredOp) -> None:
        self._ops.remove(op)

    def set_kernel(self, key: str, fn: Callable[..., Any], *, classic: bool) -> None:
        """Register (or replace) the kernel at dispatch ``key``; a ``classic`` one returns None."""
        self.by_key[key] = (fn, classic)
        for op in self._ops:
            op.apply_kernel(key, fn, classic)

    def set_fake(self, fn: Callable[..., Any]) -> None:
        self.fake = fn
        for op in self._ops:
            op.drop_fake()

    def set_autocast(self, device_type: str, dtype: torch.dtype) -> None:
        self.autocast[device_type] = dtype
        for op in self._ops:
            op.apply_autocast(device_type, dtype)


def _grad_refusal(sig: OpSignature) -> Callable[[], RuntimeError]:
    """The error a kernel raises for a call under autograd: 2.13's for out= ops, ours for direct in-place calls."""
    message = out_under_autograd(sig.packet) if sig.kind == "out" else direct_call_under_autograd(sig.qualname)
    return functools.partial(RuntimeError, message)


class RegisteredOp:
    """``torch.ops.<ns>.<opname>`` defined with ``schema``, running a :class:`Kernels` table.

    ``schema_order`` lists the parameters in the schema's order; ``returns``: the schema
    returns the written tensors (tagged) rather than nothing (untagged). ``on_trace``
    runs at each call of the fake kernel, which torch makes only while it traces.
    """

    def __init__(
        self,
        sig: OpSignature,
        kernels: Kernels,
        *,
        opname: str,
        schema: str,
        schema_order: Sequence[Param],
        tags: Sequence[Any],
        returns: bool,
        on_trace: Callable[[], None],
    ) -> None:
        self.sig = sig
        self.kernels = kernels
        self.opname = opname
        self.qualname = f"{sig.namespace}::{opname}"
        self.schema_order = tuple(schema_order)
        self.returns = returns
        self._on_trace = on_trace
        self._fake: Callable[..., Any] | None = None  # the fake kernel's adapter, made at its first call
        self._kernel_libs: dict[str, Library] = {}
        self.lib = Library(sig.namespace, "FRAGMENT")
        # Registered in small named steps, as torch/_library/custom_ops.py does; a step that
        # fails removes what the earlier ones registered, so the name is free again.
        try:
            self.op: _compat.OpOverload = self._define_on_dispatcher(schema, tags)
            _compat.register_fake(self.qualname, self.fake_kernel, lib=self.lib)
            kernels.subscribe(self)
        except Exception:
            self.destroy()
            raise

    def _define_on_dispatcher(self, schema: str, tags: Sequence[Any]) -> _compat.OpOverload:
        """Define the op (tags, plus pt2_compliant) and its Autograd fallthrough, kept across reloads."""
        namespace, opname = self.sig.namespace, self.opname
        definition = f"{opname}{schema[schema.index('(') :]}"
        all_tags = (*tags, torch.Tag.pt2_compliant_tag)
        # what the kept dispatcher entry was defined as (tags by value: a Tag's repr costs 7 us)
        anchor_key = f"{definition} {[int(t) for t in all_tags]}"
        release_unless_same(namespace, opname, anchor_key, owner=self.sig.qualname)
        self.lib.define(definition, tags=all_tags)
        _compat.refresh_packet(namespace, opname.partition(".")[0])
        op: _compat.OpOverload = _compat.lookup_op(self.qualname)
        anchor(namespace, opname, anchor_key, op)
        return op

    # -- the user's kernels, in this op's argument order -----------------------------

    def apply_kernel(self, key: str, fn: Callable[..., Any], classic: bool) -> None:
        from ._calls import make_kernel_adapter  # generated code: loaded with the first Python kernel

        identity = None
        if not classic:
            identity = functools.partial(_identity_refusal, self.sig, fn)
        adapter = make_kernel_adapter(
            self.sig,
            fn,
            self.schema_order,
            returns=self.returns,
            identity_error=identity,
            grad_error=_grad_refusal(self.sig),
            bump_versions=True,
        )
        self.put_kernel(key, adapter)

    def fake_kernel(self, *args: Any, **kwargs: Any) -> Any:
        """The op's fake kernel: torch calls it only while tracing, so it is where tracing starts for us."""
        self._on_trace()
        fake = self._fake
        if fake is None:
            fake = self._fake = self._fake_adapter(self.kernels.fake or (lambda *a, **k: None))
        return fake(*args, **kwargs)

    def drop_fake(self) -> None:
        self._fake = None  # made again, from the table's, at the next call

    def _fake_adapter(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        # Refused under autograd on fake tensors too, so compiled code refuses as eager does:
        # out= as 2.13 does (in its autograd kernel, before any fake kernel runs); in-place
        # while compiling only, where just a direct torch.ops call gets here with grad (the
        # handle runs such calls outside the graph), and a compiled backward through the
        # mutation would be silently wrong. An export keeps the handle's call in its graph.
        from ._calls import make_kernel_adapter

        in_place = self.sig.kind == "inplace"
        return make_kernel_adapter(
            self.sig,
            fn,
            self.schema_order,
            returns=self.returns,
            identity_error=None,
            grad_error=_grad_refusal(self.sig),
            grad_enabled=_grad_enabled_outside_export if in_place else torch.is_grad_enabled,
        )

    def apply_autocast(self, device_type: str, cast_inputs: torch.dtype) -> None:
        """Under ``torch.autocast(device_type)``, run the op with its floating inputs cast to ``cast_inputs``.

        As ``torch.library.register_autocast``, except that what the op writes is
        never cast: torch's rule casts every floating Tensor, so an out buffer
        became a cast copy that the op wrote instead of the buffer (fallback path;
        native 2.13 refuses keyword arguments), and an in-place op mutated a copy.
        """
        key = _compat.autocast_dispatch_key(device_type)
        if key is None:
            raise ValueError(f"{self.sig.qualname}: device type {device_type!r} does not support autocast")
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
            with _compat.excluding(key):
                args = tuple(a if i in written_at else cast(a) for i, a in enumerate(args))
                kwargs = {k: v if k in written else cast(v) for k, v in kwargs.items()}
                return op(*args, **kwargs)

        self.put_kernel(key.name, autocast_kernel)

    # -- kernels at any key --------------------------------------------------------

    def put_kernel(self, key: str, kernel: Callable[..., Any] | None) -> None:
        """Put ``kernel`` (None: nothing) at dispatch key ``key``, in a fragment of its own.

        Replacing destroys the previous fragment first (older torch refuses a second
        Python kernel for a key).
        """
        previous = self._kernel_libs.pop(key, None)
        if previous is not None:
            _compat.destroy_library(previous)
        if kernel is not None:
            fragment = Library(self.sig.namespace, "FRAGMENT")
            fragment.impl(self.opname, kernel, key)
            self._kernel_libs[key] = fragment

    def put_lasting_kernel(self, key: str, kernel: Callable[..., Any]) -> None:
        """Put ``kernel`` at ``key`` for the op's whole life, in the op's own fragment.

        For kernels nothing replaces: a fragment of their own would cost a
        ``Library`` (and its bookkeeping) per op at definition.
        """
        self.lib.impl(self.opname, kernel, key)

    def put_vmap_loop(self) -> None:
        """``torch.vmap`` of an untagged in-place op: run it per batch entry on views, as torch's batched
        fallback does for an op tagged in-place (it refuses ops that return nothing)."""
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

        from ._compat_functorch import register_vmap  # untagged in-place ops only

        fragment = Library(self.sig.namespace, "FRAGMENT")
        register_vmap(qualname, rule, lib=fragment)  # no handle has the name yet: this reaches the dispatcher
        self.keep_fragment(VMAP_KEY, fragment)

    def keep_fragment(self, key: str, fragment: Library) -> None:
        """Own ``fragment`` (a registration made at ``key`` through torch.library): replaced and destroyed with the op."""
        previous = self._kernel_libs.pop(key, None)
        if previous is not None:
            _compat.destroy_library(previous)
        self._kernel_libs[key] = fragment

    def destroy(self) -> None:
        """Remove the op from the dispatcher, before the name is defined again."""
        if self in self.kernels._ops:
            self.kernels.unsubscribe(self)
        for lib in (*self._kernel_libs.values(), self.lib):
            _compat.destroy_library(lib)
        self._kernel_libs.clear()


def _identity_refusal(sig: OpSignature, fn: Callable[..., Any]) -> RuntimeError:
    # The module is looked up when raising, not at every registration: inspect.getmodule may scan sys.modules.
    return RuntimeError(identity_error(sig.name, sig.kind, inspect.getmodule(fn)))


def _grad_enabled_outside_export() -> bool:
    from ._compat_compiler import is_exporting  # loaded with the first trace, not at definition

    return torch.is_grad_enabled() and not is_exporting()
