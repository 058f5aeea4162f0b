"""The capability probe: the one place that knows what the installed torch can do.

Every version-specific decision in tagged_ops asks this module a question.
Features are detected, never inferred from version strings: 2.10-2.12 ship a
``torch.Tag.out_variant`` that is *not* the 2.13 ``torch.Tag.out``, and local or
nightly builds (``2.13.0+cpu``, ``2.14.0a0+git...``) defeat string comparisons.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Callable

import torch

__all__ = [
    "FALLBACK_ENV_VAR",
    "NATIVE_TAGS",
    "any_requires_grad",
    "bump_versions",
    "fallback_forced",
    "has_custom_op_method",
    "is_dynamo_compiling",
    "is_exporting",
    "opcheck_accepts_tolerances",
    "separate_fallback_compile_caches",
    "use_native_tags",
]

FALLBACK_ENV_VAR = "TAGGED_OPS_FALLBACK"


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


def _probe_native_tags() -> bool:
    # The 2.13 feature is three things at once: the two tags, tag-aware schema
    # inference, and tag-aware registration. Tag.out_variant (2.10-2.12) has none
    # of the semantics and must not count.
    tag = torch.Tag
    if not (hasattr(tag, "inplace") and hasattr(tag, "out")):
        return False
    infer_schema = getattr(torch.library, "infer_schema", None)
    if infer_schema is None or not _accepts_keyword(infer_schema, "tags"):
        return False
    return _accepts_keyword(torch.library.Library.define, "tags")


#: The installed torch has native tagged mutable custom ops (``torch.Tag.inplace``
#: and ``torch.Tag.out`` with tag-aware schema inference and registration).
NATIVE_TAGS: bool = _probe_native_tags()


def fallback_forced() -> bool:
    """``TAGGED_OPS_FALLBACK=1`` asks for the fallback even where native tags exist.

    Read when an op is defined, so a test suite can flip it between definitions.
    """
    return os.environ.get(FALLBACK_ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def use_native_tags() -> bool:
    """Whether an op defined now should be registered with native tags."""
    return NATIVE_TAGS and not fallback_forced()


_FALLBACK_CACHE_MARK = "tagged_ops-fallback"


def separate_fallback_compile_caches() -> None:
    """Keep code compiled for forced-fallback ops out of the native ops' cache entries.

    Inductor's on-disk caches key a graph by its text, which names the op
    (``torch.ops.ns.name.default``) but not its schema. On a torch with native
    tags, the same name compiled once tagged and once untagged (forced fallback)
    would share an entry, and the second program would run the first one's code
    (2.13: ``TypeError: expected Tensor() for op``). The compile cache key tag
    is part of every such key, so forced-fallback processes get their own.
    """
    config = getattr(torch.compiler, "config", None)
    tag = getattr(config, "cache_key_tag", None)
    if tag is None:
        return  # no such key on this release: no release without it has native tags
    if _FALLBACK_CACHE_MARK not in tag:
        config.cache_key_tag = f"{tag}:{_FALLBACK_CACHE_MARK}" if tag else _FALLBACK_CACHE_MARK  # type: ignore[union-attr]


_CUSTOM_OP_DEF: Any = getattr(getattr(torch, "_library", None), "custom_ops", None)
_CUSTOM_OP_DEF = getattr(_CUSTOM_OP_DEF, "CustomOpDef", None)


def has_custom_op_method(name: str) -> bool:
    """Whether torch's own ``CustomOpDef`` has ``register_<name>`` on this release.

    The handle offers the same optional registration methods as torch does, so a
    method the installed torch lacks is absent rather than broken.
    """
    return _CUSTOM_OP_DEF is not None and hasattr(_CUSTOM_OP_DEF, name)


def opcheck_accepts_tolerances() -> bool:
    """``torch.library.opcheck(..., atol=, rtol=)`` exists (newer releases only)."""
    return _accepts_keyword(torch.library.opcheck, "atol")


_is_exporting_fn: Callable[[], bool] | None = getattr(torch.compiler, "is_exporting", None)


def is_exporting() -> bool:
    """True while ``torch.export`` traces; False where torch cannot tell us."""
    return bool(_is_exporting_fn()) if _is_exporting_fn is not None else False


def _probe_bump_versions() -> Callable[[tuple[torch.Tensor, ...]], None]:
    # Kernels that write through numpy bypass the version counter, so we bump it.
    # torch._C._increment_version takes one tensor on older releases and a
    # sequence of tensors on newer ones; probe which, call it directly (hot path).
    raw = torch._C._increment_version
    probe = torch.zeros(1)
    try:
        raw((probe,))
    except (TypeError, RuntimeError):  # 2.4: "increment_version expect a Tensor as input"

        def bump_each(tensors: tuple[torch.Tensor, ...]) -> None:
            for t in tensors:
                raw(t)

        return bump_each
    return raw  # type: ignore[no-any-return]


#: Bump the version counter of every tensor in a tuple.
bump_versions: Callable[[tuple[torch.Tensor, ...]], None] = _probe_bump_versions()

_any_requires_grad_c: Callable[..., bool] | None = getattr(torch._C, "_any_requires_grad", None)


def _any_requires_grad_py(*args: Any, **kwargs: Any) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            if a.requires_grad:
                return True
        elif isinstance(a, (list, tuple)) and any(isinstance(t, torch.Tensor) and t.requires_grad for t in a):
            return True
    return False


#: Whether any Tensor among the arguments requires grad (C++ where torch has it).
any_requires_grad: Callable[..., bool] = _any_requires_grad_c or _any_requires_grad_py

#: True only while Dynamo traces (it constant-folds this call); a plain
#: function returning False in eager, so the hot path pays next to nothing.
is_dynamo_compiling: Callable[[], bool] = getattr(torch.compiler, "is_dynamo_compiling", None) or torch.compiler.is_compiling
