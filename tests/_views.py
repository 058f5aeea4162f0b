"""Compiled-vs-eager on views of inputs and of intermediates, for any in-place or out= call.

Every new way to define or call an op goes through these patterns: a compiled
result that differs from eager is the worst bug tagged_ops could ship.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import pytest
import torch
from torch import Tensor

Patterns = dict[str, tuple[Callable[..., Any], Callable[[], tuple[Tensor, ...]]]]


def inplace_patterns(call: Callable[[Tensor], Any]) -> Patterns:
    """``call(t)`` mutates ``t`` in place (any shape (n, 3) with n >= 1)."""

    def on_input(x: Tensor) -> Tensor:
        return call(x)

    def on_input_view(x: Tensor) -> Tensor:
        call(x[1:3])
        return x

    def on_intermediate(x: Tensor) -> Tensor:
        y = x * 2
        call(y)
        return y + 1

    def on_intermediate_view(x: Tensor) -> Tensor:
        y = x * 2
        call(y[1:3])
        return y

    def on_intermediate_view_read_before(x: Tensor) -> tuple[Tensor, Tensor]:
        y = x * 2
        before = y.sum()
        call(y[::2])
        return y, before

    make = lambda: (torch.randn(4, 3),)  # noqa: E731
    return {
        "inplace-input": (on_input, make),
        "inplace-input-view": (on_input_view, make),
        "inplace-intermediate": (on_intermediate, make),
        "inplace-intermediate-view": (on_intermediate_view, make),
        "inplace-intermediate-strided-view": (on_intermediate_view_read_before, make),
    }


def out_patterns(call: Callable[[Tensor, Tensor], Any]) -> Patterns:
    """``call(x, o)`` writes ``o`` from ``x`` (same shape (n, 3))."""

    def into_input(x: Tensor, o: Tensor) -> Tensor:
        return call(x, o)

    def into_input_view(x: Tensor, o: Tensor) -> Tensor:
        call(x[:2], o[1:3])
        return o

    def into_intermediate_view(x: Tensor, o: Tensor) -> Tensor:
        buf = o * 0
        call(x[:2], buf[1:3])
        return buf + 1

    def from_intermediate_view(x: Tensor, o: Tensor) -> Tensor:
        y = x + 1
        call(y[::2], o[:2])
        return o

    make = lambda: (torch.randn(4, 3), torch.zeros(4, 3))  # noqa: E731
    return {
        "out-input": (into_input, make),
        "out-input-view": (into_input_view, make),
        "out-intermediate-view": (into_intermediate_view, make),
        "out-from-intermediate-view": (from_intermediate_view, make),
    }


def has_auto_functionalized_switch() -> bool:
    config = __import__("torch._inductor.config", fromlist=["config"])
    return hasattr(config, "enable_auto_functionalized_v2")


@contextlib.contextmanager
def auto_functionalized(version: str) -> Iterator[None]:
    """``"default"``: the release's own choice; ``"v1"``: ``enable_auto_functionalized_v2 = False``."""
    if version == "default":
        yield
        return
    if not has_auto_functionalized_switch():
        pytest.skip(f"torch {torch.__version__} has no enable_auto_functionalized_v2 switch (its default is v1)")
    config = __import__("torch._inductor.config", fromlist=["config"])
    with config.patch(enable_auto_functionalized_v2=False):
        yield


def assert_compiled_matches_eager(
    fn: Callable[..., Any], make: Callable[[], tuple[Tensor, ...]], version: str = "default"
) -> None:
    """Results and every mutated input of ``torch.compile(fn, fullgraph=True)`` equal eager's."""
    torch.manual_seed(0)
    eager_args = make()
    compiled_args = tuple(t.clone() for t in eager_args)
    expected = fn(*eager_args)
    torch._dynamo.reset()
    with auto_functionalized(version):
        got = torch.compile(fn, fullgraph=True)(*compiled_args)
    torch.testing.assert_close(got, expected)
    for mutated, reference in zip(compiled_args, eager_args, strict=True):
        torch.testing.assert_close(mutated, reference)


_EXPORT_RUNS_INPUT_MUTATIONS: bool | None = None


def require_exported_input_mutations() -> None:
    """xfail where torch's exported module cannot run a program that mutates a user input at all.

    torch 2.2's ``ExportedProgram.module()`` fails on ``o[:2].copy_(x)`` with an aten
    op too (a pytree of 2 leaves for a spec of 1); asked of torch, not of a version.
    """
    global _EXPORT_RUNS_INPUT_MUTATIONS
    if _EXPORT_RUNS_INPUT_MUTATIONS is None:

        class Probe(torch.nn.Module):
            def forward(self, x: Tensor, o: Tensor) -> Tensor:
                o[:2].copy_(x[:2])
                return o * 2

        x, o = torch.randn(4), torch.zeros(4)
        try:
            torch.export.export(Probe(), (x, o.clone())).module()(x, o.clone())
            _EXPORT_RUNS_INPUT_MUTATIONS = True
        except Exception:  # noqa: BLE001 - any failure of the aten-only probe means torch cannot
            _EXPORT_RUNS_INPUT_MUTATIONS = False
    if not _EXPORT_RUNS_INPUT_MUTATIONS:
        pytest.xfail(f"torch {torch.__version__}: an exported module that mutates a user input fails with aten ops too")


_RETURNS_MUTATED_INPUT_VIEWS: bool | None = None


def require_returned_views_of_mutated_inputs() -> None:
    """xfail where torch's compiled code returns stale values for a returned view of a mutated input.

    torch 2.2 compiles ``return x[1:3].add_(y)`` (aten alone) to a result that is
    neither the old nor the new values, while ``x`` itself is right; asked of torch.
    """
    global _RETURNS_MUTATED_INPUT_VIEWS
    if _RETURNS_MUTATED_INPUT_VIEWS is None:
        x, y = torch.randn(5, 4), torch.randn(2, 4)
        expected = x[1:3] + y
        torch._dynamo.reset()
        got = torch.compile(lambda x, y: x[1:3].add_(y), fullgraph=True)(x.clone(), y)
        torch._dynamo.reset()
        _RETURNS_MUTATED_INPUT_VIEWS = bool(torch.allclose(got, expected))
    if not _RETURNS_MUTATED_INPUT_VIEWS:
        pytest.xfail(
            f"torch {torch.__version__}: a compiled function returning a mutated view of its input returns stale values, with aten ops too"
        )
