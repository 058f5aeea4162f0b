"""One definition of a tagged op: what both paths register, and what is left for the first trace.

A definition registers, in small named steps, what an eager call needs: the op users
call (``_native`` or ``_fallback`` says with which schema), its kernels, the kernel
it has under torch.func's transforms, the fixes' definition-time kernels, and the
handle's generated call. Everything only compiling needs (the untagged op compiled
code records, the functional twin, the fixes' patches of torch's compiler, the
compiled call) waits for :meth:`Definition.prepare`, which the first trace runs: the
handle's call while Dynamo traces it, or any fake-tensor call of the op (a direct
``torch.ops`` call under torch.compile, export, opcheck). Defining and calling ops
eagerly imports none of torch's compiler.

The ops compiled code names must exist before anything compiled is loaded, and code
loaded from torch's caches (Inductor's and AOTAutograd's on-disk caches, a saved
export) traces nothing: once any of torch's compiler is imported, every definition
registers them (:func:`_define_names_when_compiler_loads`), a few dispatcher calls each.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from . import _compat, _fixes, _names
from ._contract import out_under_autograd
from ._registration import VMAP_KEY, Kernels, RegisteredOp
from ._signature import OpSignature, Param

if TYPE_CHECKING:  # imported where first used: only compiling and DTensors need them
    from ._functional import FunctionalTwin
    from ._sharding import Returns, ShardingRule

__all__ = ["TRANSFORM_KEY", "VMAP_KEY", "Definition", "Devices", "device_list"]

#: ``device_types=`` as users pass it: one device type, several, or None (every device).
Devices = str | Sequence[str] | None
#: The dispatch key functorch includes while a transform is active; its kernel runs
#: once per call, at the innermost level, before that level's tensors are unwrapped.
TRANSFORM_KEY = "FuncTorchDynamicLayerBackMode"


def device_list(device_types: Devices) -> list[str | None]:
    """``device_types`` as a list (``[None]``: every device)."""
    if device_types is None or isinstance(device_types, str):
        return [device_types]
    return list(device_types)


class Definition:
    """The ops one definition registered, the user's kernels, and the handle's call.

    Subclasses (the two paths) register :attr:`registered`, the op users call, and
    say which untagged op compiled code records (:meth:`untagged`).
    """

    #: Registered with the native tag.
    tagged: bool = False
    #: Forced to the fallback where native tags exist.
    forced_fallback: bool = False

    def __init__(self, sig: OpSignature, *, pair: bool, classic_kernels: bool, compile_functional: bool) -> None:
        self.sig = sig
        self.pair = pair
        #: Kernels registered without saying otherwise mutate and return None.
        self.classic_kernels = classic_kernels
        #: Compiled calls go through the functional twin.
        self.compile_functional = compile_functional
        self.kernels = Kernels()
        self._functional: FunctionalTwin | None = None
        #: The DTensor sharding rule registered through the handle (None: none).
        self.sharding: ShardingRule | None = None
        self._prepared = False
        self._compiled: Callable[..., None] | None = None
        self._generated: Callable[..., Any] | None = None
        self._autograd_call: Callable[..., None] | None = None
        self._binder: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]] | None = None
        self.handles: weakref.WeakSet[Any] = weakref.WeakSet()  # pointed at it (TaggedOp._point_at)
        self.registered = self._register()
        try:
            self._register_transform_kernel(self.registered)
            _fixes.at_definition(self)
            #: The handle's call: generated at the first call (``_plan_call``), then that call.
            self.call: Callable[..., Any] = make_first_call(self._plan_call)
            _define_names_when_compiler_loads(self)
        except Exception:
            self.destroy()
            raise

    def _register(self) -> RegisteredOp:
        raise NotImplementedError

    def _register_op(
        self, opname: str, schema: str, order: tuple[Param, ...], tags: tuple[Any, ...], returns: bool
    ) -> RegisteredOp:
        """An op of this definition on the dispatcher, running the user's kernels."""
        return RegisteredOp(
            self.sig,
            self.kernels,
            opname=opname,
            schema=schema,
            schema_order=order,
            tags=tags,
            returns=returns,
            on_trace=self.prepare,
        )

    def register_kernel(self, device_types: Devices, fn: Callable[..., Any], *, classic: bool) -> None:
        """``fn`` as the kernel on ``device_types`` (None: every device) of every op of this definition."""
        for device_type in device_list(device_types):
            key = _compat.dispatch_key_for(self.sig.qualname, device_type)
            self.kernels.set_kernel(key, fn, classic=classic)

    def register_untagged(self, opname: str) -> RegisteredOp:
        """``<ns>::<opname>`` with this op's untagged schema (mutates, returns nothing, out buffers
        positional), running its kernels: the fallback path's op, and the native path's twin that
        compiled code records."""
        sig = self.sig
        # 2.2 cannot functionalize a call that relies on a schema default (see
        # _compat_compiler.schema_defaults_survive_functionalization); the handle passes every argument.
        if any(p.has_default for p in sig.params):
            from ._compat_compiler import schema_defaults_survive_functionalization  # a probe: asked when needed

            defaults = schema_defaults_survive_functionalization()
        else:
            defaults = True
        registered = self._register_op(opname, sig.fallback_schema(defaults=defaults), sig.fallback_params(), (), False)
        if sig.kind == "inplace":
            try:
                registered.put_vmap_loop()
            except Exception:
                registered.destroy()
                raise
        return registered

    def _register_transform_kernel(self, registered: RegisteredOp) -> None:
        """Refusals under torch.func's grad and jvp (see ``_transforms``), made at the first
        call under a transform: defining an op loads none of that machinery."""
        sig, functional = self.sig, self.functional
        grad_error = functools.partial(RuntimeError, out_under_autograd(sig.packet))
        made: list[Callable[..., Any]] = []

        def transform_kernel(*args: Any, **kwargs: Any) -> Any:
            if not made:
                from ._transforms import make_transform_kernel

                order, returns = registered.schema_order, registered.returns
                kernel = make_transform_kernel(
                    sig, registered.op, order, returns=returns, functional=functional, grad_error=grad_error
                )
                made.append(kernel)
            return made[0](*args, **kwargs)

        registered.put_lasting_kernel(TRANSFORM_KEY, transform_kernel)

    def _plan_call(self) -> Callable[..., Any]:
        """The handle's generated call, made once, at the first call or when the compiler loads:
        it compiles code (once per shape of signature), which defining an op should not pay for."""
        if self._generated is not None:
            return self._generated
        from ._autograd import make_autograd_call
        from ._calls import make_handle_call

        sig, registered = self.sig, self.registered
        autograd_call = make_autograd_call(sig, registered.op) if sig.kind == "inplace" else None
        grad_error = functools.partial(RuntimeError, out_under_autograd(sig.packet)) if sig.kind == "out" else None
        # Argument errors quote the 2.13 schema the handle takes, on the fallback too.
        declaration = (
            str(_compat.schema_of(registered.op)) if self.tagged else f"{sig.namespace}::{sig.native_schema()}"
        )

        def prepare() -> bool:  # a plain function: Dynamo runs it for real (see make_handle_call)
            return self._prepare_compiled_call()

        self._autograd_call = autograd_call
        self._generated = self.call = make_handle_call(
            sig, registered.op, registered.schema_order, autograd_call, prepare, grad_error, declaration=declaration
        )
        for handle in list(self.handles):
            if handle._definition is self:
                handle._point_at(self)  # the generated call becomes its __call__
        return self._generated

    def bind(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A call in the user's form -> ``(args, kwargs)`` of the registered op (``to_op_arguments``)."""
        if self._binder is None:
            from ._calls import make_binder

            self._binder = make_binder(self.sig, self.registered.schema_order)
        return self._binder(*args, **kwargs)

    # -- what a fix sees (``_fixes.Op``) ----------------------------------------------

    @property
    def op(self) -> _compat.OpOverload:
        """``torch.ops.<ns>.<name>``: the op users call."""
        return self.registered.op

    def untagged(self) -> tuple[_compat.OpOverload, tuple[Param, ...]]:
        """The untagged op compiled code records, and its parameter order."""
        registered = self._untagged_registered()
        return registered.op, registered.schema_order

    def _untagged_registered(self) -> RegisteredOp:
        raise NotImplementedError

    def functional(self) -> FunctionalTwin:
        """The functional twin of :meth:`untagged`, defined on first use."""
        if self._functional is None:
            from ._functional import FunctionalTwin

            untagged = self._untagged_registered()
            self._functional = FunctionalTwin(untagged)
            self._share_sharding(self._functional.op, untagged.schema_order, "fresh")
        return self._functional

    # -- DTensor ---------------------------------------------------------------------

    def set_sharding(self, rule: Callable[..., Any]) -> None:
        """Register ``rule`` (the handle's form) on every op of this definition, and on those defined later."""
        from ._sharding import ShardingRule

        sharding = ShardingRule(self.sig, rule)
        if self.sharding is not None:
            self.sharding.forget()
        self.sharding = sharding
        self._share_sharding(self.registered.op, self.registered.schema_order, "written" if self.tagged else "nothing")
        for op, order, returns in self._twins_with_returns():
            self._share_sharding(op, order, returns)

    def _twins_with_returns(self) -> list[tuple[Any, Sequence[Param], Returns]]:
        """The twins defined so far: each op, its parameters, what it returns."""
        found: list[tuple[Any, Sequence[Param], Returns]] = []
        untagged = self._untagged_if_defined()
        if untagged is not None and untagged is not self.registered:
            found.append((untagged.op, untagged.schema_order, "nothing"))
        if self._functional is not None and untagged is not None:
            found.append((self._functional.op, untagged.schema_order, "fresh"))
        return found

    def _untagged_if_defined(self) -> RegisteredOp | None:
        return self.registered

    def _share_sharding(self, op: Any, order: Sequence[Param], returns: Returns) -> None:
        if self.sharding is not None:
            self.sharding.register_on(op, order, returns, _compat.schema_defaults(op))

    def recorded_ops(self) -> tuple[Any, ...]:
        return (self.registered.op,)

    def paired(self) -> bool:
        """Whether Inductor lowers compiled calls of the op's functional op to it (native out= ops only)."""
        return False

    def defined_names(self) -> tuple[str, ...]:
        names = [self.registered.qualname]
        if self._functional is not None:
            names.append(self._functional.qualname)
        return tuple(names)

    def put_kernel(self, key: str, kernel: Callable[..., Any] | None) -> None:
        self.registered.put_kernel(key, kernel)

    # -- the user's torch.library rules, written in 2.13's form -----------------------

    def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Callable[..., Any]) -> None:
        """``fn(mode, func, types, args, kwargs)`` for ``torch_dispatch_class`` on the op users call.

        On the fallback path its return value is dropped: the untagged op returns nothing.
        """
        rule = fn
        if not self.tagged:

            def rule(mode: Any, func: Any, types: Any, args: Any, kwargs: Any) -> None:
                fn(mode, func, types, args, kwargs)

        with _names.on_the_dispatcher(self.sig.qualname):
            torch.library.register_torch_dispatch(
                self.sig.qualname, torch_dispatch_class, rule, lib=self.registered.lib
            )

    def register_vmap(self, fn: Callable[..., Any]) -> None:
        """``fn(info, in_dims, *args, **kwargs) -> (output, out_dims)`` as the op's vmap rule, in place
        of tagged_ops' own loop; on the fallback path its output is dropped."""
        rule = fn
        if not self.tagged:

            def rule(info: Any, in_dims: Any, *args: Any, **kwargs: Any) -> tuple[None, None]:
                fn(info, in_dims, *args, **kwargs)
                return None, None

        self.registered.put_kernel(VMAP_KEY, None)  # the dispatcher holds one Python kernel per key
        with _names.on_the_dispatcher(self.sig.qualname):
            torch.library.register_vmap(self.sig.qualname, rule, lib=self.registered.lib)

    def put_lasting_kernel(self, key: str, kernel: Callable[..., Any]) -> None:
        self.registered.put_lasting_kernel(key, kernel)

    # -- the first trace -------------------------------------------------------------

    def define_compiled_names(self) -> None:
        """Register the ops compiled code may name: the untagged op and the functional twin."""
        self.untagged()
        self.functional()

    def prepare(self) -> None:
        """Make everything compiling needs, once: called at every trace, it does the work at the first."""
        if self._prepared:
            return
        self._prepared = True
        try:
            self.define_compiled_names()
            _fixes.at_first_trace(self)
        except Exception:
            self._prepared = False
            raise

    def _prepare_compiled_call(self) -> bool:
        # Run for real while Dynamo traces the handle's call (a constant to Dynamo), before
        # Dynamo reads the compiled call it sets.
        if self._compiled is None:
            from ._calls import set_compiled_call
            from ._tracing import make_compiled_call

            self.prepare()
            self._compiled = make_compiled_call(
                self,
                order=self.registered.schema_order,
                functional=self.functional(),
                autograd_call=self._autograd_call,
                compile_functional=lambda: self.compile_functional,
            )
            set_compiled_call(self._plan_call(), self._compiled)
        return True

    def destroy(self) -> None:
        """Remove every op this definition registered, before its name is defined again."""
        _WAITING.discard(self)
        _fixes.at_destroy(self)
        if self.sharding is not None:
            self.sharding.forget()
            self.sharding = None
        if self._functional is not None:
            self._functional.destroy()
        self._destroy_ops()

    def _destroy_ops(self) -> None:
        registered = getattr(self, "registered", None)
        if registered is not None:
            registered.destroy()


