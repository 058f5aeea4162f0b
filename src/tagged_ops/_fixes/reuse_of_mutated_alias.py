"""Keeps Inductor from reusing a written view's alias, which owns no memory, as a new buffer (2.3).

A direct ``torch.ops`` call of a mutating op on a view with a storage offset
(``op_(x[1:], ...)``) becomes, in Inductor's IR, a ``MutationOutput``: an alias of the
written tensor. 2.3.1's scheduler let the next kernel take it over in place, allocated
it at its own view size (the offset dropped) and wrote the larger result into it: a
heap overflow that aborts the process ("free(): invalid next size") or corrupts memory
silently. Raw classic ops too. Measured on 2.3.1; 2.2.2 lowers no direct call, and
2.4.1-2.7.1, 2.9.1, 2.12.1, 2.13.0 and 2.15.0 never offer the alias for reuse.

The fix: a ``MutationOutput`` is never reused (it owns no memory to give). Installed at
the first trace of a tagged op, once Inductor's wrapper codegen is imported; on a torch
that never offers the alias it changes nothing. Canary:
tests/test_compile_right_by_default.py::test_canary_inductor_reuses_a_mutated_alias (fails on a
release whose raw ops answer otherwise than tests/fixes/_confined.py lists; the fix retires
with the last listed release).
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op


def at_first_trace(op: Op) -> None:
    when_imported("torch._inductor.codegen.wrapper", _install)


def _install(module: ModuleType) -> None:
    # WrapperCodeGen on older releases (2.3.1, 2.4.1), PythonWrapperCodegen on newer (2.13.0);
    # the C++ wrappers inherit the method
    codegen = getattr(module, "PythonWrapperCodegen", None) or getattr(module, "WrapperCodeGen", None)
    alias = getattr(importlib.import_module("torch._inductor.ir"), "MutationOutput", None)
    if codegen is not None and alias is not None:
        wrap_once(codegen, "can_reuse", functools.partial(_never_an_alias, alias=alias))


def _never_an_alias(original: Callable[..., bool], alias: type) -> Callable[..., bool]:
    @functools.wraps(original)
    def can_reuse(self: Any, input_buffer: Any, output_buffer: Any = None) -> bool:
        # the scheduler passes its own node (or buffer), the wrapper an IR buffer
        if isinstance(getattr(input_buffer, "node", input_buffer), alias):
            return False
        return original(self, input_buffer, output_buffer)

    return can_reuse
