"""The definition-time contract of tagged ops: torch 2.13's own rules, or their backport.

One source of truth for every definition error. Where the installed torch has
the tag-aware checks, tagged_ops calls them; elsewhere each backport sits right
beside its probe, named as upstream names it, and raises 2.13's exception type
with 2.13's full sentence, branch for branch:

* :func:`infer_schema`: ``torch.library.infer_schema(fn, mutates_args=, tags=)``
  (2.13+), which infers ``(Tensor(a0!) x) -> Tensor(a0!)`` or
  ``(Tensor x, *, Tensor(a1!) out) -> Tensor(a1!)`` and refuses other shapes;
* :func:`_validate_inplace_schema`, :func:`_validate_out_schema`: what
  ``Library.define(schema, tags=...)`` checks of a hand-written schema (2.13+);
* :func:`validate_custom_op_schema`: what ``custom_op`` adds on top (no
  keyword-only Tensors except an out= op's; ``mutates_args`` matches ``schema=``).

Types are resolved here rather than by torch on older releases, because torch
2.4's own inference rejects postponed (string) annotations.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from typing import Any, Callable, Sequence

import torch

from . import _capabilities as caps

__all__ = ["_validate_inplace_schema", "_validate_out_schema", "infer_schema", "validate_custom_op_schema"]

Schema = Any  # torch._C.FunctionSchema


# -- Library.define(schema, tags=torch.Tag.inplace / torch.Tag.out) ------------------

if caps.SCHEMA_VALIDATORS:
    _validate_inplace_schema: Callable[[str | Schema], None] = torch.library._validate_inplace_schema
    _validate_out_schema: Callable[[str | Schema], None] = torch.library._validate_out_schema
else:

    def _parsed(schema: str | Schema) -> Any:
        return torch._C.parse_schema(schema) if isinstance(schema, str) else schema

    def _is_write(arg: Any) -> bool:
        return arg.alias_info is not None and bool(arg.alias_info.is_write)

    def _validate_out_schema(schema: str | Schema) -> None:  # type: ignore[misc]
        """Backport of 2.13's check that ``schema`` may carry ``torch.Tag.out``."""
        schema = _parsed(schema)
        what = "Schema tagged with torch.Tag.out"
        mutable = [a for a in schema.arguments if _is_write(a)]
        if not mutable:
            raise ValueError(f"{what} must have at least one mutable argument. Got: {schema}")
        positional = [a.name for a in mutable if not a.kwarg_only]
        if positional:
            raise ValueError(
                f"{what} requires all mutable arguments to be keyword-only (after the *). "
                f"Found mutable positional args: {positional}. Got: {schema}"
            )
        not_tensors = [a.name for a in mutable if not isinstance(a.type, torch.TensorType)]
        if not_tensors:
            raise ValueError(
                f"{what} only supports Tensor mutable arguments. Found unsupported mutable args: {not_tensors}. "
                f"Got: {schema}"
            )
        if len(schema.returns) != len(mutable):
            raise ValueError(
                f"{what} must return all mutable arguments "
                f"(got {len(mutable)} mutable args but {len(schema.returns)} returns). Got: {schema}"
            )
        for i, (ret, arg) in enumerate(zip(schema.returns, mutable, strict=True)):
            if ret.alias_info is None:
                raise ValueError(
                    f"Return {i} of schema tagged with torch.Tag.out must alias mutable arg '{arg.name}'. Got: {schema}"
                )
            if not ret.alias_info.is_write:
                raise ValueError(
                    f"Return {i} of schema tagged with torch.Tag.out must be a mutable alias "
                    f"(e.g., Tensor(a!), not Tensor(a)) of arg '{arg.name}'. Got: {schema}"
                )
            if ret.alias_info.before_set != arg.alias_info.before_set:
                raise ValueError(
                    f"Return {i} of schema tagged with torch.Tag.out must alias mutable arg '{arg.name}' "
                    f"(return aliases {ret.alias_info.before_set} but arg aliases {arg.alias_info.before_set}). "
                    f"Got: {schema}"
                )

    def _validate_inplace_schema(schema: str | Schema) -> None:  # type: ignore[misc]
        """Backport of 2.13's check that ``schema`` may carry ``torch.Tag.inplace``."""
        schema = _parsed(schema)
        what = "Schema tagged with torch.Tag.inplace"
        args = schema.arguments
        if not args or args[0].kwarg_only:
            raise ValueError(f"{what} must have at least one positional argument. Got: {schema}")
        first = args[0]
        if not _is_write(first):
            raise ValueError(
                f"{what} requires the first positional argument to be mutable (e.g., Tensor(a!)). Got: {schema}"
            )
        if not isinstance(first.type, torch.TensorType):
            raise ValueError(
                f"{what} requires the first positional argument to be a Tensor. "
                f"Got type '{first.type}' for arg '{first.name}'. Got: {schema}"
            )
        if len(schema.returns) != 1:
            raise ValueError(
                f"{what} must return exactly one value (the first argument). "
                f"Got {len(schema.returns)} returns. Got: {schema}"
            )
        ret = schema.returns[0]
        must = f"{what} must return the first mutable argument"
        if not isinstance(ret.type, torch.TensorType):
            raise ValueError(f"{must} (return must be a Tensor, got type '{ret.type}'). Got: {schema}")
        if ret.alias_info is None:
            raise ValueError(f"{must} (return must alias the first argument). Got: {schema}")
        if not ret.alias_info.is_write:
            raise ValueError(f"{must} (return must be a mutable alias, e.g., Tensor(a!)). Got: {schema}")
        if ret.alias_info.before_set != first.alias_info.before_set:
            raise ValueError(
                f"{must} (return aliases {ret.alias_info.before_set} but first arg aliases "
                f"{first.alias_info.before_set}). Got: {schema}"
            )
        others = [a.name for a in args[1:] if _is_write(a)]
        if others:
            raise ValueError(
                f"{what} must only mutate the first positional argument. Found additional mutable args: {others}. "
                f"Got: {schema}"
            )


