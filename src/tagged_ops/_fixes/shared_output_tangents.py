"""Gives each non-differentiable output of a compiled training step a tensor of its own (2.2-2.15).

AOTAutograd's compiled forward is an ``autograd.Function`` that marks the outputs which need
no gradient with ``ctx.mark_non_differentiable``, and autograd keys that mark on the tensor,
not on the output's slot. Inductor hands back one tensor for two slots where a graph allows it
(``h * 1`` and ``h.detach()`` are ``h``; a written leaf's new value and ``wd * 1``; an
output's intermediate base and its ``.detach()``), so marking one slot marks the other:
its gradient is dropped (``x.grad`` stays None, silently) or its backward is handed None
and refuses (``TypeError: expected Tensor() for op: input``).

The fix: after the compiled forward returns, every non-differentiable slot whose tensor
also fills another slot gets an alias of its own (``.detach()``, the same memory), and the
marks go to those aliases, as pytorch/pytorch#195688 does inside torch. Values are
unchanged; only which tensor object carries the mark. It acts where the compiled function
is made (:data:`.._compat_compiler.AOT_RUNTIME_WRAPPERS`), once AOTAutograd's runtime wrappers are
imported; a forward whose outputs share no tensor pays one set of ids per call, and a
forward with no non-differentiable output is not wrapped. Where torch dealiases itself,
no marked slot shares its tensor and the fix does nothing. Installed at the first trace of
a tagged op. Canary:
tests/fixes/test_shared_output_tangents.py::test_canary_a_shared_output_loses_its_gradient.
"""

from __future__ import annotations

import functools
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

from .. import _compat_compiler
from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op


def at_first_trace(op: Op) -> None:
    for module, name in _compat_compiler.AOT_RUNTIME_WRAPPERS:
        if importlib.util.find_spec(module) is not None:
            when_imported(module, functools.partial(_install, name=name))


def _install(module: ModuleType, name: str) -> None:
    wrap_once(module, name, _with_own_tensors)


def _with_own_tensors(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def create_runtime_wrapper(compiled_fn: Any, *args: Any, **kwargs: Any) -> Any:
        function = _compat_compiler.compiled_autograd_function(compiled_fn)
        if function is not None:
            _dealias_non_differentiable_outputs(function)
        return original(compiled_fn, *args, **kwargs)

    return create_runtime_wrapper


def _dealias_non_differentiable_outputs(function: type[torch.autograd.Function]) -> None:
    """Wrap ``function.forward`` so that no tensor it marks non-differentiable fills a second slot."""
    unmarked = _compat_compiler.non_differentiable_output_slots(function)
    if not unmarked:  # nothing marked (or a layout this fix does not know: torch's behaviour)
        return
    forward = function.forward

    def forward_with_own_tensors(ctx: Any, *args: Any) -> Any:
        outs = forward(ctx, *args)
        ids = [id(o) for o in outs if isinstance(o, torch.Tensor)]
        if len(set(ids)) == len(ids):
            return outs
        outs = list(outs)
        for i in unmarked:
            o = outs[i]
            if isinstance(o, torch.Tensor) and ids.count(id(o)) > 1:
                outs[i] = o.detach()  # the same memory, a tensor of its own to carry the mark
        ctx.mark_non_differentiable(*[outs[i] for i in unmarked if isinstance(outs[i], torch.Tensor)])
        return tuple(outs)

    function.forward = staticmethod(forward_with_own_tensors)  # type: ignore[method-assign,assignment]