def make_first_call(plan: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """The handle's ``__call__`` until ``plan()`` generates the op's call (``_calls``), which it then runs.

    ``plan`` makes the generated call every handle's ``__call__``: this runs at most once per
    handle. Its signature is the generated call's for TorchScript (``_calls.make_handle_call``).
    """

    def first_call(_tagged_ops_handle: Any, /, *args: Any, **kwargs: Any) -> Any:
        return plan()(_tagged_ops_handle, *args, **kwargs)

    return first_call


#: Definitions whose compiled names wait for the compiler's import.
_WAITING: weakref.WeakSet[Definition] = weakref.WeakSet()


def _define_names_when_compiler_loads(definition: Definition) -> None:
    _WAITING.add(definition)
    _fixes.when_compiler_loads(_define_waiting_names)


def _define_waiting_names(_module: object) -> None:
    # Runs now, or right after the first compiler module's import (maybe inside a larger
    # one): dispatcher registrations only, which import nothing.
    waiting = list(_WAITING)
    _WAITING.clear()
    for definition in waiting:
        _define_names(definition)


def _define_names(definition: Definition) -> None:
    # Never fails a definition or the import of torch's compiler: what cannot be defined
    # here is defined again by the first trace, which raises where the user compiles.
    # The handle's call is generated here too: Dynamo must find it made (make_first_call).
    with contextlib.suppress(Exception):
        definition.define_compiled_names()
    with contextlib.suppress(Exception):
        definition._plan_call()