# -- custom_op's own checks on top of the schema ---------------------------------


def refuse_keyword_only_tensors(schema_str: str, kind: caps.Kind) -> None:
    """custom_op's first check of a schema: keyword-only Tensors belong to out= ops only."""
    parsed = torch._C.parse_schema(schema_str)
    if kind != "out" and any(
        a.kwarg_only and (caps.is_tensor_like_type(a.type) or caps.is_tensorlist_like_type(a.type))
        for a in parsed.arguments
    ):
        raise NotImplementedError(
            f"custom_op with kwarg-only Tensor args. Please make your tensors not kwarg-only. Got: {schema_str}"
        )


def validate_custom_op_schema(schema_str: str, kind: caps.Kind, mutates_args: Any, schema: str | None) -> None:
    """What ``torch.library.custom_op(name, ..., tags=, schema=)`` checks beyond ``Library.define``.

    ``schema_str`` is the op's ``"<name>(<args>) -> <returns>"``; ``mutates_args``
    and ``schema`` are what the user passed (``mutates_args`` given together with
    ``schema=`` must name its mutable arguments). Same exception types and words
    as 2.13's ``custom_op``, on every release.
    """
    parsed = torch._C.parse_schema(schema_str)
    refuse_keyword_only_tensors(schema_str, kind)
    if schema is not None and mutates_args is not None:
        expected = {a.name for a in parsed.arguments if a.alias_info is not None and a.alias_info.is_write}
        if expected != set(mutates_args):
            raise ValueError(
                f"Attempted to create a custom op with `mutates_args={mutates_args}` "
                f"and `schema={schema}. The schema suggests that the op mutates {expected}"
                f"which is different from what was provided to us in `mutates_args`. "
                f"Please make these consistent."
            )


# -- torch.library.infer_schema(fn, mutates_args=, tags=) ----------------------------

if caps.NATIVE_TAGS:  # torch.library.infer_schema takes tags=

    def infer_schema(fn: Callable[..., Any], /, *, mutates_args: str | Sequence[str], kind: caps.Kind) -> str:
        """``torch.library.infer_schema(fn, mutates_args=..., tags=<kind's tag>)``."""
        return torch.library.infer_schema(fn, mutates_args=mutates_args, tags=caps.tag_for(kind))  # type: ignore[call-arg,no-any-return]

