"""Inductor's out-variant call, probed by compiling: does it pass an argument kind intact?

The canary of ``tagged_ops._fixes.out_variant_pairing`` (tests/test_pairing.py):
compiles a small functional op beside a tagged ``.out`` whose arguments are of one
kind, and compares with eager.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from tagged_ops import _compat as caps

_PROBES = {  # argument kind -> (the probe's inputs, the call's extra arguments, its out buffer's name)
    "list": ("Tensor x, int[] shape", ([2, 3],), "out"),
    "defaulted": ("Tensor x, float alpha=2.0", (), "out"),
    "renamed-out": ("Tensor x", (), "result"),
}


@functools.cache
def lowering_passes(kind: str) -> bool:
    """Whether Inductor's out-variant call passes arguments of ``kind`` intact (compiles a probe op)."""
    inputs, extra, out = _PROBES[kind]
    namespace = "tagged_ops_probe"
    name = f"pairing_{kind.replace('-', '_')}"
    lib = torch.library.Library(namespace, "FRAGMENT")
    try:
        lib.define(f"{name}({inputs}) -> Tensor")
        lib.define(f"{name}.out({inputs}, *, Tensor(a!) {out}) -> Tensor(a!)", tags=(torch.Tag.out,))  # type: ignore[attr-defined]

        def functional(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            return x.reshape(6) * 2

        def out_variant(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            return kwargs[out].copy_(x.reshape(6) * 2)  # type: ignore[no-any-return]

        lib.impl(name, functional, "CompositeExplicitAutograd")
        lib.impl(f"{name}.out", out_variant, "CompositeExplicitAutograd")
        caps.register_fake(f"{namespace}::{name}", functional, lib=lib)
        caps.register_fake(f"{namespace}::{name}.out", out_variant, lib=lib)
        op = getattr(getattr(torch.ops, namespace), name).default
        x = torch.arange(6.0).reshape(2, 3)
        compiled: Callable[[torch.Tensor], torch.Tensor] = torch.compile(
            lambda t: op(t, *extra), fullgraph=True, backend="inductor"
        )
        return bool(torch.equal(compiled(x), x.reshape(6) * 2))
    except Exception:  # noqa: BLE001 - any failure of the lowering means: mangled
        return False
    finally:
        caps.destroy_library(lib)
