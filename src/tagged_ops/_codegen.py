"""Generated call glue between the user's signature and a registered op's schema: the eager hot path.

The handle must take the user's signature on every release (defaults, keywords,
keyword-only out buffers), cost next to nothing per call, and be traceable by
Dynamo on torch 2.4 (which cannot trace ``inspect.Signature.bind``). So for each
op two functions are generated at definition time: the handle's call and the
kernel adapter, the two that run on every eager call
(benchmarks/eager_overhead.py measures them). Their source names parameters by
position, so it compiles once per shape of op (a library's ops share a few);
each op's functions carry the user's parameter names. Python then does
the argument binding; a call that does not fit raises the dispatcher's own
RuntimeError and sentence (``argument_error``), as a native op's call does (the
functions are named after the op's qualified name, and their source is
registered with ``linecache``). The binder opcheck uses is plain Python; what a
call does while torch traces is ``_tracing``'s.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import zlib
from types import CodeType
from typing import Any, Callable, Sequence

import torch

from . import _compat
from ._contract import none_out_buffer
from ._signature import OpSignature, Param, join_params

__all__ = ["make_binder", "make_handle_call", "make_kernel_adapter", "set_compiled_call"]

_REQUIRED = object()  # default for out buffers that the schema order moved behind defaulted parameters


def _same_tensor(a: Any, b: torch.Tensor) -> bool:
    return a is b or (isinstance(a, torch.Tensor) and _compat.tensor_impl(a) == _compat.tensor_impl(b))


def _locals(sig: OpSignature) -> dict[str, str]:
    """The user's parameter name -> the name the generated source gives it.

    Sources name parameters by position, so ops of one shape share one compiled code
    object (:func:`generate` gives each op's function the user's names back).
    """
    return {p.name: f"_tagged_ops_a{i}" for i, p in enumerate(sig.params)}


def _param_list(order: Sequence[Param], defaults: dict[str, str], local: dict[str, str]) -> str:
    return join_params(order, lambda p: f"{local[p.name]}={defaults[p.name]}" if p.name in defaults else local[p.name])


def _call_args(order: Sequence[Param], local: dict[str, str]) -> str:
    # Keyword-only arguments are passed by keyword: by their positional name here, and
    # by the user's (the callee's keyword) once :func:`generate` renames the call's keywords.
    return ", ".join(local[p.name] if not p.keyword_only else f"{local[p.name]}={local[p.name]}" for p in order)


def _requires_grad_test(params: Sequence[Param], local: dict[str, str], *, checked_by_dispatcher: bool) -> str:
    """Source of an expression: does any Tensor argument require grad?

    Plain Tensor arguments are tested inline: an attribute read costs less than
    any call, torch's C++ ``_any_requires_grad`` included (2.13, two Tensors:
    about 90 ns against 135 ns). Inside a kernel the dispatcher has already
    checked that they are Tensors. Optional Tensors and lists of Tensors go to
    ``_compat.any_requires_grad``.
    """
    tensors = [p for p in params if p.holds_tensors]
    tests = [
        f"{local[p.name]}.requires_grad"
        if checked_by_dispatcher
        else f"(_tagged_ops_isinstance({local[p.name]}, _tagged_ops_Tensor) and {local[p.name]}.requires_grad)"
        for p in tensors
        if p.is_plain_tensor
    ]
    others = [local[p.name] for p in tensors if not p.is_plain_tensor]
    if others:
        tests.append(f"_tagged_ops_any_requires_grad({', '.join(others)})")
    return " or ".join(tests) or "False"


def _plain_tensors_test(params: Sequence[Param], local: dict[str, str]) -> str:
    """Source of an expression: is every Tensor argument a plain ``torch.Tensor`` (or None)?

    Such a call reaches the kernels with the tensors it was given: no subclass
    unwraps them in ``__torch_dispatch__`` (the torch.func transforms have a kernel
    of their own). Empty where a parameter can hold a list of Tensors.
    """
    tests = []
    for p in params:
        name = local[p.name]
        if p.is_plain_tensor:
            tests.append(f"_tagged_ops_type({name}) is _tagged_ops_Tensor")
        elif p.type_text == "Tensor?":
            tests.append(f"({name} is None or _tagged_ops_type({name}) is _tagged_ops_Tensor)")
        elif p.holds_tensors:
            return ""
    return " and ".join(tests)


def _result(sig: OpSignature, local: dict[str, str]) -> str:
    names = [local[n] for n in sig.mutated_names]
    return names[0] if len(names) == 1 else f"({', '.join(names)},)"


#: source -> its compiled code: ops of one shape, and every redefinition, share it.
_CODE: dict[str, CodeType] = {}


def generate(source: str, namespace: dict[str, Any], name: str, local: dict[str, str]) -> Callable[..., Any]:
    """Compile ``source`` (one ``def``) in ``namespace``; the function is named ``name``.

    ``local`` maps the user's parameter names to the names the source gives them:
    sources name parameters by position, so ops of one shape compile once, and
    each op's function gets the user's names back (its code's variable names, which
    Python binds keyword arguments by, its keyword-only defaults, and the keywords
    its calls pass keyword-only arguments by). The source goes into
    ``linecache`` under a file name of its own (as torch.fx does for the code it
    generates), so a traceback through it shows its lines; one entry per distinct source.
    """
    code = _CODE.get(source)
    if code is None:
        filename = f"<tagged_ops generated {zlib.crc32(source.encode()):08x}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = _CODE[source] = compile(source, filename, "exec")
    user = {v: k for k, v in local.items()}
    consts = tuple(_with_user_names(c, user) if isinstance(c, CodeType) else c for c in code.co_consts)
    exec(code.replace(co_consts=consts), namespace)  # noqa: S102 - source is built from validated identifiers only
    fn: Callable[..., Any] = namespace["_generated"]
    if fn.__kwdefaults__:
        fn.__kwdefaults__ = {user.get(k, k): v for k, v in fn.__kwdefaults__.items()}
    fn.__name__ = fn.__qualname__ = name
    return fn


def _with_user_names(code: CodeType, user: dict[str, str]) -> CodeType:
    """``code`` (a generated function) with the user's names: its parameters, and its calls' keywords.

    A call's keyword names are a tuple of strings among the function's constants on
    every Python we support (3.10's ``CALL_FUNCTION_KW``, 3.11-3.12's ``KW_NAMES``,
    3.13's ``CALL_KW``); no other constant of generated code holds a positional name.
    """
    consts = tuple(
        tuple(user.get(k, k) for k in c) if type(c) is tuple and all(type(k) is str for k in c) else c
        for c in code.co_consts
    )
    return code.replace(co_varnames=tuple(user.get(v, v) for v in code.co_varnames), co_consts=consts)


def user_defaults(sig: OpSignature) -> tuple[dict[str, str], dict[str, Any]]:
    """Default expressions (names bound in the namespace) for the user's signature."""
    exprs: dict[str, str] = {}
    values: dict[str, Any] = {}
    for i, p in enumerate(sig.python_signature.parameters.values()):
        if p.default is not inspect.Parameter.empty:
            exprs[p.name] = f"_tagged_ops_d{i}"
            values[f"_tagged_ops_d{i}"] = p.default
    return exprs, values


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
        _tagged_ops_compiling=_compat.is_dynamo_compiling,
        _tagged_ops_grad_enabled=torch.is_grad_enabled,
        _tagged_ops_any_requires_grad=_compat.any_requires_grad,
        _tagged_ops_Tensor=torch.Tensor,
        _tagged_ops_isinstance=isinstance,
        _tagged_ops_autograd_call=autograd_call,
        _tagged_ops_prepare=_compat.assume_constant_result(prepare),
        _tagged_ops_grad_error=grad_error,
        _tagged_ops_absent=_ABSENT,
        _tagged_ops_Absent=_Absent,
        _tagged_ops_type=type,  # a parameter may be named "type"
        _tagged_ops_argument_error=functools.partial(argument_error, sig, declaration),
    )
    ns["_tagged_ops_compiled_call"], ns["_tagged_ops_compiled_slot"] = _compiled_call_slot()
    local = _locals(sig)
    args = _call_args(schema_order, local)
    requires_grad = _requires_grad_test(schema_order, local, checked_by_dispatcher=False)
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
        plain = _plain_tensors_test(schema_order, local)
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
        f"    return {_result(sig, local)}\n"
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