else:

    def infer_schema(fn: Callable[..., Any], /, *, mutates_args: str | Sequence[str], kind: caps.Kind) -> str:  # type: ignore[misc]
        """Backport of 2.13's ``infer_schema(fn, mutates_args=..., tags=<kind's tag>)``.

        Same checks in the same order, same ``ValueError`` text; built on the
        installed torch's own annotation table (``caps.supported_param_types()``).
        """
        sig = inspect.signature(fn)
        tag = caps.TAG_NAMES[kind]

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

        supported = caps.supported_param_types()
        params: list[str] = []
        star = False
        first_positional: tuple[str, str, str] | None = None  # (name, schema type, alias)
        outs: list[tuple[str, str]] = []  # (name, alias)
        for idx, (name, p) in enumerate(sig.parameters.items()):
            if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
                error("We do not support positional-only args, varargs, or varkwargs.")
            keyword_only = p.kind == inspect.Parameter.KEYWORD_ONLY
            if keyword_only and not star:
                params.append("*")
                star = True
            if p.annotation is inspect.Parameter.empty:
                error(f"Parameter {name} must have a type annotation.")
            annotation = _resolve(p.annotation, fn, error)
            if annotation not in supported:
                annotation = _normalize(annotation)
            if annotation not in supported:
                annotation = _normalize(annotation, list_as=typing.Sequence)  # 2.2/2.3 list only Sequence[...]
            if annotation not in supported:
                error(f"Parameter {name} has unsupported type {p.annotation}. The valid types are: {supported.keys()}.")
            schema_type: str = supported[annotation]
            if not keyword_only and first_positional is None:
                first_positional = (name, schema_type, f"a{idx}")
            mutated = (mutates == "unknown" and schema_type.startswith("Tensor")) or (
                mutates != "unknown" and name in mutates
            )
            if mutated:
                if not schema_type.startswith("Tensor"):
                    error(
                        f"Parameter {name} is in mutable_args but only Tensors or collections of Tensors can be mutated"
                    )
                schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor') :]}"
            if kind == "out" and mutated:
                if not keyword_only:
                    error("torch.Tag.out requires mutable arguments to be keyword-only.")
                if schema_type != f"Tensor(a{idx}!)":
                    error("torch.Tag.out only supports mutable keyword-only Tensor arguments.")
                outs.append((name, f"a{idx}"))
            text = f"{schema_type} {name}"
            if p.default is not inspect.Parameter.empty:
                text += f"={_default_repr(name, p.default, error)}"
            params.append(text)

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
        if kind == "out" and not outs:
            error(f"{tag} requires at least one mutable keyword-only Tensor argument.")

        ret_annotation = _resolve(sig.return_annotation, fn, error)
        if kind == "out":
            ret_annotation = _normalize(ret_annotation)
            if len(outs) == 1:
                matches = ret_annotation is torch.Tensor
            else:
                matches = typing.get_origin(ret_annotation) is tuple and typing.get_args(ret_annotation) == (
                    (torch.Tensor,) * len(outs)
                )
            if not matches:
                names = tuple(n for n, _ in outs)
                error(
                    f"{tag} requires the return annotation to match the mutable keyword-only Tensor arguments {names}."
                )
            aliased = [f"Tensor({alias}!)" for _, alias in outs]
            ret = aliased[0] if len(aliased) == 1 else f"({', '.join(aliased)})"
        else:
            if ret_annotation is inspect.Parameter.empty:  # older releases word this one differently
                error("No return type annotation was provided. Please add one.")
            # 2.2/2.3's parse_return refuses None itself, with other words
            if (
                ret_annotation is None
                or ret_annotation is type(None)
                or caps.parse_return(_normalize(ret_annotation), error) != "Tensor"
            ):
                error(f"{tag} requires the return annotation to be torch.Tensor.")
            assert first_positional is not None
            ret = f"Tensor({first_positional[2]}!)"
        return f"({', '.join(params)}) -> {ret}"

    def _resolve(annotation: Any, fn: Callable[..., Any], error: Callable[[str], Any]) -> Any:
        """Evaluate a postponed (string) annotation the way 2.13's infer_schema does: in the function's globals."""
        if isinstance(annotation, str):
            try:
                return eval(annotation, getattr(fn, "__globals__", {}))  # noqa: S307 - annotations are code by definition
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
            return _scalar_type_default(value)
        error(
            f"Parameter {name} has an unsupported default value type {type(value)}. "
            "Please file an issue on GitHub so we can prioritize this."
        )
        raise AssertionError("unreachable")

    # c10::ScalarType's numbering, which every schema parser reads. Older parsers
    # (before 2.13) know only a few dtype names as defaults ("float", "long"), so
    # 2.13's "float32" is written as its number there: the same default.
    _SCALAR_TYPE_ORDER = (
        "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
        "complex32", "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16",
    )  # fmt: skip

    def _scalar_type_default(dtype: torch.dtype) -> str:
        name = str(dtype)[len("torch.") :]
        try:
            torch._C.parse_schema(f"f(ScalarType t={name}) -> ()")
            return name
        except RuntimeError:
            for number, candidate in enumerate(_SCALAR_TYPE_ORDER):
                if getattr(torch, candidate, None) == dtype:
                    return str(number)
            raise
