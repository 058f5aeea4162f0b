"""An op's calling convention: its parameters, what it mutates, and the schemas it is registered with.

:class:`OpSignature` holds the parameters (each a :class:`Param`, read from the parsed
schema), which of them are mutated, and the two schemas an op can be registered
with (natively tagged, or the untagged fallback); :class:`CallOrder` makes a call
in one parameter order from a call in another. ``_inference`` makes the signature
from what the op's author wrote.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import torch

from . import _compat
from ._contract import Kind

__all__ = [
    "CallOrder",
    "OpSignature",
    "Param",
    "helper_name",
    "join_params",
    "parse_qualname",
]


class _Frozen:
    """Value objects: compared and hashed by their fields, never changed after ``__init__``.

    Written by hand rather than as frozen dataclasses: making the two dataclasses cost
    every import about 1.4 ms (dataclass generates and compiles their methods), and
    as NamedTuples Dynamo 2.4 cannot read their properties (``mutated_names``) where
    it traces them.
    """

    #: The fields, in order. Instance attributes, not ``__slots__``: 2.2's Dynamo cannot
    #: read a slot of an object it traces.
    _FIELDS: tuple[str, ...] = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS)
        return f"{type(self).__name__}({fields})"

    def _init(self, **fields: Any) -> None:
        self.__dict__.update(fields)  # past __setattr__, which refuses


class Param(_Frozen):
    """One parameter of the op, read from its parsed schema (``torch._C.Argument``).

    Every decision uses the parsed fields; ``type_text`` and ``default_text`` are
    torch's own printing of the argument, kept only to write schemas back out
    (``torch._C.Argument`` has no constructor before 2.5).
    """

    _FIELDS = (
        "name",
        "keyword_only",
        "mutated",  # written: alias annotation with "!"
        "is_plain_tensor",  # exactly ``Tensor``: the only type an op may return or write as out=
        "holds_tensors",  # ``Tensor``, ``Tensor?``, ``Tensor[]``, ...: what autograd looks at
        "alias",  # "a!" in "Tensor(a!)"
        "type_text",  # "Tensor", "int[2]", "ScalarType?": the type without its alias annotation
        "default_text",  # "2", "None", "[1, 2]", or no default
    )
    name: str
    keyword_only: bool
    mutated: bool
    is_plain_tensor: bool
    holds_tensors: bool
    alias: str | None
    type_text: str
    default_text: str | None

    def __init__(
        self,
        *,
        name: str,
        keyword_only: bool,
        mutated: bool,
        is_plain_tensor: bool,
        holds_tensors: bool,
        alias: str | None,
        type_text: str,
        default_text: str | None,
    ) -> None:
        self._init(
            name=name,
            keyword_only=keyword_only,
            mutated=mutated,
            is_plain_tensor=is_plain_tensor,
            holds_tensors=holds_tensors,
            alias=alias,
            type_text=type_text,
            default_text=default_text,
        )

    def positional(self) -> Param:
        """The same parameter, taken positionally (an out buffer in the untagged schema)."""
        fields = {n: getattr(self, n) for n in self._FIELDS}
        return Param(**{**fields, "keyword_only": False})

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


class OpSignature(_Frozen):
    """Everything tagged_ops needs to know about an op's calling convention.

    ``python_signature``: the user's (``inspect.Signature``), for calls and messages; or a
    function that makes it, called at its first use (a declared op's is read from its schema,
    which only a call or opcheck needs).
    """

    _FIELDS = ("qualname", "kind", "params")
    qualname: str
    kind: Kind
    params: tuple[Param, ...]
    _python_signature: inspect.Signature | Callable[[], inspect.Signature]

    def __init__(
        self,
        qualname: str,
        kind: Kind,
        params: tuple[Param, ...],
        python_signature: inspect.Signature | Callable[[], inspect.Signature],
    ) -> None:
        self._init(qualname=qualname, kind=kind, params=params, _python_signature=python_signature)

    @property
    def python_signature(self) -> inspect.Signature:
        made = self._python_signature
        if not isinstance(made, inspect.Signature):
            made = made()
            object.__setattr__(self, "_python_signature", made)
        return made

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
        schema: str | None = self.__dict__.get("_native_schema")
        if schema is None:  # written once: checked at definition, then registered
            returns = [f"Tensor({p.alias})" for p in self.mutated]
            ret = returns[0] if len(returns) == 1 else f"({', '.join(returns)})"
            schema = f"{self.name}({join_params(self.params)}) -> {ret}"
            object.__setattr__(self, "_native_schema", schema)
        return schema

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
        outs = [p.positional() for p in self.params if p.keyword_only and p.mutated]
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
