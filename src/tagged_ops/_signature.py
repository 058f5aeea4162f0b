"""An op's calling convention: its parameters, what it mutates, and the schemas it is registered with.

The user writes the 2.13-style function (or a 2.13 tagged schema string); this
module turns it into an :class:`OpSignature`: the parameters, which of them are
mutated, and the two schemas an op can be registered with (natively tagged, or
the untagged fallback). Both ways in, inferred and ``schema=``, end in the same
place: a schema that 2.13's rules accepted (``_compat_infer_schema``, ``_contract``),
parsed once, so every later decision (lowering, functional twin, argument order)
sees the same thing whatever alias letters the user wrote.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from . import _compat
from ._compat_infer_schema import infer_schema, validate_inplace_schema, validate_out_schema
from ._contract import Kind, check_mutates_args, refuse_keyword_only_tensors

__all__ = [
    "CallOrder",
    "OpSignature",
    "Param",
    "default_mutates_args",
    "define_signature",
    "helper_name",
    "join_params",
    "parse_qualname",
]


# Frozen dataclasses, though creating the two costs an import about 1.4 ms: as NamedTuples
# (0.3 ms), Dynamo 2.4 cannot read their properties (``mutated_names``) where it traces them.
@dataclass(frozen=True)
class Param:
    """One parameter of the op, read from its parsed schema (``torch._C.Argument``).

    Every decision uses the parsed fields; ``type_text`` and ``default_text`` are
    torch's own printing of the argument, kept only to write schemas back out
    (``torch._C.Argument`` has no constructor before 2.5).
    """

    name: str
    keyword_only: bool
    mutated: bool  # written: alias annotation with "!"
    is_plain_tensor: bool  # exactly ``Tensor``: the only type an op may return or write as out=
    holds_tensors: bool  # ``Tensor``, ``Tensor?``, ``Tensor[]``, ...: what autograd looks at
    alias: str | None  # "a!" in "Tensor(a!)"
    type_text: str  # "Tensor", "int[2]", "ScalarType?": the type without its alias annotation
    default_text: str | None  # "2", "None", "[1, 2]", or no default

    @property
    def has_default(self) -> bool:
        return self.default_text is not None

    def render(self, *, alias: bool = True, default: bool = True) -> str:
        """Schema text of the parameter: ``Tensor(a!) out``, ``int y=2``."""
        text = self.type_text
        if alias and self.alias is not None:
            head, _, tail = text.partition("Tensor")
            text = f"{head}Tensor({self.alias}){tail}"
        text = f"{text} {self.name}"
        return f"{text}={self.default_text}" if default and self.has_default else text

    @classmethod
    def from_argument(cls, argument: Any, printed: str) -> Param:
        """From a parsed argument and torch's printing of it (``"Tensor(a!) x"``, ``"int y=2"``)."""
        # torch prints no space inside a type, and parentheses only around an alias annotation
        head, _, rest = printed.split(" ", 1)[0].partition("(")
        alias, _, tail = rest.partition(")")
        type_text = head + tail
        alias_info = argument.alias_info
        default_text = printed.split("=", 1)[1] if argument.has_default_value() else None
        return cls(
            name=argument.name,
            keyword_only=bool(argument.kwarg_only),
            mutated=alias_info is not None and alias_info.is_write,
            is_plain_tensor=isinstance(argument.type, torch.TensorType),
            holds_tensors=_compat.is_tensor_like_type(argument.type) or _compat.is_tensorlist_like_type(argument.type),
            alias=alias or None,
            type_text=type_text,
            default_text=default_text,
        )


@dataclass(frozen=True)
class OpSignature:
    """Everything tagged_ops needs to know about an op's calling convention."""

    qualname: str
    kind: Kind
    params: tuple[Param, ...]
    python_signature: inspect.Signature  # the user's, for calls and messages

    @property
    def namespace(self) -> str:
        return _compat.parse_namespace(self.qualname)[0]

    @property
    def name(self) -> str:
        """The op's name in its namespace, overload included: ``foo`` or ``foo.out``."""
        return _compat.parse_namespace(self.qualname)[1]

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
        values = CallOrder(self.params).by_name(args, kwargs)
        return tuple(values[n] for n in self.mutated_names)

    def native_schema(self) -> str:
        """Schema of the natively tagged op: returns the mutated tensor(s)."""
        returns = [f"Tensor({p.alias})" for p in self.mutated]
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
        outs = [dataclasses.replace(p, keyword_only=False) for p in self.params if p.keyword_only and p.mutated]
        rest = [p for p in self.params if p.keyword_only and not p.mutated]
        return (*required, *outs, *defaulted, *rest)

    def fallback_schema(self, *, defaults: bool = True) -> str:
        """Schema of the untagged fallback op: mutates, returns nothing.

        ``defaults=False`` leaves the parameters' default values out of it.
        """
        params = self.fallback_params()
        return f"{self.name}({join_params(params, lambda p: p.render(default=defaults))}) -> ()"


