"""Parity: the native path and the forced fallback, in one torch, behave identically.

Each scenario records what a user can observe (results, identity, errors with
their text, version counters, compiled results); the records must be equal.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops._switches import env_flag
from tagged_ops.testing import SinOps, define_sin_ops

_ids = itertools.count()


def _outcome(fn: Callable[[], Any]) -> tuple[str, str]:
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001 - the outcome is what we compare
        return "raises", f"{type(e).__name__}: {e}".replace(os.sep, "/")
    return "returns", repr(value)


def _scenarios(ops: SinOps, ns: str) -> dict[str, Callable[[], Any]]:
    torch.manual_seed(0)

    def inplace_identity() -> Any:
        x = torch.randn(4)
        r = ops.sin_(x)
        return r is x, x.tolist(), x._version

    def out_identity() -> Any:
        x, o = torch.randn(4), torch.empty(4)
        r = ops.sin_out(x, out=o)
        return r is o, o.tolist(), o._version

    def numpy_versions() -> Any:
        x, o = torch.randn(4), torch.empty(4)
        ops.numpy_sin_(x)
        ops.numpy_sin_out(x, out=o)
        return x._version, o._version

    def out_requires_grad() -> Any:
        o = torch.zeros(2)
        try:
            ops.sin_out(torch.randn(2, requires_grad=True), out=o)
        finally:
            assert o.sum() == 0
        return None

    def inplace_backward() -> Any:
        y = torch.randn(3, requires_grad=True) * 1
        ops.sin_(y)
        y.sum().backward()

    def leaf() -> Any:
        return ops.sin_(torch.randn(3, requires_grad=True))

    def missing_out() -> Any:
        return ops.sin_out(torch.randn(2))

    def positional_out() -> Any:
        return ops.sin_out(torch.randn(2), torch.empty(2))

    def unknown_kw() -> Any:
        return ops.sin_out(torch.randn(2), out=torch.empty(2), alpha=2)

    def numpy_bad_shape() -> Any:
        return ops.numpy_sin_out(torch.randn(3), out=torch.empty(2))

    def register_autograd() -> Any:
        return ops.sin_out.register_autograd(lambda ctx, g: g)

    def compiled() -> Any:
        torch._dynamo.reset()
        x, o = torch.randn(4), torch.empty(4)

        def f(x: Tensor, o: Tensor) -> Tensor:
            ops.sin_(x[1:3])
            return ops.sin_out(x, out=o) * 2

        r = torch.compile(f, fullgraph=True)(x, o)
        return r.tolist(), x.tolist(), o.tolist()

    def opcheck() -> Any:
        return tagged_ops.opcheck(ops.sin_out, (torch.randn(3),), {"out": torch.empty(3)})

    return {name: fn for name, fn in locals().items() if callable(fn) and not name.startswith("_")}


def _observe(fallback: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, tuple[str, str]], bool]:
    if fallback:
        monkeypatch.setenv(tagged_ops.FALLBACK_ENV_VAR, "1")
    else:
        monkeypatch.delenv(tagged_ops.FALLBACK_ENV_VAR, raising=False)
    ns = "tagged_ops_parity"  # one name for both: messages embed it
    ops = define_sin_ops(ns)
    return {name: _outcome(fn) for name, fn in _scenarios(ops, ns).items()}, ops.sin_.is_native


@pytest.mark.skipif(not tagged_ops.NATIVE_TAGS, reason="this torch has only the fallback path; nothing to compare")
@pytest.mark.skipif(env_flag(tagged_ops.FALLBACK_ENV_VAR), reason="fallback forced for the whole run")
def test_native_and_fallback_are_indistinguishable(monkeypatch: pytest.MonkeyPatch) -> None:
    native, was_native = _observe(False, monkeypatch)
    fallback, was_fallback_native = _observe(True, monkeypatch)
    assert was_native and not was_fallback_native
    # Everything observable is equal but the registered schema itself (the messages
    # of register_autograd quote it), which is the point of the two paths.
    native["register_autograd"] = (
        native["register_autograd"][0],
        native["register_autograd"][1].split(" with schema")[0],
    )
    fallback["register_autograd"] = (
        fallback["register_autograd"][0],
        fallback["register_autograd"][1].split(" with schema")[0],
    )
    for name in native:
        assert native[name] == fallback[name], f"{name}: {native[name]} != {fallback[name]}"
    # and the scenarios really exercised both outcomes
    kinds = {k for k, _ in native.values()}
    assert kinds == {"raises", "returns"}
