"""The functions every eager call runs, generated per op: the handle's call and the kernel adapter.

Built by :mod:`._codegen` from sources written here, one builder per function: the
handle's ``__call__`` (:func:`make_handle_call`: the user's signature in, the mutated
tensor(s) out; a call that does not fit raises the dispatcher's RuntimeError and
sentence, ``_contract.argument_error``, as a native op's call does) and the kernel
adapter (:func:`make_kernel_adapter`: the registered op's argument form in, the user's
kernel called in its own). benchmarks/eager_overhead.py measures them. The binder
opcheck uses is plain Python (:func:`make_binder`); what a call does while torch
traces is ``_tracing``'s.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import torch

from . import _compat, _compat_compiler
from ._codegen import (
    call_args,
    generate,
    local_names,
    param_list,
    plain_tensors_test,
    requires_grad_test,
    result_expression,
    user_defaults,
)
from ._contract import ABSENT, Absent, argument_error, none_out_buffer
from ._signature import CallOrder, OpSignature, Param

__all__ = ["make_binder", "make_handle_call", "make_kernel_adapter", "set_compiled_call"]

_REQUIRED = object()  # default for out buffers that the schema order moved behind defaulted parameters


def _same_tensor(a: Any, b: torch.Tensor) -> bool:
    return a is b or (isinstance(a, torch.Tensor) and _compat.tensor_impl(a) == _compat.tensor_impl(b))


def make_handle_call(
    sig: OpSignature,
    op: Callable[..., Any],
    schema_order: Sequence[Param],
    autograd_call: Callable[..., None] | None,
    prepare: Callable[[], bool],
    grad_error: Callable[[], Exception] | None = None,
    *,
    declaration: str,
) -> Callable[..., Any]:
    """The handle's ``__call__``: the handle and the user's signature in, the mutated tensor(s) out.

    Generated with the user's parameter names, so Python binds the arguments;
    a call that does not fit the 2.13 schema ``declaration`` raises the
    dispatcher's RuntimeError (:func:`argument_error`). Eager calls go straight to the C++ entry point
    (skipping ``OpOverload.__call__``, a Python frame); calls under autograd take
    ``autograd_call``, and calls while Dynamo traces first ``prepare()`` (marked as a
    constant for Dynamo, so it runs for real at trace time: it prepares the op for
    tracing and hands the call its compiled form, see :func:`set_compiled_call`), then
    that compiled call. Calls under
    autograd of an op without an ``autograd_call`` (out=) raise ``grad_error``. On
    plain Tensors the kernel raises it (and torch.func's transform kernel under
    ``grad`` / ``vjp``); a tensor subclass hands the kernel its inner tensors, which
    never require grad, so there the handle asks first (native refuses in its
    Autograd kernel, a Python frame per call that the handle saves).
    """
    exprs, ns = user_defaults(sig)
    ns.update(
        _tagged_ops_raw=getattr(op, "_op", op),
        _tagged_ops_compiling=_compat_compiler.is_dynamo_compiling,
        _tagged_ops_grad_enabled=torch.is_grad_enabled,
        _tagged_ops_any_requires_grad=_compat.any_requires_grad,
        _tagged_ops_Tensor=torch.Tensor,
        _tagged_ops_isinstance=isinstance,
        _tagged_ops_autograd_call=autograd_call,
        _tagged_ops_prepare=_compat_compiler.assume_constant_result(prepare),
        _tagged_ops_grad_error=grad_error,
        _tagged_ops_absent=ABSENT,
        _tagged_ops_Absent=Absent,
        _tagged_ops_type=type,  # a parameter may be named "type"
        _tagged_ops_argument_error=functools.partial(
            argument_error, f"{sig.namespace}::{sig.packet}", sig.params, declaration
        ),
    )
    ns["_tagged_ops_compiled_call"], ns["_tagged_ops_compiled_slot"] = _compiled_call_slot()
    local = local_names(sig)
    args = call_args(schema_order, local)
    requires_grad = requires_grad_test(schema_order, local, checked_by_dispatcher=False)
    # Every parameter defaults to an "absent" marker and surplus arguments land in
    # *surplus / **unknown, so a call that does not fit reaches the body and raises
    # the dispatcher's RuntimeError, as a native op does (Python's TypeError would be
    # raised before the first line, where nothing can catch it). Defaults are filled
    # in after that check, so it counts what the caller passed. The test is on the type:
    # Dynamo 2.2 cannot compare a Tensor with an object by identity (only with None).
    absent, surplus, unknown = "_tagged_ops_absent", "_tagged_ops_surplus", "_tagged_ops_unknown"
    positional = [local[p.name] for p in sig.params if not p.keyword_only]
    keywords = [local[p.name] for p in sig.params if p.keyword_only]
    params = ", ".join(
        [f"{n}={absent}" for n in positional] + [f"*{surplus}"] + [f"{n}={absent}" for n in keywords] + [f"**{unknown}"]
    )
    missing = [f"_tagged_ops_type({local[p.name]}) is _tagged_ops_Absent" for p in sig.params if p.name not in exprs]
    bad_call = " or ".join([*missing, surplus, unknown])
    given = "".join(f"{n}, " for n in [*positional, *keywords])
    defaults = "".join(
        f"    if _tagged_ops_type({local[n]}) is _tagged_ops_Absent:\n        {local[n]} = {e}\n"
        for n, e in exprs.items()
    )
    autograd = ""
    if autograd_call is not None:
        autograd = (
            f"    elif ({requires_grad}) and _tagged_ops_grad_enabled():\n        _tagged_ops_autograd_call({args})\n"
        )
    elif grad_error is not None:
        plain = plain_tensors_test(schema_order, local)
        if plain:
            # Only plain Tensors: the kernel refuses a call under autograd itself, before
            # anything is written, so the handle need not ask too (two requires_grad reads
            # are a twentieth of an eager call). It asks only once a call failed: with no
            # kernel for the device, 2.13's autograd error comes first.
            autograd = (
                f"    elif {plain}:\n"
                f"        try:\n"
                f"            _tagged_ops_raw({args})\n"
                f"        except Exception:\n"
                f"            if ({requires_grad}) and _tagged_ops_grad_enabled():\n"
                f"                raise _tagged_ops_grad_error() from None\n"
                f"            raise\n"
            )
        autograd += (
            f"    elif ({requires_grad}) and _tagged_ops_grad_enabled():\n        raise _tagged_ops_grad_error()\n"
        )
    source = (  # the handle's __call__: the handle first, positional-only, so no name of the user's can clash
        f"def _generated(_tagged_ops_handle, /, {params}):\n"
        f"    if {bad_call}:\n"
        f"        raise _tagged_ops_argument_error({surplus}, {unknown}, ({given}))\n"
        f"{defaults}"
        f"    if _tagged_ops_compiling():\n"
        f"        _tagged_ops_prepare()\n"
        f"        _tagged_ops_compiled_call({args})\n"
        f"{autograd}"
        f"    else:\n"
        f"        _tagged_ops_raw({args})\n"
        f"    return {result_expression(sig, local)}\n"
    )
    call = generate(source, ns, sig.qualname, local)
    # What TorchScript reads (``getfullargspec`` honours it; Python's binding does not):
    # native's ``(self, *args, **kwargs)``, so scripted code calls the handle as a
    # Python value with positional arguments, as it calls a native op.
    call.__signature__ = _SCRIPTED_SIGNATURE  # type: ignore[attr-defined]
    return call


def set_compiled_call(call: Callable[..., Any], compiled_call: Callable[..., None]) -> None:
    """What the handle's ``call`` does, in the registered op's arguments, while Dynamo traces it.

    Set by the ``prepare()`` the call makes first. Dynamo snapshots the generated
    function's globals when it starts tracing it, so the name stays bound to one
    function, which reads the compiled call from its closure when Dynamo inlines it.
    """
    call.__globals__["_tagged_ops_compiled_slot"][:] = [compiled_call]


def _compiled_call_slot() -> tuple[Callable[..., None], list[Callable[..., None]]]:
    slot: list[Callable[..., None]] = []

    def compiled_call(*args: Any, **kwargs: Any) -> None:
        slot[0](*args, **kwargs)

    return compiled_call, slot


_SCRIPTED_SIGNATURE = inspect.Signature(
    [
        inspect.Parameter("_tagged_ops_handle", inspect.Parameter.POSITIONAL_ONLY),
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
)


def make_binder(
    sig: OpSignature, schema_order: Sequence[Param]
) -> Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]:
    """User's call form -> (args, kwargs) of the registered op (opcheck, ``to_op_arguments``)."""
    order = CallOrder(schema_order)

    def bind(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        bound = sig.python_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return order.arguments(bound.arguments)

    return bind


def make_kernel_adapter(
    sig: OpSignature,
    fn: Callable[..., Any],
    schema_order: Sequence[Param],
    *,
    returns: bool,
    identity_error: Callable[[], Exception] | None,
    grad_error: Callable[[], Exception] | None = None,
    grad_enabled: Callable[[], bool] = torch.is_grad_enabled,
    bump_versions: bool = False,
) -> Callable[..., Any]:
    """Registered op's argument form in, the user's function called in its own form.

    ``identity_error`` enforces 2.13's rule that a tagged kernel returns the very
    object(s) it mutated; ``returns`` says whether the registered op returns them
    (native) or nothing (fallback). With ``grad_error`` it refuses to run under
    autograd (``grad_enabled()`` and an argument that requires grad); with
    ``bump_versions`` (a real kernel) it bumps the mutated tensors' version counters.
    """
    exprs, ns = user_defaults(sig)
    ns.update(
        _tagged_ops_fn=fn,
        _tagged_ops_error=identity_error,
        _tagged_ops_grad_error=grad_error,
        _tagged_ops_REQUIRED=_REQUIRED,
        _tagged_ops_grad_enabled=grad_enabled,
        _tagged_ops_any_requires_grad=_compat.any_requires_grad,
        _tagged_ops_bump=_compat.increment_version(),
        _tagged_ops_bump_one=_compat.torch_increment_version,
        _tagged_ops_same_tensor=_same_tensor,
        _tagged_ops_type=type,
        _tagged_ops_tuple=tuple,
        _tagged_ops_len=len,
    )
    # Schema order may put out buffers behind defaulted parameters; give them a
    # placeholder default so the def is valid (the dispatcher always passes them).
    seen_default = False
    for p in schema_order:
        if p.keyword_only:
            continue
        if p.name in exprs:
            seen_default = True
        elif seen_default:
            exprs[p.name] = "_tagged_ops_REQUIRED"
    local = local_names(sig)
    lines = [f"def _generated({param_list(schema_order, exprs, local)}):"]
    if grad_error is not None:
        requires_grad = requires_grad_test(schema_order, local, checked_by_dispatcher=True)
        lines += [f"    if ({requires_grad}) and _tagged_ops_grad_enabled():", "        raise _tagged_ops_grad_error()"]
    lines.append(f"    _tagged_ops_result = _tagged_ops_fn({call_args(sig.params, local)})")
    mutated = [local[n] for n in sig.mutated_names]
    if identity_error is not None:
        # "is", or the same tensor behind another Python object: on 2.2 an
        # in-place method called inside a kernel returns a new wrapper.
        if len(mutated) == 1:
            lines.append(
                f"    if _tagged_ops_result is not {mutated[0]} and not _tagged_ops_same_tensor(_tagged_ops_result, {mutated[0]}):"
            )
        else:
            checks = " and ".join(
                f"_tagged_ops_same_tensor(_tagged_ops_result[{i}], {n})" for i, n in enumerate(mutated)
            )
            lines.append(
                f"    if not (_tagged_ops_type(_tagged_ops_result) is _tagged_ops_tuple and _tagged_ops_len(_tagged_ops_result) == {len(mutated)} and {checks}):"
            )
        lines.append("        raise _tagged_ops_error()")
    if bump_versions:
        if _compat.increment_version() is _compat.torch_increment_version:  # torch's takes the tuple itself
            lines.append(f"    _tagged_ops_bump(({''.join(n + ', ' for n in mutated)}))")
        else:  # one Tensor per call (2.2-2.4): call torch's directly, no Python loop between
            lines += [f"    _tagged_ops_bump_one({n})" for n in mutated]
    lines.append(f"    return {result_expression(sig, local) if returns else 'None'}")
    if sig.kind == "out":
        # The dispatcher lets None through for a Tensor(a!) argument (native 2.13 then
        # returns None and writes nothing). Refuse it; asked only once something failed.
        body = ["    " + line for line in lines[1:]]
        missing = " or ".join(f"{n} is None" for n in mutated)
        lines = [
            lines[0],
            "    try:",
            *body,
            "    except Exception:",
            f"        if {missing}:",
            "            raise _tagged_ops_none_out() from None",
            "        raise",
        ]
        ns["_tagged_ops_none_out"] = functools.partial(RuntimeError, none_out_buffer(sig.qualname, sig.mutated_names))
    return generate("\n".join(lines) + "\n", ns, sig.name, local)