class _Absent:
    """The default of every parameter of a handle's call: the caller did not pass it."""

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def argument_error(
    sig: OpSignature, declaration: str, surplus: tuple[Any, ...], unknown: dict[str, Any], values: tuple[Any, ...]
) -> RuntimeError:
    """The dispatcher's error for a call that does not fit the schema (``createStackForSchema``).

    ``values``: the parameters' values (positional ones, then keyword-only ones), the
    absent marker where the caller passed nothing.

    The same checks in the same order, with the same sentences, as a native op
    called with these arguments: too many, a keyword-only one passed by position,
    a missing one, an unknown keyword. (Python itself still raises TypeError for
    an argument given both by position and by keyword, before any of this.)
    """
    name = f"{sig.namespace}::{sig.packet}"  # the dispatcher names the schema without its overload
    params = sig.params
    order = [p.name for p in params if not p.keyword_only] + [p.name for p in params if p.keyword_only]
    given = dict(zip(order, values, strict=True))
    received = sum(v is not _ABSENT for v in given.values()) + len(surplus) + len(unknown)
    if received > len(params):
        return RuntimeError(
            f"{name}() expected at most {len(params)} argument(s) but received {received} argument(s). "
            f"Declaration: {declaration}"
        )
    if surplus:
        positional = sum(not p.keyword_only for p in params)
        return RuntimeError(
            f"{name}() takes {positional} positional argument(s) but {positional + len(surplus)} "
            f"was/were given.  Declaration: {declaration}"
        )
    for p in params:
        if given[p.name] is _ABSENT and not p.has_default:
            return RuntimeError(f"{name}() is missing value for argument '{p.name}'. Declaration: {declaration}")
    return RuntimeError(
        f"Unknown keyword argument '{next(iter(unknown))}' for operator '{name}'. Schema: {declaration}"
    )


