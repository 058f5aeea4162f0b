"""Backport of torch 2.13's tag-aware schema inference and tagged-schema validation.

Beside the probe (``_compat``), in its shape: where the installed torch has the
tag-aware functions tagged_ops uses them, elsewhere the backport, named as upstream
names it and raising 2.13's exception type with 2.13's sentence, branch for branch:

* :func:`infer_schema`: ``torch.library.infer_schema(fn, mutates_args=, tags=)``
  (2.13+), which infers ``(Tensor(a0!) x) -> Tensor(a0!)`` or
  ``(Tensor x, *, Tensor(a1!) out) -> Tensor(a1!)`` and refuses other shapes;
* :func:`validate_inplace_schema`, :func:`validate_out_schema` (upstream's ``_validate_*``): what
  ``Library.define(schema, tags=...)`` checks of a hand-written schema (2.13+).

Types are resolved here rather than by torch on older releases, because torch
2.4's own inference rejects postponed (string) annotations.
"""

from __future__ import annotations

import collections.abc
import functools
import importlib
import inspect
import types
import typing
from types import GenericAlias
from typing import Any, Callable, Mapping, Sequence

import torch

from . import _compat

__all__ = ["infer_schema", "validate_inplace_schema", "validate_out_schema"]

Schema = Any  # torch._C.FunctionSchema


# -- torch.library._validate_inplace_schema / _validate_out_schema (2.13) ------------------
# Breakpoint: pytorch/pytorch#181099 / #180851 (Library.define validates tagged schemas).
# What Library.define(schema, tags=torch.Tag.inplace / torch.Tag.out) checks.

if hasattr(torch.library, "_validate_inplace_schema") and hasattr(torch.library, "_validate_out_schema"):
    validate_inplace_schema: Callable[[str | Schema], None] = torch.library._validate_inplace_schema
    validate_out_schema: Callable[[str | Schema], None] = torch.library._validate_out_schema
else:

    def _parsed(schema: str | Schema) -> Any:
        return _compat.parse_schema(schema) if isinstance(schema, str) else schema

    def _is_write(arg: Any) -> bool:
        return arg.alias_info is not None and bool(arg.alias_info.is_write)

    def validate_out_schema(schema: str | Schema) -> None:  # type: ignore[misc]
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

    def validate_inplace_schema(schema: str | Schema) -> None:  # type: ignore[misc]
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


# -- torch._library.infer_schema (2.4; torch._custom_op.impl before) ----------------
# Breakpoint: torch 2.4, with torch.library.custom_op (pytorch/pytorch#122344); 2.2/2.3 keep
# the same table in torch._custom_op.impl (the PR that moved it is not identified).


@functools.cache
def _schema_inference() -> Any:
    # The annotation -> schema-type table and return parsing behind custom_op's schema
    # inference, looked up on first use by the backport that needs them (releases
    # without native tags), so a torch that moves them still imports us.
    for name in ("torch._library.infer_schema", "torch._custom_op.impl"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "SUPPORTED_PARAM_TYPES") and hasattr(module, "parse_return"):
            return module
    raise ImportError(
        f"tagged_ops: torch {torch.__version__} has no custom-op schema inference where tagged_ops looks for it "
        "(torch._library.infer_schema.SUPPORTED_PARAM_TYPES / parse_return); see docs/SUPPORT.md"
    )


def supported_param_types() -> Mapping[Any, str]:
    """Annotation -> schema type, as torch's own schema inference accepts them."""
    return _schema_inference().SUPPORTED_PARAM_TYPES  # type: ignore[no-any-return]


def _parse_return_as_installed(annotation: Any, error_fn: Callable[[str], Any]) -> str:
    """torch's own return-type parsing: the schema text of ``annotation``."""
    return _schema_inference().parse_return(annotation, error_fn)  # type: ignore[no-any-return]


# -- torch.library.infer_schema(fn, mutates_args=, tags=) ----------------------------

if _compat.NATIVE_TAGS:  # torch.library.infer_schema takes tags=

    def infer_schema(fn: Callable[..., Any], /, *, mutates_args: str | Sequence[str], kind: str) -> str:
        """``torch.library.infer_schema(fn, mutates_args=..., tags=<kind's tag>)``; ``kind``: "inplace" or "out"."""
        return torch.library.infer_schema(fn, mutates_args=mutates_args, tags=getattr(torch.Tag, kind))  # type: ignore[call-arg,no-any-return]

