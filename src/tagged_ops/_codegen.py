"""The code engine of the eager call: compiles generated source once per shape of op, with each op's names.

The handle must take the user's signature on every release (defaults, keywords,
keyword-only out buffers), cost next to nothing per call, and be traceable by
Dynamo on torch 2.4 (which cannot trace ``inspect.Signature.bind``). So the functions
that run on every eager call are generated (``_calls`` builds their sources). A source
names parameters by position, so it compiles once per shape of op (a library's ops
share a few); :func:`generate` gives each op's function the user's parameter names
back, and registers the source with ``linecache`` so tracebacks show it. The helpers
below write the pieces of source the builders share.
"""

from __future__ import annotations

import inspect
import linecache
import zlib
from types import CodeType
from typing import Any, Callable, Sequence

from ._signature import OpSignature, Param, join_params

__all__ = [
    "call_args",
    "generate",
    "local_names",
    "param_list",
    "plain_tensors_test",
    "requires_grad_test",
    "result_expression",
    "user_defaults",
]


def local_names(sig: OpSignature) -> dict[str, str]:
    """The user's parameter name -> the name the generated source gives it.

    Sources name parameters by position, so ops of one shape share one compiled code
    object (:func:`generate` gives each op's function the user's names back).
    """
    return {p.name: f"_tagged_ops_a{i}" for i, p in enumerate(sig.params)}


def param_list(order: Sequence[Param], defaults: dict[str, str], local: dict[str, str]) -> str:
    return join_params(order, lambda p: f"{local[p.name]}={defaults[p.name]}" if p.name in defaults else local[p.name])


def call_args(order: Sequence[Param], local: dict[str, str]) -> str:
    # Keyword-only arguments are passed by keyword: by their positional name here, and
    # by the user's (the callee's keyword) once :func:`generate` renames the call's keywords.
    return ", ".join(local[p.name] if not p.keyword_only else f"{local[p.name]}={local[p.name]}" for p in order)


def requires_grad_test(params: Sequence[Param], local: dict[str, str], *, checked_by_dispatcher: bool) -> str:
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


def plain_tensors_test(params: Sequence[Param], local: dict[str, str]) -> str:
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


def result_expression(sig: OpSignature, local: dict[str, str]) -> str:
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
