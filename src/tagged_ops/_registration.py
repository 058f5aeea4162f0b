"""Dispatcher glue shared by both paths: one registered op and its kernels.

Both paths register through ``torch.library.Library.define`` plus Python kernels
rather than ``torch.library.custom_op``: custom_op spends most of its per-call
cost in Python layers around the dispatcher, and our users call ops in hot
loops. What custom_op would give us we add here, once, for both paths:

* a backend kernel per device type that calls the user's function in its own
  argument form and enforces the 2.13 identity rule;
* a fake kernel (the trivial one unless the user registers their own);
* an autograd kernel that refuses out= under autograd with 2.13's message,
  turns in-place under autograd into an error at backward instead of a silent
  wrong gradient, and bumps every mutated tensor's version counter (a kernel
  that writes through numpy does not).

What differs between the native and the fallback path is only the schema (and
therefore tags, argument order and return); see ``_native.py`` and ``_fallback.py``.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Sequence

import torch
from torch.library import Library

from . import _capabilities as caps
from ._calling import make_binder, make_handle_call, make_kernel_adapter
from ._signature import OpSignature, Param

__all__ = ["Registration", "dispatch_key_for"]

_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "mps": "MPS", "xpu": "XPU", "hpu": "HPU"}


def dispatch_key_for(device_type: str | None) -> str:
    if device_type is None:
        return "CompositeExplicitAutograd"
    try:
        return _DISPATCH_KEYS[device_type]
    except KeyError:
        raise ValueError(f"tagged_ops: unknown device type {device_type!r}; expected one of {sorted(_DISPATCH_KEYS)}") from None


class _NoAutogradFormula(torch.autograd.Function):
    """Puts an in-place op's mutated tensor behind a node that refuses backward.

    Native 2.13 returns a *view* here and leaves the mutated tensor's history
    alone, so a backward through that tensor is silently wrong; marking it dirty
    makes every backward through the mutation raise.
    """

    @staticmethod
    def forward(ctx: Any, message: str, x: torch.Tensor, *inputs: Any) -> torch.Tensor:  # type: ignore[override]
        ctx.message = message
        ctx.mark_dirty(x)
        return x

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
    ) -> None:
        self.sig = sig
        self.schema_order = tuple(schema_order)
        self.returns = returns
        self.qualname = f"{sig.namespace}::{opname}"
        self.lib = Library(sig.namespace, "FRAGMENT")
        self.lib.define(f"{opname}{schema[schema.index('('):]}", tags=(*tags, torch.Tag.pt2_compliant_tag))
        self.op: torch._ops.OpOverload = getattr(getattr(torch.ops, sig.namespace), opname).default
        self._kernel_keys: set[str] = set()
        self._overrides: list[Library] = []
        # Backend dispatch key (its int value: enum hashing is slow) -> our kernel
        # for it, for the autograd kernel's shortcut.
        self._direct_kernels: dict[int, Callable[..., Any]] = {}
        self._composite: Callable[..., Any] | None = None
        self._device_specific: set[int] = set()
        self._fake: Callable[..., Any] = make_kernel_adapter(
            sig, lambda *a, **k: None, self.schema_order, returns=returns, identity_error=None
        )
        self.lib._register_fake(opname, self._fake_dispatch)
        self._register_autograd_kernel(opname)
        self.call = make_handle_call(sig, self.op, self.schema_order)
        self.bind = make_binder(sig, self.schema_order)

    # -- kernels -----------------------------------------------------------

    def set_kernel(self, device_type: str | None, fn: Callable[..., Any]) -> None:
        """Register (or replace) the user's kernel for ``device_type`` (None: every device)."""
        key = dispatch_key_for(device_type)
        adapter = make_kernel_adapter(
            self.sig, fn, self.schema_order, returns=self.returns, identity_error=self._identity_error(fn)
        )
        self._record_direct(device_type, adapter)
        opname = self.qualname.split("::", 1)[1]
        if key not in self._kernel_keys:
            self.lib.impl(opname, adapter, key)
            self._kernel_keys.add(key)
            return
        # Library.impl refuses a second kernel for one key; a fresh fragment may
        # override it (torch warns that it does, which is what the user asked for).
        override = Library(self.sig.namespace, "FRAGMENT")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            override.impl(opname, adapter, key)
        self._overrides.append(override)

    def _record_direct(self, device_type: str | None, adapter: Callable[..., Any]) -> None:
        if device_type is None:
            self._composite = adapter
            # Not Meta: meta tensors reach the fake kernel, not the composite one.
            for name in _DISPATCH_KEYS.values():
                key = getattr(torch._C.DispatchKey, name, None) if name != "Meta" else None
                if key is not None and key.value not in self._device_specific:
                    self._direct_kernels[key.value] = adapter
        elif device_type != "meta":
            value = getattr(torch._C.DispatchKey, dispatch_key_for(device_type)).value
            self._device_specific.add(value)
            self._direct_kernels[value] = adapter

    def set_fake(self, fn: Callable[..., Any]) -> None:
        self._fake = make_kernel_adapter(self.sig, fn, self.schema_order, returns=self.returns, identity_error=None)

    def _fake_dispatch(self, *args: Any, **kwargs: Any) -> Any:
        return self._fake(*args, **kwargs)

    def _identity_error(self, fn: Callable[..., Any]) -> Callable[[], Exception]:
        if self.sig.kind == "inplace":
            what = "An operator tagged with torch.Tag.inplace must return its first argument."
        else:
            what = "An operator tagged with torch.Tag.out must return its mutable keyword-only arguments."
        name = self.sig.name

        def error() -> Exception:
            return RuntimeError(f"{name} (with implementation in {inspect.getmodule(fn)}): {what}")

        return error

    # -- autograd ----------------------------------------------------------

    def _register_autograd_kernel(self, opname: str) -> None:
        op = self.op
        sig = self.sig
        below = caps.AFTER_AD_INPLACE_OR_VIEW
        bump = caps.bump_versions
        any_requires_grad = caps.any_requires_grad
        grad_enabled = torch.is_grad_enabled
        direct = self._direct_kernels
        is_out = sig.kind == "out"
        # Where the mutated tensors sit in the registered op's (args, kwargs).
        positions = tuple(i for i, p in enumerate(p for p in self.schema_order if not p.keyword_only) if p.mutated)
        keywords = tuple(p.name for p in self.schema_order if p.keyword_only and p.mutated)
        out_message = (
            f"{sig.name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
        backward_message = (
            f"Trying to backward through {sig.qualname} but no autograd formula was registered. "
            "An in-place op (torch.Tag.inplace) cannot have one: call it on tensors that do not "
            "require grad, or under torch.no_grad()."
        )
        in_place_under_autograd = self._in_place_under_autograd

        def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            if grad_enabled() and any_requires_grad(*args, **kwargs):
                if is_out:
                    raise RuntimeError(out_message)
                return in_place_under_autograd(keyset, args, kwargs, backward_message)
            rest = keyset & below
            # When the next key is a plain backend key, the dispatcher would call
            # our own kernel for it: call it directly and save a dispatcher round
            # trip through Python (half the per-call cost). Anything else
            # (fake/functional tensors, subclasses, modes, vmap) is redispatched.
            kernel = direct.get(rest.highestPriorityTypeId().value)
            result = kernel(*args, **kwargs) if kernel is not None else op.redispatch(rest, *args, **kwargs)
            if keywords:
                bump((*(args[i] for i in positions), *(kwargs[k] for k in keywords)))
            else:
                bump(tuple(args[i] for i in positions))
            return result

        self.lib.impl(opname, autograd_kernel, "Autograd", with_keyset=True)

    def _in_place_under_autograd(self, keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> Any:
        qualname = self.sig.qualname
        x = args[0]
        # ATen refuses these before mutating; so do we (native 2.13 lets them through).
        if x.is_leaf and x.requires_grad:
            raise RuntimeError(f"{qualname}: a leaf Variable that requires grad is being used in an in-place operation.")
        base = x._base
        if base is not None and base.is_leaf and base.requires_grad:
            raise RuntimeError(
                f"{qualname}: a view of a leaf Variable that requires grad is being used in an in-place operation."
            )
        with torch._C._AutoDispatchBelowAutograd():
            result = self.op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)
        caps.bump_versions((x,))
        others = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor) and a.requires_grad]
        _NoAutogradFormula.apply(message, x, *others)
        return result if result is None else x

    def destroy(self) -> None:
        for lib in (*self._overrides, self.lib):
            lib._destroy()
