"""A compiled training step against eager: every output, every input after the step, every gradient.

A program returns a tuple whose last item is the loss; the step runs it and calls
``loss.backward()``. Inputs that require grad are leaves (a parameter), the others
plain tensors the step may write.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor


def run_step(program: Callable[..., Any], inputs: tuple[Tensor, ...], *, compiled: bool) -> list[Tensor | None]:
    """Outputs, inputs after the step, then each input's gradient (None where it has none)."""
    torch.compiler.reset()
    args = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
    fn = torch.compile(program, fullgraph=True) if compiled else program
    out = fn(*args)
    out[-1].backward()
    return [
        *(o.detach().clone() for o in out),
        *(a.detach().clone() for a in args),
        *(None if a.grad is None else a.grad.clone() for a in args),
    ]


def differences(expected: list[Tensor | None], got: list[Tensor | None]) -> list[int]:
    """The positions where ``got`` is not ``expected`` (float64: within 1e-9)."""
    bad = []
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if (e is None) != (g is None):
            bad.append(i)
        elif e is not None and g is not None and not torch.allclose(g, e, rtol=1e-9, atol=1e-9, equal_nan=True):
            bad.append(i)
    return bad


def leaf_and_input(seed: int) -> tuple[Tensor, Tensor]:
    """``(x, w)``: a plain 4x4 float64 input and a leaf that requires grad, from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 4, dtype=torch.float64, generator=gen)
    w = torch.randn(4, 4, dtype=torch.float64, generator=gen).requires_grad_()
    return x, w


def returning_buffers(overload: Any, *, in_place: bool = False) -> Callable[..., Any]:
    """A classic op (it returns nothing, takes its buffers by position after the other arguments)
    called in a handle's form: buffers by keyword, the written tensor(s) returned."""

    def call(*args: Any, **kwargs: Any) -> Any:
        buffers = [v for v in kwargs.values() if isinstance(v, Tensor)]
        overload(*args, *buffers, **{k: v for k, v in kwargs.items() if not isinstance(v, Tensor)})
        if in_place:
            return args[0]
        return tuple(buffers) if len(buffers) > 1 else buffers[0]

    return call


def direct(handle: Any) -> Callable[..., Any]:
    """``torch.ops`` in the registered op's form, returning what the handle returns."""
    if handle.is_native:
        return handle.opoverload  # type: ignore[no-any-return]
    return returning_buffers(handle.opoverload, in_place=handle.kind == "inplace")


def assert_step_matches_eager(program: Callable[..., Any], make_inputs: Callable[[], tuple[Tensor, ...]]) -> None:
    inputs = make_inputs()
    eager = run_step(program, inputs, compiled=False)
    compiled = run_step(program, inputs, compiled=True)
    bad = differences(eager, compiled)
    assert not bad, f"compiled differs from eager at {bad} (outputs, then inputs after the step, then gradients)"
