"""An op's calling convention: its parameters, what it mutates, and the schemas it is registered with.

The user writes the 2.13-style function (or a 2.13 tagged schema string); this
module turns it into an :class:`OpSignature`: the parameters, which of them are
mutated, and the two schemas an op can be registered with (natively tagged, or
the untagged fallback). Both ways in, inferred and ``schema=``, end in the same
place: a schema string that 2.13's rules accepted (``_schema_rules.py``), read
back through ``torch._C.parse_schema``, so every later decision (lowering,
functional twin, argument order) sees the same thing whatever alias letters
the user wrote.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

import torch

from . import _schema_rules as rules

__all__ = [
    "Kind",
    "OpSignature",
    "Param",
    "default_mutates_args",
    "define_signature",
    "helper_name",
    "join_params",
    "lookup_op",
    "parse_qualname",
]

Kind = Literal["inplace", "out"]


@dataclass(frozen=True)
class Param:
    """One parameter of the op, as the schema sees it."""

    name: str
    keyword_only: bool
    is_plain_tensor: bool  # exactly ``Tensor``: the only type an op may return or write as out=
    mutated: bool
    text: str  # schema text: type (with alias annotation when mutated), name, default

    @property
    def has_default(self) -> bool:
        return "=" in self.text

    def without_default(self) -> Param:
        """The same parameter, its default value left out of the schema text."""
        return dataclasses.replace(self, text=self.text.split("=", 1)[0])


@dataclass(frozen=True)
class OpSignature:
    """Everything tagged_ops needs to know about an op's calling convention."""

    qualname: str
    kind: Kind
    params: tuple[Param, ...]
    python_signature: inspect.Signature  # the user's, for calls and messages

    @property
    def namespace(self) -> str:
        return self.qualname.split("::", 1)[0]

    @property
    def name(self) -> str:
        """The op's name in its namespace, overload included: ``foo`` or ``foo.out``."""
        return self.qualname.split("::", 1)[1]

    @property
    def packet(self) -> str:
        """``foo`` for ``ns::foo.out``: the ``torch.ops.ns.foo`` packet the op belongs to."""
        return self.name.partition(".")[0]

    @property
    def mutated(self) -> tuple[Param, ...]:
        """The mutated parameters: the first argument (in-place) or the out buffers."""
        return tuple(p for p in self.params if p.mutated)

    @property
    def mutated_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.mutated)

    def mutated_in_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The objects a call in the user's form mutates, in declaration order."""
        positional = [p.name for p in self.params if not p.keyword_only]
        found = []
        for name in self.mutated_names:
            if name in kwargs:
                found.append(kwargs[name])
            else:
                found.append(args[positional.index(name)])
        return tuple(found)

    def native_schema(self) -> str:
        """Schema of the natively tagged op: returns the mutated tensor(s)."""
        returns = [_alias_of(p.text) for p in self.mutated]
        ret = returns[0] if len(returns) == 1 else f"({', '.join(returns)})"
        return f"{self.name}({join_params(self.params)}) -> {ret}"

    def fallback_params(self) -> tuple[Param, ...]:
        """Parameter order of the untagged op.

        out= buffers become positional, after the required positional parameters
        and before the defaulted ones (a schema allows no required argument after
        a defaulted one): older releases' compile stacks reject keyword-only
        mutable Tensors on untagged ops (2.3: ``Unsupported out variant``).
        """
        if self.kind == "inplace":
            return self.params
        required = [p for p in self.params if not p.keyword_only and not p.has_default]
        defaulted = [p for p in self.params if not p.keyword_only and p.has_default]
        outs = [Param(p.name, False, p.is_plain_tensor, True, p.text) for p in self.params if p.keyword_only and p.mutated]
        rest = [p for p in self.params if p.keyword_only and not p.mutated]
        return (*required, *outs, *defaulted, *rest)

    def fallback_schema(self, *, defaults: bool = True) -> str:
        """Schema of the untagged fallback op: mutates, returns nothing.

        ``defaults=False`` leaves the parameters' default values out of it.
        """
        params = self.fallback_params()
        if not defaults:
            params = tuple(p.without_default() for p in params)
        return f"{self.name}({join_params(params)}) -> ()"


def join_params(params: Sequence[Param], render: Callable[[Param], str] = lambda p: p.text) -> str:
    """A parameter list, schema or Python: ``render`` each, with ``*`` before the keyword-only ones."""
    parts: list[str] = []
    star = False
    for p in params:
        if p.keyword_only and not star:
            parts.append("*")
            star = True
        parts.append(render(p))
    return ", ".join(parts)