else:
    # Backport of torch 2.13.0's torch/_library/infer_schema.py (git
    # cf30153c4c131c8164ee7798e5022d810682e2cb): ``infer_schema``, ``parse_return``'s
    # first lines, ``_infer_out_return_schema`` and ``supported_param``, with upstream's
    # names, order and split, so the two diff line for line. Each departure says
    # "tagged_ops:" and why. Left out: ``op_name=``; opaque and ScriptObject types and
    # the Tuple-parameter hint (their branches read names older releases lack: such a
    # parameter gets the plain "unsupported type" sentence); ``tags=``, which ``kind`` stands for.

    def infer_schema(  # type: ignore[misc]
        prototype_function: Callable[..., Any], /, *, mutates_args: str | Sequence[str], kind: str
    ) -> str:
        """Backport of 2.13's ``infer_schema(fn, mutates_args=..., tags=<kind's tag>)``.

        Same checks in the same order, same ``ValueError`` text; built on the
        installed torch's own annotation table (``supported_param_types()``).
        """
        UNKNOWN_MUTATES = "unknown"
        pf_globals = getattr(prototype_function, "__globals__", {})  # tagged_ops: any callable
        pf_locals = None
        sig = inspect.signature(prototype_function)
        is_inplace = kind == "inplace"  # tagged_ops: ``kind`` stands for upstream's tags=
        is_out = kind == "out"
        if type(mutates_args) is not str:
            mutates_args = tuple(mutates_args)

        def error_fn(what: str) -> typing.NoReturn:
            raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

        def convert_type_string(annotation_type: str) -> Any:
            try:
                return eval(annotation_type, pf_globals, pf_locals)  # noqa: S307 - annotations are code
            except NameError as e:
                error_fn(
                    f"Unsupported type annotation {annotation_type}. It is not a type. "
                    f"({e}). "
                    f"If you are using 'from __future__ import annotations', note that "
                    f"annotations are evaluated lazily as strings; make sure all types "
                    f"referenced in annotations are importable at module scope, not only "
                    f"inside a local function."
                )
            except Exception as e:  # noqa: BLE001 - reported to the user verbatim
                error_fn(f"Unsupported type annotation {annotation_type}. It is not a type. ({type(e).__name__}: {e})")

        def unstringify_type(ty: Any) -> Any:
            # Dig through a generic type and if it contains a stringified type
            # convert that to a real type. tagged_ops: returns the type only; a Union
            # stays as written, since upstream's GenericAlias of one matches no table
            # entry (2.13 refuses ``Optional[list["int"]]``) and _normalize would match it.
            if isinstance(ty, str):
                return convert_type_string(ty)
            elif origin := typing.get_origin(ty):
                tys = typing.get_args(ty)
                args = tuple(unstringify_type(t) for t in tys)
                if any(a is not t for a, t in zip(args, tys, strict=True)):
                    return ty if origin is typing.Union else GenericAlias(origin, args)
            return ty

        params: list[str] = []
        seen_args = set()
        saw_kwarg_only_arg = False
        first_positional_arg_name = None
        first_positional_arg_schema_type = None
        first_positional_arg_alias = None
        out_arg_aliases: list[str] = []
        out_arg_names: list[str] = []
        SUPPORTED_PARAM_TYPES = supported_param_types()  # tagged_ops: this release's table
        for idx, (name, param) in enumerate(sig.parameters.items()):
            if not supported_param(param):
                error_fn("We do not support positional-only args, varargs, or varkwargs.")

            if param.kind == inspect.Parameter.KEYWORD_ONLY:
                # The first time we see a kwarg-only arg, add "*" to the schema.
                if not saw_kwarg_only_arg:
                    params.append("*")
                    saw_kwarg_only_arg = True

            if param.annotation is inspect.Parameter.empty:
                error_fn(f"Parameter {name} must have a type annotation.")

            # The annotation might be converted to a string by annotation,
            # we convert it to the actual type.
            annotation_type = unstringify_type(param.annotation)

            # tagged_ops: older tables spell builtin generics as typing's (see _normalize)
            schema_type = _lookup(annotation_type, SUPPORTED_PARAM_TYPES)
            if schema_type is None:
                error_fn(
                    f"Parameter {name} has unsupported type {param.annotation}. "
                    f"The valid types are: {SUPPORTED_PARAM_TYPES.keys()}."
                )

            if param.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and first_positional_arg_name is None:
                first_positional_arg_name = name
                first_positional_arg_schema_type = schema_type
                first_positional_arg_alias = f"a{idx}"

            is_mutated = False
            if type(mutates_args) is str:
                if mutates_args != UNKNOWN_MUTATES:
                    raise ValueError(
                        "mutates_args must either be a sequence of the names of "
                        "the arguments that are mutated or the string 'unknown'. "
                    )
                if schema_type.startswith("Tensor"):
                    is_mutated = True
                    schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor') :]}"
            elif name in mutates_args:
                is_mutated = True
                if not schema_type.startswith("Tensor"):
                    error_fn(
                        f"Parameter {name} is in mutable_args but only Tensors or collections of Tensors can be mutated"
                    )
                schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor') :]}"
            if is_out and is_mutated:
                if param.kind != inspect.Parameter.KEYWORD_ONLY:
                    error_fn("torch.Tag.out requires mutable arguments to be keyword-only.")
                if schema_type != f"Tensor(a{idx}!)":
                    error_fn("torch.Tag.out only supports mutable keyword-only Tensor arguments.")
                out_arg_aliases.append(f"a{idx}")
                out_arg_names.append(name)
            seen_args.add(name)
            if param.default is inspect.Parameter.empty:
                params.append(f"{schema_type} {name}")
            else:
                default_repr = None
                if param.default is None or isinstance(param.default, (int, float, bool)):
                    default_repr = str(param.default)
                elif isinstance(param.default, (str, torch.device)):
                    default_repr = f'"{param.default}"'
                elif isinstance(param.default, torch.dtype):
                    # tagged_ops: older parsers know few dtype names (_scalar_type_default)
                    default_repr = _scalar_type_default(param.default)
                else:
                    error_fn(
                        f"Parameter {name} has an unsupported default value type {type(param.default)}. "
                        f"Please file an issue on GitHub so we can prioritize this."
                    )
                params.append(f"{schema_type} {name}={default_repr}")
        if mutates_args != UNKNOWN_MUTATES:
            mutates_args_not_seen = set(mutates_args) - seen_args
            if len(mutates_args_not_seen) > 0:
                error_fn(
                    f"{mutates_args_not_seen} in mutates_args were not found in "
                    f"the custom op's signature. "
                    f"mutates_args should contain the names of all args that the "
                    f"custom op mutates, or just the string 'unknown' if you don't know."
                )
        if is_inplace:
            if first_positional_arg_name is None:
                error_fn("torch.Tag.inplace requires a positional Tensor argument.")
            if first_positional_arg_schema_type != "Tensor":
                error_fn("torch.Tag.inplace requires the first positional argument to be a Tensor.")
            if type(mutates_args) is str or set(mutates_args) != {first_positional_arg_name}:
                error_fn(
                    "torch.Tag.inplace requires mutates_args to contain exactly "
                    f"the first positional argument, got {mutates_args}."
                )
        if is_out and len(out_arg_aliases) == 0:
            error_fn("torch.Tag.out requires at least one mutable keyword-only Tensor argument.")
        return_annotation = unstringify_type(sig.return_annotation)
        if is_out:
            ret = _infer_out_return_schema(return_annotation, out_arg_aliases, out_arg_names, error_fn)
        else:
            ret = parse_return(return_annotation, error_fn)
        if is_inplace:
            if ret != "Tensor":
                error_fn("torch.Tag.inplace requires the return annotation to be torch.Tensor.")
            ret = f"Tensor({first_positional_arg_alias}!)"
        return f"({', '.join(params)}) -> {ret}"

    def parse_return(annotation: Any, error_fn: Callable[[str], Any]) -> str:
        # tagged_ops: 2.13's first two lines, then this release's parse_return, which
        # words both refusals differently (2.2/2.3 refuse None) and lists typing's spellings.
        if annotation is None:
            return "()"

        if annotation is inspect.Parameter.empty:
            error_fn("No return type annotation was provided. Please add one.")

        return _parse_return_as_installed(_normalize(annotation), error_fn)

    def _infer_out_return_schema(
        return_annotation: Any,
        out_arg_aliases: list[str],
        out_arg_names: list[str],
        error_fn: Callable[[str], Any],
    ) -> str:
        if len(out_arg_aliases) == 1:
            return_annotation_matches_out_args = return_annotation is torch.Tensor
        else:
            return_annotation_matches_out_args = typing.get_origin(return_annotation) is tuple and typing.get_args(
                return_annotation
            ) == (torch.Tensor,) * len(out_arg_aliases)

        if not return_annotation_matches_out_args:
            error_fn(
                "torch.Tag.out requires the return annotation to match the "
                f"mutable keyword-only Tensor arguments {tuple(out_arg_names)}."
            )

        aliased_returns = [f"Tensor({out_arg_alias}!)" for out_arg_alias in out_arg_aliases]
        if len(aliased_returns) == 1:
            return aliased_returns[0]
        return f"({', '.join(aliased_returns)})"

    def supported_param(param: inspect.Parameter) -> bool:
        return param.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        )

    def _lookup(annotation: Any, supported: Mapping[Any, str]) -> Any:
        """The schema type of ``annotation`` as 2.13 spells it, whichever spelling this release's table lists."""
        for spelling in (annotation, _normalize(annotation), _normalize(annotation, list_as=typing.Sequence)):
            if spelling in supported:
                return supported[spelling]
        return None

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
            _compat.parse_schema(f"f(ScalarType t={name}) -> ()")
            return name
        except RuntimeError:
            for number, candidate in enumerate(_SCALAR_TYPE_ORDER):
                if getattr(torch, candidate, None) == dtype:
                    return str(number)
            raise
