"""An op's signature from what its author wrote: inferred from a 2.13-style function, or read from ``schema=``.

Either way the result passed 2.13's checks (``_compat_infer_schema``, ``_contract``)
and is parsed once into an :class:`~tagged_ops._signature.OpSignature`, whatever
alias letters the author wrote.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterable

import torch

from . import _compat
from ._compat_infer_schema import infer_schema, validate_inplace_schema, validate_out_schema
from ._contract import Kind, check_mutates_args, refuse_keyword_only_tensors
from ._signature import OpSignature, Param, parse_qualname

__all__ = ["RESERVED_PREFIX", "default_mutates_args", "define_signature", "split_top_level"]


def default_mutates_args(fn: Callable[..., Any], kind: Kind) -> tuple[str, ...]:
    """The ``mutates_args`` a user means when they give none.

    In-place: the first positional parameter. out=: every keyword-only parameter
    annotated ``Tensor``.
    """
    sig = inspect.signature(fn)

    def is_tensor(ann: Any) -> bool:
        return ann is torch.Tensor or (isinstance(ann, str) and ann in {"Tensor", "torch.Tensor"})

    if kind == "inplace":
        # Only a Tensor can be the mutated argument; for anything else the user
        # gets 2.13's "first positional argument to be a Tensor" error.
        for p in sig.parameters.values():
            if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD:
                return (p.name,) if is_tensor(p.annotation) else ()
        return ()
    return tuple(
        p.name for p in sig.parameters.values() if p.kind == inspect.Parameter.KEYWORD_ONLY and is_tensor(p.annotation)
    )


def define_signature(
    fn: Callable[..., Any] | None,
    qualname: str,
    kind: Kind,
    mutates_args: str | Iterable[str] | None,
    schema: str | None,
) -> OpSignature:
    """The op's signature, inferred from ``fn`` or read from ``schema=``, with 2.13's checks.

    Raises what ``torch.library.custom_op(qualname, fn, mutates_args=...,
    tags=<kind's tag>, schema=...)`` raises on 2.13, on every release. With no
    ``fn`` (a declaration, as ``torch.library.define``), ``schema`` is required.
    """
    _, name = parse_qualname(qualname)
    if schema is None:
        if fn is None:
            raise TypeError(f"{qualname}: a declaration without a function needs schema=.")
        mutates = default_mutates_args(fn, kind) if mutates_args is None else mutates_args
        text = name + infer_schema(fn, mutates_args=mutates if isinstance(mutates, str) else tuple(mutates), kind=kind)
        parsed = _compat.parse_schema(text)
        refuse_keyword_only_tensors(parsed, kind)
    else:
        # custom_op-style "(Tensor(a!) x) -> Tensor(a!)", or with the op's name in front
        written = schema.strip()
        if not written.startswith("(") and written.split("(", 1)[0].strip() != name:
            raise ValueError(
                f"{qualname}: schema= names another op ({written.split('(', 1)[0].strip()!r}); "
                "write it without a name, as for torch.library.custom_op: '(Tensor(a!) x) -> Tensor(a!)'."
            )
        parsed = _compat.parse_schema(f"{name}{written[written.index('(') :]}")
        if kind == "out":
            validate_out_schema(parsed)
        else:
            refuse_keyword_only_tensors(parsed, kind)  # before the tag's rules, as custom_op(schema=)
            validate_inplace_schema(parsed)
        check_mutates_args(parsed, mutates_args, schema)
    return _signature_from_schema(fn, qualname, kind, parsed)


#: The prefix of every name tagged_ops' generated code uses besides the user's parameters.
RESERVED_PREFIX = "_tagged_ops_"


def _signature_from_schema(fn: Callable[..., Any] | None, qualname: str, kind: Kind, parsed: Any) -> OpSignature:
    # torch's own printing of the parsed schema: one text per argument, "*" aside
    printed = str(parsed)
    arg_list = printed[printed.index("(") + 1 : printed.rindex(")", 0, printed.rindex("->"))]
    texts = [t.strip() for t in split_top_level(arg_list) if t.strip() not in ("*", "")]
    params = tuple(Param.from_argument(a, t) for a, t in zip(parsed.arguments, texts, strict=True))
    reserved = [p.name for p in params if p.name.startswith(RESERVED_PREFIX)]
    if reserved:
        raise ValueError(
            f"{qualname}: parameter names starting with {RESERVED_PREFIX!r} are tagged_ops' own "
            f"(the generated call uses them); rename {', '.join(reserved)}."
        )
    python_signature = inspect.signature(fn) if fn is not None else functools.partial(_python_signature, parsed)
    sig = OpSignature(qualname, kind, params, python_signature)
    # Params keep torch's printing of each argument to write schemas back out: check that what
    # they write parses to the schema they were read from, before anything is registered.
    rendered = str(_compat.parse_schema(sig.native_schema()))
    if rendered != printed:
        raise RuntimeError(
            f"{qualname}: tagged_ops wrote the schema {printed!r} back as {rendered!r}; this is a bug in "
            "tagged_ops, please report it with the schema."
        )
    return sig


def _python_signature(parsed: Any) -> inspect.Signature:
    """A declared op's Python signature, read from its parsed schema: names, keyword-only, defaults."""
    arguments = parsed.arguments
    kinds = {True: inspect.Parameter.KEYWORD_ONLY, False: inspect.Parameter.POSITIONAL_OR_KEYWORD}
    return inspect.Signature(
        [
            inspect.Parameter(
                a.name,
                kinds[bool(a.kwarg_only)],
                default=a.default_value if a.has_default_value() else inspect.Parameter.empty,
            )
            for a in arguments
        ]
    )


def split_top_level(s: str) -> list[str]:
    """``s`` split at the commas outside brackets and quotes: a printed schema's arguments, one each."""
    if not any(c in s for c in "[\"'") and s.count("(") == s.count("Tensor("):
        return s.split(",")  # no list, no string, no parentheses but alias annotations: no comma inside
    parts: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in s:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts
