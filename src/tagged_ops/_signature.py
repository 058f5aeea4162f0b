"""Schema inference for tagged mutable ops, with torch 2.13's rules and messages.

The user writes the 2.13-style function; this module turns it into an
:class:`OpSignature`: the parameters, which of them are mutated, and the two
schemas an op can be registered with (natively tagged, or the untagged fallback).
Definition-time errors are raised here, on every release, with the exact text
that ``torch.library.infer_schema(..., tags=...)`` uses on 2.13, so a library
behaves the same whichever path its op takes.

Types are resolved here rather than by torch, because torch 2.4's own schema
inference rejects postponed (string) annotations.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

import torch

from . import _capabilities as caps

__all__ = ["Kind", "OpSignature", "Param", "default_mutates_args", "infer_signature", "join_params", "signature_from_schema"]

Kind = Literal["inplace", "out"]

_TAG_NAME = {"inplace": "torch.Tag.inplace", "out": "torch.Tag.out"}

# String annotations without a module prefix mean what torch says they mean.
_ANNOTATION_NAMESPACE: dict[str, Any] = {
    "Tensor": torch.Tensor,
    "device": torch.device,
    "dtype": torch.dtype,
    "types": torch.types,
    "Optional": typing.Optional,
    "List": typing.List,  # noqa: UP006
    "Sequence": typing.Sequence,
    "Union": typing.Union,
    "Tuple": typing.Tuple,  # noqa: UP006
    "torch": torch,
    "typing": typing,
}


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
        return self.qualname.split("::", 1)[1]

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


def _resolve(annotation: Any, fn: Callable[..., Any], error: Callable[[str], Any]) -> Any:
    """Evaluate a postponed (string) annotation the way 2.13's infer_schema does."""
    if isinstance(annotation, str):
        namespace = dict(_ANNOTATION_NAMESPACE)
        namespace.update(getattr(fn, "__globals__", {}))
        try:
            return eval(annotation, namespace)  # noqa: S307 - annotations are code by definition
        except NameError as e:
            error(
                f"Unsupported type annotation {annotation}. It is not a type. ({e}). "
                "If you are using 'from __future__ import annotations', note that "
                "annotations are evaluated lazily as strings; make sure all types "
                "referenced in annotations are importable at module scope, not only "
                "inside a local function."
            )
        except Exception as e:  # noqa: BLE001 - reported to the user verbatim
            error(f"Unsupported type annotation {annotation}. It is not a type. ({type(e).__name__}: {e})")
    origin = typing.get_origin(annotation)
    if origin is not None and any(isinstance(a, str) for a in typing.get_args(annotation)):
        args = tuple(_resolve(a, fn, error) for a in typing.get_args(annotation))
        if origin is typing.Union:
            return typing.Union[args]
        return typing.cast(Any, origin)[args]
    return annotation


def _normalize(annotation: Any, *, list_as: Any = typing.List) -> Any:  # noqa: UP006
    """Spell builtin generics the way every release's type table does.

    Older releases list only ``typing.List[int]`` / ``typing.Optional[...]``
    (2.2/2.3: only ``typing.Sequence[int]``, hence ``list_as``); ``list[int]``,
    ``collections.abc.Sequence[int]`` and ``int | None`` mean the same.
    """
    origin = typing.get_origin(annotation)
    if origin is None:
        return annotation
    args: Any = tuple(_normalize(a, list_as=list_as) for a in typing.get_args(annotation))
    generic: Any = {list: list_as, collections.abc.Sequence: typing.Sequence}.get(origin)
    if origin in (typing.Union, types.UnionType):
        generic = typing.Union
    return generic[args] if generic is not None else annotation


def _default_repr(name: str, value: Any, error: Callable[[str], Any]) -> str:
    if value is None or isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, (str, torch.device)):
        return f'"{value}"'
    if isinstance(value, torch.dtype):
        return str(value)[len("torch.") :]
    error(
        f"Parameter {name} has an unsupported default value type {type(value)}. "
        "Please file an issue on GitHub so we can prioritize this."
    )
    raise AssertionError("unreachable")


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


def infer_signature(
    fn: Callable[..., Any],
    qualname: str,
    kind: Kind,
    mutates_args: str | Sequence[str],
) -> OpSignature:
    """Infer the op's signature from ``fn``'s annotations, with 2.13's checks.

    Raises the same ``ValueError``s, in the same order, as 2.13's
    ``torch.library.infer_schema(fn, mutates_args=..., tags=<kind tag>)``.
    """
    sig = inspect.signature(fn)
    tag = _TAG_NAME[kind]

    def error(what: str) -> typing.NoReturn:
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

    if isinstance(mutates_args, str):
        if mutates_args != "unknown":
            raise ValueError(
                "mutates_args must either be a sequence of the names of "
                "the arguments that are mutated or the string 'unknown'. "
            )
        mutates: str | tuple[str, ...] = "unknown"
    else:
        mutates = tuple(mutates_args)

    supported = caps.schema_param_types
    params: list[Param] = []
    first_positional: tuple[str, str] | None = None  # (name, schema type)
    for idx, (name, p) in enumerate(sig.parameters.items()):
        if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            error("We do not support positional-only args, varargs, or varkwargs.")
        if p.annotation is inspect.Parameter.empty:
            error(f"Parameter {name} must have a type annotation.")
        annotation = _resolve(p.annotation, fn, error)
        if annotation not in supported:
            annotation = _normalize(annotation)
        if annotation not in supported:
            annotation = _normalize(annotation, list_as=typing.Sequence)  # 2.2/2.3 list only Sequence[...]
        if annotation not in supported:
            error(
                f"Parameter {name} has unsupported type {p.annotation}. "
                f"The valid types are: {supported.keys()}."
            )
        schema_type: str = supported[annotation]
        keyword_only = p.kind == inspect.Parameter.KEYWORD_ONLY
        if not keyword_only and first_positional is None:
            first_positional = (name, schema_type)
        mutated = (mutates == "unknown" and schema_type.startswith("Tensor")) or (
            mutates != "unknown" and name in mutates
        )
        if mutated and not schema_type.startswith("Tensor"):
            error(
                f"Parameter {name} is in mutable_args but only Tensors or collections "
                "of Tensors can be mutated"
            )
        text_type = f"Tensor(a{idx}!){schema_type[len('Tensor'):]}" if mutated else schema_type
        if kind == "out" and mutated:
            if not keyword_only:
                error("torch.Tag.out requires mutable arguments to be keyword-only.")
            if schema_type != "Tensor":
                error("torch.Tag.out only supports mutable keyword-only Tensor arguments.")
        text = f"{text_type} {name}"
        if p.default is not inspect.Parameter.empty:
            text += f"={_default_repr(name, p.default, error)}"
        params.append(Param(name, keyword_only, schema_type == "Tensor", mutated, text))

    if mutates != "unknown":
        missing = set(mutates) - set(sig.parameters)
        if missing:
            error(
                f"{missing} in mutates_args were not found in the custom op's signature. "
                "mutates_args should contain the names of all args that the custom op "
                "mutates, or just the string 'unknown' if you don't know."
            )
    if kind == "inplace":
        if first_positional is None:
            error(f"{tag} requires a positional Tensor argument.")
        if first_positional[1] != "Tensor":
            error(f"{tag} requires the first positional argument to be a Tensor.")
        if mutates == "unknown" or set(mutates) != {first_positional[0]}:
            error(f"{tag} requires mutates_args to contain exactly the first positional argument, got {mutates}.")
    outs = [p.name for p in params if p.mutated]
    if kind == "out" and not outs:
        error(f"{tag} requires at least one mutable keyword-only Tensor argument.")

    ret = _resolve(sig.return_annotation, fn, error)
    if kind == "out":
        ret = _normalize(ret)
        if len(outs) == 1:
            matches = ret is torch.Tensor
        else:
            matches = typing.get_origin(ret) is tuple and typing.get_args(ret) == (torch.Tensor,) * len(outs)
        if not matches:
            error(f"{tag} requires the return annotation to match the mutable keyword-only Tensor arguments {tuple(outs)}.")
    elif ret is inspect.Parameter.empty:  # older releases word this one differently
        error("No return type annotation was provided. Please add one.")
    elif ret is None or ret is type(None) or caps.parse_return(_normalize(ret), error) != "Tensor":
        # (2.2/2.3's parse_return refuses None itself, with other words)
        error(f"{tag} requires the return annotation to be torch.Tensor.")
    return OpSignature(qualname, kind, tuple(params), sig)


def signature_from_schema(fn: Callable[..., Any], qualname: str, kind: Kind, schema: str) -> OpSignature:
    """Build the signature from an explicit ``schema=`` string, checked like 2.13 does."""
    name = qualname.split("::", 1)[1]
    # custom_op-style "(Tensor(a!) x) -> Tensor(a!)", or with the op's name in front
    text = f"{name}{schema.strip()}" if schema.lstrip().startswith("(") else schema.strip()
    parsed = torch._C.parse_schema(text)
    _check_tagged_schema(parsed, kind)
    # Keep each argument's own text, so the fallback schema says what the user wrote.
    arg_list = text[text.index("(") + 1 : text.rindex(")", 0, text.index("->"))]
    texts = [t.strip() for t in _split_top_level(arg_list) if t.strip() != "*"]
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


def _check_tagged_schema(schema: Any, kind: Kind) -> None:
    """2.13's ``Library.define`` checks of a tagged schema, with its messages."""
    args = list(schema.arguments)
    mutable = [a for a in args if a.alias_info is not None and a.alias_info.is_write]
    if kind == "out":
        if not mutable:
            raise ValueError(f"Schema tagged with torch.Tag.out must have at least one mutable argument. Got: {schema}")
        positional = [a.name for a in mutable if not a.kwarg_only]
        if positional:
            raise ValueError(
                "Schema tagged with torch.Tag.out requires all mutable arguments to be "
                f"keyword-only (after the *). Found mutable positional args: {positional}. Got: {schema}"
            )
        unsupported = [a.name for a in mutable if not isinstance(a.type, torch.TensorType)]
        if unsupported:
            raise ValueError(
                "Schema tagged with torch.Tag.out only supports Tensor mutable arguments. "
                f"Found unsupported mutable args: {unsupported}. Got: {schema}"
            )
        if len(schema.returns) != len(mutable):
            raise ValueError(
                "Schema tagged with torch.Tag.out must return all mutable arguments "
                f"(got {len(mutable)} mutable args but {len(schema.returns)} returns). Got: {schema}"
            )
        for i, (ret, arg) in enumerate(zip(schema.returns, mutable, strict=True)):
            if ret.alias_info is None or not ret.alias_info.is_write or (
                ret.alias_info.before_set != arg.alias_info.before_set
            ):
                raise ValueError(
                    f"Return {i} of schema tagged with torch.Tag.out must alias mutable arg "
                    f"'{arg.name}'. Got: {schema}"
                )
        return
    if not args or args[0].kwarg_only:
        raise ValueError(f"Schema tagged with torch.Tag.inplace must have at least one positional argument. Got: {schema}")
    first = args[0]
    if first.alias_info is None or not first.alias_info.is_write:
        raise ValueError(
            "Schema tagged with torch.Tag.inplace requires the first positional argument "
            f"to be mutable (e.g., Tensor(a!)). Got: {schema}"
        )
    if not isinstance(first.type, torch.TensorType):
        raise ValueError(
            "Schema tagged with torch.Tag.inplace requires the first positional argument "
            f"to be a Tensor. Got type '{first.type}' for arg '{first.name}'. Got: {schema}"
        )
    rets = schema.returns
    if len(rets) != 1:
        raise ValueError(
            "Schema tagged with torch.Tag.inplace must return exactly one value "
            f"(the first argument). Got {len(rets)} returns. Got: {schema}"
        )
    ret = rets[0]
    if (
        not isinstance(ret.type, torch.TensorType)
        or ret.alias_info is None
        or not ret.alias_info.is_write
        or ret.alias_info.before_set != first.alias_info.before_set
    ):
        raise ValueError(
            "Schema tagged with torch.Tag.inplace must return the first mutable argument "
            f"(return must alias the first argument). Got: {schema}"
        )
    if len(mutable) > 1:
        raise ValueError(
            "Schema tagged with torch.Tag.inplace must only mutate the first argument. "
            f"Got: {schema}"
        )