def _alias_of(param_text: str) -> str:
    # "Tensor(a3!) out" -> "Tensor(a3!)"
    return param_text.split(" ", 1)[0]


def parse_qualname(qualname: str) -> tuple[str, str]:
    """``"ns::foo.out"`` -> ``("ns", "foo.out")``; refuses anything the dispatcher would not name.

    Overload names are allowed, as ATen and real libraries use them
    (``ns::foo.out``, ``ns::foo_.Tensor``): they register ``torch.ops.ns.foo.out``.
    """
    namespace, sep, name = qualname.partition("::")
    packet, dot, overload = name.partition(".")
    if not (sep and namespace.isidentifier() and packet.isidentifier() and (not dot or overload.isidentifier())):
        raise ValueError(
            f"tagged_ops: op name {qualname!r} must be qualified as 'namespace::name' or "
            "'namespace::name.overload' (identifiers, e.g. 'mylib::sin_out' or 'mylib::sin.out')."
        )
    if overload == "default":
        raise ValueError(f"tagged_ops: op name {qualname!r}: 'default' is the overload of 'namespace::{packet}'; leave it out.")
    return namespace, name


def helper_name(opname: str, suffix: str) -> str:
    """The name of an op tagged_ops defines beside the user's: ``foo.out`` -> ``foo<suffix>.out``.

    Helpers live in a packet of their own, so ``torch.ops.ns.foo.overloads()``
    lists only what the user defined.
    """
    packet, dot, overload = opname.partition(".")
    return f"{packet}{suffix}{dot}{overload}"


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


def lookup_op(namespace: str, opname: str) -> Any:
    """``torch.ops.<namespace>.<packet>.<overload>`` for ``opname`` ``packet[.overload]``."""
    packet, _, overload = opname.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")


def define_signature(
    fn: Callable[..., Any],
    qualname: str,
    kind: Kind,
    mutates_args: str | Iterable[str] | None,
    schema: str | None,
) -> OpSignature:
    """The op's signature, inferred from ``fn`` or read from ``schema=``, with 2.13's checks.

    Raises what ``torch.library.custom_op(qualname, fn, mutates_args=...,
    tags=<kind's tag>, schema=...)`` raises on 2.13, on every release.
    """
    _, name = parse_qualname(qualname)
    if schema is None:
        mutates = default_mutates_args(fn, kind) if mutates_args is None else mutates_args
        text = name + rules.infer_schema(fn, mutates_args=mutates if isinstance(mutates, str) else tuple(mutates), kind=kind)
    else:
        # custom_op-style "(Tensor(a!) x) -> Tensor(a!)", or with the op's name in front
        written = schema.strip()
        if not written.startswith("(") and written.split("(", 1)[0].strip() != name:
            raise ValueError(
                f"tagged_ops: {qualname}: schema= names another op ({written.split('(', 1)[0].strip()!r}); "
                "write it without a name, as for torch.library.custom_op: '(Tensor(a!) x) -> Tensor(a!)'."
            )
        text = f"{name}{written[written.index('('):]}"
        parsed = torch._C.parse_schema(text)
        if kind == "out":
            rules._validate_out_schema(parsed)
        else:
            rules._validate_inplace_schema(parsed)
    rules.validate_custom_op_schema(text, kind, mutates_args, schema)
    return _signature_from_text(fn, qualname, kind, text)


def _signature_from_text(fn: Callable[..., Any], qualname: str, kind: Kind, text: str) -> OpSignature:
    # Each parameter keeps its own schema text (alias letters, defaults as written),
    # and the parsed schema says what it is.
    parsed = torch._C.parse_schema(text)
    arg_list = text[text.index("(") + 1 : text.rindex(")", 0, text.index("->"))]
    texts = [t.strip() for t in _split_top_level(arg_list) if t.strip() not in ("*", "")]
    params = tuple(
        Param(
            a.name,
            bool(a.kwarg_only),
            isinstance(a.type, torch.TensorType),
            a.alias_info is not None and a.alias_info.is_write,
            t,
        )
        for a, t in zip(parsed.arguments, texts, strict=True)
    )
    return OpSignature(qualname, kind, params, inspect.signature(fn))


def _split_top_level(s: str) -> list[str]:
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


