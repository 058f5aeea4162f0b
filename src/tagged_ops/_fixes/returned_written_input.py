"""Keeps each compiled output in its own slot when a graph returns an input it writes (2.4-2.13).

AOTAutograd's functionalized trace hands back an input that the graph writes in place
and returns (``return y, x.add_(1)``; ``torch.add(a, b, out=x)``) as the input itself,
to save a copy. It finds that output's slot by its index among the user's outputs, but
the trace's outputs start with the inputs whose writes are replayed outside the graph
(a leaf that requires grad, written through ``.detach()``): with one such input, the
input lands in the slot before its own and the output there is lost. A training step
``wd = w.detach(); <write wd>; y = x * 2; return y, x.add_(1)`` returned the new ``x``
as ``y``, silently; ATen's ops alone do it. Measured wrong on 2.4.1, 2.5.1 and 2.13.0;
right on 2.2.2 (which returns a copy) and 2.15.0 (which offsets the slot).

The fix: where the trace's outputs start with such inputs, torch's helper sees those
returned inputs as ordinary outputs, so it replaces nothing. The runtime hands the
input back for that output anyway (it never reads the graph's value there), so every
value is right; the graph keeps one buffer of the input's size that it could have
saved. Inert where torch places such inputs right (2.15) or never places them (2.2):
:func:`.._compat_compiler.aot_misplaces_returned_written_inputs`. Installed at the
first trace of a tagged op, once AOTAutograd's graph capture is imported. Canary:
tests/fixes/test_returned_written_input.py::test_canary_a_returned_written_input_takes_another_outputs_slot.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from .. import _compat_compiler
from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op

#: Where AOTAutograd calls ``create_functionalized_fn`` (the first on 2.2.2-2.5.1, the second on 2.13.0-2.15.0).
CALLERS = (
    "torch._functorch._aot_autograd.dispatch_and_compile_graph",
    "torch._functorch._aot_autograd.graph_capture",
)


def at_first_trace(op: Op) -> None:
    for name in CALLERS:
        if importlib.util.find_spec(name) is not None:
            when_imported(name, _install)


def _install(module: ModuleType) -> None:
    original = getattr(module, "create_functionalized_fn", None)
    if original is not None and _compat_compiler.aot_misplaces_returned_written_inputs(original):
        wrap_once(module, "create_functionalized_fn", _in_own_slots)


def _in_own_slots(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def create_functionalized_fn(*args: Any, **kwargs: Any) -> Any:
        meta = kwargs.get("meta")
        replayed: int = getattr(meta, "num_mutated_inp_runtime_indices", 0)  # inputs written outside the graph
        if replayed:
            hidden = _returned_written_inputs_hidden(meta)
            if hidden is not None:
                kwargs["meta"] = _Seen(meta, hidden)
        return original(*args, **kwargs)

    return create_functionalized_fn


def _returned_written_inputs_hidden(meta: Any) -> list[Any] | None:
    """``meta.output_info`` with each returned input that the graph writes shown as a plain output
    (None: there is none)."""
    schemas = importlib.import_module("torch._functorch._aot_autograd.schemas")
    is_input, plain, in_graph = (
        schemas.OutputType.is_input,
        schemas.OutputType.non_alias,
        schemas.MutationType.MUTATED_IN_GRAPH,
    )
    shown = [
        dataclasses.replace(info, output_type=plain, base_idx=None)
        if info.output_type == is_input and meta.input_info[info.base_idx].mutation_type == in_graph
        else info
        for info in meta.output_info
    ]
    return shown if any(a is not b for a, b in zip(shown, meta.output_info, strict=True)) else None


class _Seen:
    """``meta`` as torch's helper reads it, but for ``output_info``; writes go to ``meta``."""

    def __init__(self, meta: Any, output_info: list[Any]) -> None:
        object.__setattr__(self, "_meta", meta)
        object.__setattr__(self, "output_info", output_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meta, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._meta, name, value)