class CallOrder:
    """How a schema takes its arguments, by parameter name: positional ones in order, then keyword-only.

    The one place a call in one parameter order (the user's, a registered op's, a twin's)
    is made in another: :meth:`by_name` reads a call's arguments by name, :meth:`call`
    makes a call from them. Plain enough for Dynamo to trace.
    """

    __slots__ = ("keywords", "positional")

    def __init__(self, params: Sequence[Param]) -> None:
        self.positional = tuple(p.name for p in params if not p.keyword_only)
        self.keywords = tuple(p.name for p in params if p.keyword_only)

    def by_name(
        self, args: Sequence[Any], kwargs: dict[str, Any], defaults: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Every argument of a call in this order, by name (``defaults`` first: the dispatcher
        leaves out arguments equal to their defaults)."""
        values = dict(defaults) if defaults else {}
        for i in range(len(args)):  # fewer than the positional parameters where trailing defaults are left out;
            values[self.positional[i]] = args[i]  # a loop, not zip: 2.2's Dynamo traces no zip of unequal lengths
        values.update(kwargs)
        return values

    def call(self, fn: Callable[..., Any], values: dict[str, Any]) -> Any:
        """``fn`` called in this order with ``values`` (every argument by name)."""
        return fn(*[values[n] for n in self.positional], **{n: values[n] for n in self.keywords})

    def arguments(self, values: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` in this order from ``values``."""
        return tuple(values[n] for n in self.positional), {n: values[n] for n in self.keywords}


def join_params(params: Sequence[Param], render: Callable[[Param], str] = Param.render) -> str:
    """A parameter list, schema or Python: ``render`` each, with ``*`` before the keyword-only ones."""
    parts: list[str] = []
    star = False
    for p in params:
        if p.keyword_only and not star:
            parts.append("*")
            star = True
        parts.append(render(p))
    return ", ".join(parts)


def parse_qualname(qualname: str) -> tuple[str, str]:
    """``"ns::foo.out"`` -> ``("ns", "foo.out")``; refuses anything the dispatcher would not name.

    Overload names are allowed, as ATen and real libraries use them
    (``ns::foo.out``, ``ns::foo_.Tensor``): they register ``torch.ops.ns.foo.out``.
    """
    try:
        namespace, name = _compat.parse_namespace(qualname)  # torch's own split, and its check of the "::"
    except ValueError:
        namespace = name = ""
    packet, _, overload = name.partition(".")
    if not (namespace.isidentifier() and packet.isidentifier() and (name == packet or overload.isidentifier())):
        raise ValueError(
            f"{qualname!r}: an op name must be qualified as 'namespace::name' or "
            "'namespace::name.overload' (identifiers, e.g. 'mylib::sin_out' or 'mylib::sin.out')."
        )
    if overload == "default":
        raise ValueError(f"{qualname!r}: 'default' is the overload of '{namespace}::{packet}'; leave it out.")
    return namespace, name


def helper_name(opname: str, suffix: str) -> str:
    """The name of an op tagged_ops defines beside the user's: ``foo.out`` -> ``foo<suffix>.out``.

    Helpers live in a packet of their own, so ``torch.ops.ns.foo.overloads()``
    lists only what the user defined.
    """
    packet, _, overload = opname.partition(".")
    return f"{packet}{suffix}.{overload}" if overload else f"{packet}{suffix}"


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
    texts = [t.strip() for t in _split_top_level(arg_list) if t.strip() not in ("*", "")]
    params = tuple(Param.from_argument(a, t) for a, t in zip(parsed.arguments, texts, strict=True))
    reserved = [p.name for p in params if p.name.startswith(RESERVED_PREFIX)]
    if reserved:
        raise ValueError(
            f"{qualname}: parameter names starting with {RESERVED_PREFIX!r} are tagged_ops' own "
            f"(the generated call uses them); rename {', '.join(reserved)}."
        )
    python_signature = inspect.signature(fn) if fn is not None else _python_signature(parsed.arguments)
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


def _python_signature(arguments: Sequence[Any]) -> inspect.Signature:
    """A declared op's Python signature, read from its schema: names, keyword-only, defaults."""
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
