"""Property: a handle binds a call exactly as the dispatcher binds it against the 2.13 schema.

For any call (some positional arguments, some keywords, maybe unknown ones), on
both paths and every release: either the call runs and writes what eager torch
writes, or it raises the dispatcher's RuntimeError, sentence for sentence, and
leaves every tensor untouched. The reference is the dispatcher itself: a raw op
declared with the 2.13 tagged schema the handle presents (torch parses such a
schema on every release, even where ``custom_op`` refuses it).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import Tensor
from torch.library import Library

import tagged_ops
from tagged_ops._compat import destroy_library

_NAMES = {"out": ["x", "factor", "out", "bias"], "inplace": ["x", "y", "alpha"]}


@st.composite
def calls(draw: st.DrawFn, kind: str) -> tuple[int, list[str], list[str]]:
    """How many positional arguments, which parameters by keyword, which unknown keywords."""
    names = _NAMES[kind]
    positional = draw(st.integers(0, len(names) + 1))
    # An argument given both by position and by keyword is Python's TypeError before
    # any of our code runs (see test_an_argument_given_twice_is_pythons_type_error).
    keywords = draw(
        st.lists(st.sampled_from(names[positional:] or ["x"]), unique=True).filter(
            lambda ks: all(names.index(k) >= positional for k in ks)
        )
    )
    unknown = draw(st.lists(st.sampled_from(["bogus", "outt"]), unique=True, max_size=2))
    return positional, keywords, unknown


def _define(kind: str, ns: str) -> tuple[tagged_ops.TaggedOp, Any]:
    if kind == "out":

        @tagged_ops.define_out(f"{ns}::scale.out")
        def op(x: Tensor, factor: float = 2.0, *, out: Tensor, bias: float = 0.0) -> Tensor:
            torch.mul(x, factor, out=out).add_(bias)
            return out

    else:

        @tagged_ops.define_inplace(f"{ns}::shift_")
        def op(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
            x.add_(y, alpha=alpha)
            return x

    # The dispatcher's reference: the very schema the handle presents, on a raw op.
    raw_lib = Library(f"{ns}_raw", "DEF")
    schema = op._definition.sig.native_schema()
    raw_lib.define(schema)
    packet, _, overload = schema.partition("(")[0].partition(".")
    raw = getattr(getattr(torch.ops, f"{ns}_raw"), packet)
    return op, (raw_lib, getattr(raw, overload or "default"))


def _values(kind: str) -> dict[str, Any]:
    if kind == "out":
        return {"x": torch.arange(3.0), "factor": 3.0, "out": torch.zeros(3), "bias": 1.0}
    return {"x": torch.ones(3), "y": torch.arange(3.0), "alpha": 2.0}


@pytest.mark.parametrize("kind", ["out", "inplace"])
def test_calls_bind_as_the_dispatcher_binds_them(path: str, ns: str, kind: str) -> None:
    op, (raw_lib, raw) = _define(kind, ns)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(calls(kind))
    def check(call: tuple[int, list[str], list[str]]) -> None:
        positional, keywords, unknown = call
        names = _NAMES[kind]
        values = _values(kind)
        args = [values[n] if i < len(names) else torch.zeros(3) for i, n in enumerate([*names, "extra"][:positional])]
        kwargs: dict[str, Any] = {k: values[k] for k in keywords}
        kwargs.update({u: 1 for u in unknown})
        tensors = [t for t in [*args, *kwargs.values()] if isinstance(t, Tensor)]
        before = [(t.clone(), t._version) for t in tensors]
        try:
            raw(*args, **kwargs)
        except NotImplementedError:  # bound, then found no kernel: the call fits the schema
            expected: str | None = None
        except RuntimeError as e:
            expected = str(e).replace(f"{ns}_raw::", f"{ns}::")
        if expected is None:
            ours = op(*args, **kwargs)
            assert ours is (kwargs["out"] if kind == "out" else (args[0] if args else kwargs["x"]))
        else:
            with pytest.raises(RuntimeError) as raised:
                op(*args, **kwargs)
            assert str(raised.value) == expected
            for t, (copy, version) in zip(tensors, before, strict=True):
                assert t._version == version and torch.equal(t, copy)

    try:
        check()
    finally:
        destroy_library(raw_lib)


def test_an_argument_given_twice_is_pythons_type_error(path: str, ns: str) -> None:
    """The one bad call that differs: Python binds the handle's parameters and raises
    TypeError before the body runs (native: the dispatcher's "expected at most"
    RuntimeError). Both name the op; no tensor is touched."""
    op, (raw_lib, _) = _define("inplace", ns)
    destroy_library(raw_lib)
    x = torch.ones(3)
    with pytest.raises(TypeError, match=f"{ns}::shift_.. got multiple values for argument 'x'"):
        op(x, x=x, y=x)
    assert x._version == 0
