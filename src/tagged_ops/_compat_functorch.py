"""What the installed torch offers inside torch.func's transforms: probes and backports.

The part of the probe (see ``_compat``) that reads functorch's interpreter stack
and its wrappers, and ``torch.library.register_vmap`` where torch lacks it. Used
by the kernels an op has under transforms (``_transforms``) and by the fallback
in-place op's vmap loop.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import torch.utils._pytree

from ._compat import parse_namespace

# -- torch._C._functorch (torch.func's transforms, every release) ---------------------
# Read by popping the layers and pushing them back, as
# torch._functorch.pyfunctorch.temporarily_pop_interpreter_stack does (2.2 has no
# get_interpreter_stack, and no release exposes a level's saved grad modes otherwise).

_functorch: Any = torch._C._functorch


class TransformLevel(NamedTuple):
    """One active torch.func transform, as an op called inside it sees it."""

    kind: str  # "Grad", "Jvp", "Vmap" or "Functionalize" (torch's TransformType names)
    level: int
    grad_enabled: bool  # grad mode at this level
    fwd_grad_enabled: bool  # forward grad mode at this level


def transform_levels() -> list[TransformLevel]:
    """The active torch.func transforms, innermost first (empty outside them).

    Each level's grad modes are read off the level above it, which saved them on entry.
    """
    interpreters: list[Any] = []
    popped: list[Any] = []
    try:
        while (interpreter := _functorch.peek_interpreter_stack()) is not None:
            kind = interpreter.key().name
            saved = (  # the modes of the level below, saved when this one was entered
                _functorch.CGradInterpreterPtr(interpreter).prevGradMode() if kind == "Grad" else None,
                _functorch.CJvpInterpreterPtr(interpreter).prevFwdGradMode() if kind == "Jvp" else None,
            )
            interpreters.append((kind, interpreter.level(), saved))  # read before the pop frees it
            popped.append(_functorch.pop_dynamic_layer_stack())
    finally:
        for layer in reversed(popped):
            _functorch.push_dynamic_layer_stack(layer)
    levels = []
    grad, fwd_grad = torch.is_grad_enabled(), torch._C._is_fwd_grad_enabled()
    for kind, level, (prev_grad, prev_fwd_grad) in interpreters:
        levels.append(TransformLevel(kind, level, grad, fwd_grad))
        grad = grad if prev_grad is None else prev_grad
        fwd_grad = fwd_grad if prev_fwd_grad is None else prev_fwd_grad
    return levels


def functorch_level(t: torch.Tensor) -> int:
    """The transform level ``t`` is wrapped at (-1 for a plain tensor)."""
    return int(_functorch.maybe_get_level(t))


def is_batched(t: torch.Tensor) -> bool:
    """Whether ``t`` is vmap's wrapper of a batched value."""
    return bool(_functorch.is_batchedtensor(t))


def unwrap_level(t: torch.Tensor, level: int) -> Any:
    """``t`` without its wrapper at transform ``level`` (itself if it has none there)."""
    if is_batched(t):
        return _functorch._unwrap_batched(t, level)[0] if functorch_level(t) == level else t
    return _functorch._unwrap_for_grad(t, level)


#: ``torch.utils._pytree.tree_leaves``: the tensors (and other leaves) of nested lists, tuples and dicts.
tree_leaves: Callable[[Any], list[Any]] = torch.utils._pytree.tree_leaves


def forward_ad_levels() -> range:
    """The forward-AD levels a tangent may live at (torch.func.jvp enters one per transform)."""
    return range(torch.autograd.forward_ad._current_level + 1)


# -- torch.library.register_vmap (2.5) ------------------------------------------------
# Breakpoint: pytorch/pytorch#130589.

if hasattr(torch.library, "register_vmap"):
    register_vmap = torch.library.register_vmap
else:

    class _VmapInfo:
        def __init__(self, batch_size: int, randomness: str) -> None:
            self.batch_size = batch_size
            self.randomness = randomness

    def register_vmap(  # type: ignore[misc]
        op: str, func: Callable[..., Any], /, *, lib: torch.library.Library
    ) -> None:
        """Backport of ``torch.library.register_vmap`` for what tagged_ops registers: a rule
        ``func(info, in_dims, *args, **kwargs) -> (None, None)`` of an op that returns nothing
        (the fallback in-place op's loop), run at the FuncTorchBatched key on the unbatched
        values, one vmap level down, as upstream's runs."""
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

        def batched(*args: Any, **kwargs: Any) -> None:
            interpreter: Any = retrieve_current_functorch_interpreter()
            level = interpreter.level()
            values, in_dims = [], []
            for a in args:
                if isinstance(a, torch.Tensor) and is_batched(a) and functorch_level(a) == level:
                    value, dim = _functorch._unwrap_batched(a, level)
                else:
                    value, dim = a, None
                values.append(value)
                in_dims.append(dim)
            info = _VmapInfo(interpreter.batch_size(), str(interpreter.randomness()))
            with interpreter.lower():
                outputs, _ = func(info, tuple(in_dims), *values, **kwargs)
            if outputs is not None:
                raise NotImplementedError(f"{op}: this torch's register_vmap backport takes rules that return nothing")

        lib.impl(parse_namespace(op)[1], batched, "FuncTorchBatched")
