"""Ops given a hand-written ``schema=``, whatever alias letters it uses, compile like inferred ones.

bitsandbytes and vLLM write schemas by hand (``Tensor(a!) x``, ``Tensor! out``);
inference writes ``Tensor(a0!)``. Both must take the same lowering decisions
(functional twin or not), on views of inputs and of intermediates, with both
auto_functionalized versions where the release has the switch.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops

from ._views import assert_compiled_matches_eager, inplace_patterns, out_patterns

INPLACE_SCHEMAS = {
    "inferred": None,
    "a": "(Tensor(a!) x, float alpha=1.0) -> Tensor(a!)",
    "b0": "(Tensor(b0!) x, float alpha=1.0) -> Tensor(b0!)",
    "named": "add_one_(Tensor(z!) x, float alpha=1.0) -> Tensor(z!)",
}
OUT_SCHEMAS = {
    "inferred": None,
    "a": "(Tensor x, float alpha=1.0, *, Tensor(a!) out) -> Tensor(a!)",
    "c": "(Tensor x, float alpha=1.0, *, Tensor(c!) out) -> Tensor(c!)",
}


def _inplace(ns: str, schema: str | None) -> tagged_ops.TaggedOp:
    def add_one_(x: Tensor, alpha: float = 1.0) -> Tensor:
        x.add_(alpha)
        return x

    return tagged_ops.define_inplace(f"{ns}::add_one_", add_one_, schema=schema)


def _out(ns: str, schema: str | None) -> tagged_ops.TaggedOp:
    def add_one_out(x: Tensor, alpha: float = 1.0, *, out: Tensor) -> Tensor:
        torch.add(x, alpha, out=out)
        return out

    return tagged_ops.define_out(f"{ns}::add_one_out", add_one_out, schema=schema)


@pytest.mark.parametrize("schema", list(INPLACE_SCHEMAS))
def test_schema_and_inferred_ops_register_the_same_contract(path: str, ns: str, schema: str) -> None:
    op = _inplace(ns, INPLACE_SCHEMAS[schema])
    reference = _inplace(f"{ns}_ref", None)
    assert op.kind == reference.kind == "inplace"
    parsed, expected = op.opoverload._schema, reference.opoverload._schema
    assert [(a.name, str(a.type), a.kwarg_only) for a in parsed.arguments] == [
        (a.name, str(a.type), a.kwarg_only) for a in expected.arguments
    ]
    assert [a.alias_info is not None and a.alias_info.is_write for a in parsed.arguments] == [True, False]
    assert len(parsed.returns) == len(expected.returns)
    x = torch.zeros(3)
    assert op(x, 2.0) is x
    torch.testing.assert_close(x, torch.full((3,), 2.0))


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(inplace_patterns(lambda x: x)))
@pytest.mark.parametrize("schema", list(INPLACE_SCHEMAS))
def test_inplace_schema_ops_compile_like_eager(path: str, ns: str, schema: str, pattern: str, version: str) -> None:
    op = _inplace(ns, INPLACE_SCHEMAS[schema])
    fn, make = inplace_patterns(lambda x: op(x, 0.5))[pattern]
    assert_compiled_matches_eager(fn, make, version)


@pytest.mark.parametrize("version", ["default", "v1"])
@pytest.mark.parametrize("pattern", list(out_patterns(lambda x, o: o)))
@pytest.mark.parametrize("schema", list(OUT_SCHEMAS))
def test_out_schema_ops_compile_like_eager(path: str, ns: str, schema: str, pattern: str, version: str) -> None:
    op = _out(ns, OUT_SCHEMAS[schema])
    fn, make = out_patterns(lambda x, o: op(x, 0.5, out=o))[pattern]
    assert_compiled_matches_eager(fn, make, version)


def test_schema_op_takes_the_functional_twin_where_an_inferred_one_does(path: str, ns: str) -> None:
    """Same lowering decision for ``Tensor(a!)`` as for ``Tensor(a0!)``: traced graphs call the same kind of op."""
    inferred = _inplace(f"{ns}_inferred", None)
    written = _inplace(ns, INPLACE_SCHEMAS["a"])

    def graph_targets(op: tagged_ops.TaggedOp) -> list[str]:
        seen: list[str] = []

        def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
            seen.extend(str(n.target).split(".", 1)[-1] for n in gm.graph.nodes if n.op == "call_function")
            return gm.forward

        torch._dynamo.reset()
        torch.compile(lambda x: op(x[1:3], 1.0), backend=backend, fullgraph=True)(torch.zeros(4, 3))
        return [t.replace(op.opoverload.namespace, "NS") for t in seen]

    assert graph_targets(written) == graph_targets(inferred)


@pytest.mark.parametrize(
    ("mutates_args", "ok"), [(None, True), (("x",), True), (("alpha",), False), ((), False)], ids=str
)
def test_mutates_args_given_with_a_schema_must_agree(path: str, ns: str, mutates_args: Any, ok: bool) -> None:
    def add_one_(x: Tensor, alpha: float = 1.0) -> Tensor:
        return x

    schema = "(Tensor(a!) x, float alpha=1.0) -> Tensor(a!)"
    if ok:
        tagged_ops.define_inplace(f"{ns}::add_one_", add_one_, schema=schema, mutates_args=mutates_args)
        return
    with pytest.raises(ValueError) as info:
        tagged_ops.define_inplace(f"{ns}::add_one_", add_one_, schema=schema, mutates_args=mutates_args)
    # custom_op's words on 2.13
    assert str(info.value) == (
        f"Attempted to create a custom op with `mutates_args={mutates_args}` and `schema={schema}. "
        f"The schema suggests that the op mutates {{'x'}}which is different from what was provided to us in "
        "`mutates_args`. Please make these consistent."
    )
    assert not hasattr(getattr(torch.ops, ns), "add_one_")


ROUND_TRIP = '(Tensor x, Tensor[] ts, int[2] k=[1, 2], str n="a, (b)", Tensor? t=None, float eps=1e-05, *, Tensor(a!) out, Tensor(b!) o2) -> (Tensor(a!), Tensor(b!))'


def test_the_schema_written_back_parses_to_the_one_given(path: str, ns: str) -> None:
    """Defaults with commas and parentheses, lists, optionals: the registered schema is the one given."""
    op = tagged_ops.declare_out(f"{ns}::round_trip", ROUND_TRIP)
    given = torch._C.parse_schema(f"{ns}::round_trip{ROUND_TRIP}")
    if op.is_native:
        assert str(op.opoverload._schema) == str(given)
    else:  # the fallback's order: buffers between required and defaulted arguments, nothing returned
        names = [a.name for a in op.opoverload._schema.arguments]
        assert names == ["x", "ts", "out", "o2", "k", "n", "t", "eps"]


def test_a_schema_written_back_wrong_is_refused_before_registering(
    path: str, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that guards writing schemas back out from torch's printing of each argument."""
    from tagged_ops import _signature

    join = _signature.join_params
    monkeypatch.setattr(_signature, "join_params", lambda *a, **k: join(*a, **k).replace("?", ""))
    with pytest.raises(RuntimeError, match=r"tagged_ops wrote the schema .* back as .*this is a bug in tagged_ops"):
        tagged_ops.declare_out(f"{ns}::wrong", "(Tensor x, Tensor? t=None, *, Tensor(a!) out) -> Tensor(a!)")
    assert not torch._C._dispatch_dump(f"{ns}::wrong")
    monkeypatch.undo()
    tagged_ops.declare_out(f"{ns}::wrong", "(Tensor x, Tensor? t=None, *, Tensor(a!) out) -> Tensor(a!)")
