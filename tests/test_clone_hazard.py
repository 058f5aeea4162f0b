"""Inductor 2.3-2.14 drops a clone an op reads (pytorch/pytorch#198031); tagged_ops keeps it.

``y = x.clone(); op(y, out=x)`` compiles to ``op(x, x)`` with a raw op: a kernel that
reads its input after writing its output then computes wrong values. tagged_ops'
ops compile it right by default (tagged_ops/_fixes/clone_of_written_value.py), and
with ``compile_functional=True`` (or ``TAGGED_OPS_COMPILE_FUNCTIONAL=1``), which routes
compiled calls through the functional twin. Which releases have the hazard is
measured on a raw op and recorded for compat_matrix.md.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops

from ._raw_programs import torch_gets_wrong
from ._views import assert_compiled_matches_eager, inplace_patterns, out_patterns

CLONE_DROP_FACT = "compiler_drops_a_read_clone"  # recorded for compat_matrix.md (tests/_results.py)


def _reverse_into(dst: Tensor, src: Tensor) -> None:
    """Row by row, reading ``src`` after writing ``dst``: wrong if the two alias."""
    n = src.shape[0]
    for i in range(n):
        dst[i] = src[n - 1 - i]


def _reverse_ops(ns: str, **options: Any) -> tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp]:
    @tagged_ops.define_out(f"{ns}::rev_out", **options)
    def rev_out(src: Tensor, *, out: Tensor) -> Tensor:
        _reverse_into(out, src)
        return out

    @tagged_ops.define_inplace(f"{ns}::rev_from_", **options)
    def rev_from_(x: Tensor, src: Tensor) -> Tensor:
        _reverse_into(x, src)
        return x

    return rev_out, rev_from_


def _clone_patterns(
    rev_out: Callable[..., Tensor], rev_from_: Callable[..., Tensor]
) -> dict[str, tuple[Callable[..., Any], Callable[[], tuple[Tensor, ...]]]]:
    def out_from_clone(x: Tensor) -> Tensor:
        y = x.clone()
        rev_out(y, out=x)
        return x

    def out_from_clone_of_view(x: Tensor) -> Tensor:
        y = x[1:].clone()
        rev_out(y, out=x[1:])
        return x

    def inplace_from_clone(x: Tensor) -> Tensor:
        y = x.clone()
        rev_from_(x, y)
        return x

    def inplace_intermediate_from_clone(x: Tensor) -> Tensor:
        t = x * 2
        y = t[:3].clone()
        rev_from_(t[:3], y)
        return t + 1

    make = lambda: (torch.arange(12.0).reshape(4, 3).clone(),)  # noqa: E731
    return {
        "out-from-clone": (out_from_clone, make),
        "out-from-clone-of-view": (out_from_clone_of_view, make),
        "inplace-from-clone": (inplace_from_clone, make),
        "inplace-intermediate-from-clone": (inplace_intermediate_from_clone, make),
    }


@pytest.mark.parametrize("switch", ["per-op", "global"])
def test_compile_functional_compiles_clone_patterns_right(
    path: str, ns: str, switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if switch == "global":
        monkeypatch.setenv(tagged_ops._switches.COMPILE_FUNCTIONAL_ENV_VAR, "1")
    rev_out, rev_from_ = _reverse_ops(ns, compile_functional=switch == "per-op")
    patterns = _clone_patterns(rev_out, rev_from_)
    if switch == "per-op":  # the same route either way: views of inputs and intermediates once
        patterns.update(out_patterns(lambda x, o: rev_out(x, out=o)))
        patterns.update(inplace_patterns(lambda t: rev_from_(t, t.flip(0))))
    for name, (fn, make) in patterns.items():
        try:
            assert_compiled_matches_eager(fn, make)
        except AssertionError as e:
            raise AssertionError(f"pattern {name}: {e}") from None


def test_clone_patterns_compile_right_by_default(
    path: str, ns: str, record_property: Callable[[str, object], None]
) -> None:
    """Without compile_functional, the clone patterns compile to eager's values (tagged_ops/_fixes/clone_of_written_value.py).

    Records whether this torch drops the clone with a raw op (measured in a fresh
    process, where no fix is installed), for compat_matrix.md.
    """
    record_property(CLONE_DROP_FACT, torch_gets_wrong()["clone, then out= into the source (pytorch#198031)"])
    rev_out, rev_from_ = _reverse_ops(ns)
    for name, (fn, make) in _clone_patterns(rev_out, rev_from_).items():
        try:
            assert_compiled_matches_eager(fn, make)
        except AssertionError as e:
            raise AssertionError(f"pattern {name}: {e}") from None
