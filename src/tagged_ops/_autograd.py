"""An in-place op called under autograd: it runs, and a backward through the mutated tensor raises.

Native 2.13 returns a *view* of the mutated tensor there and leaves its history
alone, so a backward through it is silently wrong (``y = x * 1; op_(y);
y.sum().backward()`` gives ``x.grad == 1``). The handle instead runs such a call
without grad and puts the mutated tensor behind a node whose backward raises, and
refuses, as ATen's in-place ops do, a leaf that requires grad (or a view of one).
out= ops have no such path: their kernel refuses the call, as on 2.13.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from . import _compat
from ._contract import in_place_backward, in_place_on_leaf
from ._signature import OpSignature

__all__ = ["make_autograd_call"]


class _NoAutogradFormula(torch.autograd.Function):
    """Puts an in-place op's mutated tensor behind a node that refuses backward (marked dirty)."""

    # forward and setup_context apart: torch.func's transforms accept only this form
    @staticmethod
    def forward(message: str, x: torch.Tensor, *inputs: Any) -> torch.Tensor:  # type: ignore[override]
        return x

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.message = inputs[0]
        ctx.mark_dirty(inputs[1])

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
        raise RuntimeError(ctx.message)


def make_autograd_call(sig: OpSignature, op: Callable[..., Any]) -> Callable[..., None]:
    """An in-place handle's call under autograd, in ``op``'s (the registered op's) argument form."""
    qualname = sig.qualname
    message = in_place_backward(qualname)

    def autograd_call(*args: Any, **kwargs: Any) -> None:
        x = args[0]
        # ATen refuses these before mutating; so do we (native 2.13 lets them through).
        if x.is_leaf and x.requires_grad:
            raise RuntimeError(in_place_on_leaf(qualname, view=False))
        base = _compat.view_base(x)
        if base is not None and base.is_leaf and base.requires_grad:
            raise RuntimeError(in_place_on_leaf(qualname, view=True))
        with torch.no_grad():
            op(*args, **kwargs)
        others = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor) and a.requires_grad]
        _NoAutogradFormula.apply(message, x, *others)

    return autograd_call