def make_binder(
    sig: OpSignature, schema_order: Sequence[Param]
) -> Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]:
    """User's call form -> (args, kwargs) of the registered op (opcheck, ``to_op_arguments``)."""
    positional = [p.name for p in schema_order if not p.keyword_only]
    keywords = [p.name for p in schema_order if p.keyword_only]

    def bind(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        bound = sig.python_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        return tuple(values[n] for n in positional), {n: values[n] for n in keywords}

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
        _tagged_ops_bump_one=_compat.increment_version_one,
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
    local = _locals(sig)
    lines = [f"def _generated({_param_list(schema_order, exprs, local)}):"]
    if grad_error is not None:
        requires_grad = _requires_grad_test(schema_order, local, checked_by_dispatcher=True)
        lines += [f"    if ({requires_grad}) and _tagged_ops_grad_enabled():", "        raise _tagged_ops_grad_error()"]
    lines.append(f"    _tagged_ops_result = _tagged_ops_fn({_call_args(sig.params, local)})")
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
        if _compat.increment_version() is _compat.increment_version_one:
            lines.append(f"    _tagged_ops_bump(({''.join(n + ', ' for n in mutated)}))")
        else:  # one Tensor per call (2.2-2.4): call torch's directly, no Python loop between
            lines += [f"    _tagged_ops_bump_one({n})" for n in mutated]
    lines.append(f"    return {_result(sig, local) if returns else 'None'}")
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
