"""Inductor 2.3-2.14 drops a clone an op reads (pytorch/pytorch#198031); ``compile_functional`` avoids it.

``y = x.clone(); op(y, out=x)`` compiles to ``op(x, x)``: a kernel that reads its
input after writing its output then computes wrong values. Upstream's bug, met
through our ops; ``compile_functional=True`` (or ``TAGGED_OPS_COMPILE_FUNCTIONAL=1``)
routes compiled calls through the functional twin, which writes fresh tensors.
Which releases have the hazard is measured here on a raw op and recorded for
compat_matrix.md.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops import _compat as caps

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


def _raw_op_drops_the_clone(ns: str) -> bool | None:
    """Compile ``y = x.clone(); op(y, x)`` with a classic op (no tagged_ops); None: it does not compile here."""
    lib = torch.library.Library(ns, "FRAGMENT")
    try:
        lib.define("raw_rev(Tensor src, Tensor(a!) out) -> ()")
        lib.impl("raw_rev", lambda src, out: _reverse_into(out, src), "CompositeExplicitAutograd")
        caps.register_fake(f"{ns}::raw_rev", lambda src, out: None, lib=lib)
        op = getattr(torch.ops, ns).raw_rev.default

        def f(x: Tensor) -> Tensor:
            y = x.clone()
            op(y, x)
            return x

        expected = f(torch.arange(12.0).reshape(4, 3).clone())
        torch._dynamo.reset()
        try:
            got = torch.compile(f, fullgraph=True)(torch.arange(12.0).reshape(4, 3).clone())
        except Exception:  # 2.2: Inductor cannot lower a mutating custom op
            return None
        return not torch.equal(got, expected)
    finally:
        caps.destroy_library(lib)


def test_the_hazard_is_torchs_and_is_recorded(
    path: str, ns: str, record_property: Callable[[str, object], None]
) -> None:
    """Without the switch, tagged_ops' ops compile the clone pattern exactly as well as a raw op does.

    Records whether this torch drops the clone (compat_matrix.md's section on it).
    """
    raw_drops = _raw_op_drops_the_clone(f"{ns}_raw")
    record_property(CLONE_DROP_FACT, raw_drops)
    rev_out, rev_from_ = _reverse_ops(ns)
    patterns = _clone_patterns(rev_out, rev_from_)
    for name in ("out-from-clone", "inplace-from-clone"):  # the raw op's pattern, on a graph input
        fn, make = patterns[name]
        if raw_drops is None:  # the twin compiles every call here (2.2): right
            assert_compiled_matches_eager(fn, make)
            continue
        x = make()[0]
        expected = fn(x.clone())
        torch._dynamo.reset()
        ours_drops = not torch.equal(torch.compile(fn, fullgraph=True)(x), expected)
        assert ours_drops == raw_drops, f"pattern {name}: tagged_ops {ours_drops}, raw op {raw_drops}"
