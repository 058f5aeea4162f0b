"""``python -m tagged_ops``: what this torch offers, and a live self-check of the reference sin ops."""

from __future__ import annotations

import importlib.util
import os
import platform
import traceback
import unittest.mock
from typing import Any, Callable

import torch
from torch import Tensor

from . import _compat
from ._handle import TaggedOp
from ._opcheck import opcheck
from ._switches import FALLBACK_ENV_VAR, fallback_forced
from .testing._sin_ops import SinOps, define_sin_ops

__all__ = ["describe_paths", "main", "report"]


def describe_paths() -> dict[str, Any]:
    """For each path this torch offers: the schemas the sin ops get, and the self-check."""
    described: dict[str, Any] = {}
    for path in ("native", "fallback") if _compat.NATIVE_TAGS else ("fallback",):
        with unittest.mock.patch.dict(os.environ, {FALLBACK_ENV_VAR: "1" if path == "fallback" else "0"}):
            ops = define_sin_ops("tagged_ops_describe")
        described[path] = {
            "schema_inplace": ops.sin_.schema.split("::", 1)[1],
            "schema_out": ops.sin_out.schema.split("::", 1)[1],
            "register_methods": registration_methods(),
            "self_check": {name: "PASS" if ok else f"FAIL: {detail}" for name, ok, detail in self_check(ops)},
        }
    return described


def registration_methods() -> list[str]:
    """The ``register_*`` methods the handle offers on this torch."""
    return sorted(n for n in dir(TaggedOp) if n.startswith("register_"))


def _check(name: str, fn: Callable[[], Any]) -> tuple[str, bool, str]:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the report shows any failure
        return name, False, f"{type(e).__name__}: {e}".splitlines()[0][:200]
    return name, True, ""


def self_check(ops: SinOps) -> list[tuple[str, bool, str]]:
    """Define, opcheck, compile (fullgraph) and export the sin ops; one result per check."""

    def eager() -> None:
        x = torch.randn(8)
        expected = x.sin()
        assert ops.sin_(x) is x and torch.allclose(x, expected)
        o = torch.empty(8)
        assert ops.sin_out(expected, out=o) is o and torch.allclose(o, expected.sin())

    def check_opcheck() -> None:
        opcheck(ops.sin_, (torch.randn(5),))
        opcheck(ops.sin_out, (torch.randn(5),), {"out": torch.empty(5)})
        if importlib.util.find_spec("numpy") is not None:  # the numpy-kernel ops need numpy
            opcheck(ops.numpy_sin_, (torch.randn(5),))
            opcheck(ops.numpy_sin_out, (torch.randn(5),), {"out": torch.empty(5)})

    def compiled() -> None:
        torch.compiler.reset()

        def f(x: Tensor, o: Tensor) -> Tensor:
            ops.sin_(x)
            ops.sin_out(x, out=o)
            return o

        x = torch.randn(8)
        o = torch.empty(8)
        ref = x.sin().sin()
        torch.compile(f, fullgraph=True)(x, o)
        assert torch.allclose(o, ref)

    def exported() -> None:
        class M(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.register_buffer("state", torch.randn(4))

            state: Tensor

            def forward(self, x: Tensor) -> Tensor:
                ops.sin_(self.state)
                return x + self.state

        m = M()
        x = torch.randn(4)
        expected_state = m.state.sin()
        exported_module: Any = torch.export.export(m, (x,)).module()
        out = exported_module(x)
        assert torch.allclose(out, x + expected_state)
        assert torch.allclose(exported_module.state, expected_state)

    checks = {"eager": eager, "opcheck": check_opcheck, "compile": compiled, "export": exported}
    return [_check(name, fn) for name, fn in checks.items()]


def report() -> tuple[list[str], bool]:
    ops = define_sin_ops("tagged_ops_selfcheck")
    path = "native (tagged)" if ops.sin_.is_native else "fallback (untagged + returning handle)"
    lines = [
        f"torch {torch.__version__} (python {platform.python_version()}, {platform.machine()})",
        f"NATIVE_TAGS: {_compat.NATIVE_TAGS}",
        f"{FALLBACK_ENV_VAR}: {'set' if fallback_forced() else 'unset'}",
        f"path ops take: {path}",
        f"schema in-place: {ops.sin_.schema}",
        f"schema out=:     {ops.sin_out.schema}",
        f"register_* methods: {', '.join(registration_methods())}",
        f"CUDA available: {torch.cuda.is_available()}",
    ]
    if importlib.util.find_spec("numpy") is None:
        lines.append("numpy not installed: the self-check's opcheck skips the numpy-kernel sin ops")
    ok = True
    for name, passed, detail in self_check(ops):
        ok &= passed
        lines.append(f"self-check {name:8s} {'PASS' if passed else 'FAIL'}{'  ' + detail if detail else ''}")
    return lines, ok


def main() -> int:
    try:
        lines, ok = report()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1
    print("\n".join(lines))
    return 0 if ok else 1
