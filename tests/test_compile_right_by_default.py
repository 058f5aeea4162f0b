"""Compiled code gives eager's values by default where torch's compiler loses a write or drops a clone.

Three patterns random programs found (tests/test_compile_fuzz.py), each shared by
raw ``custom_op`` ops:

1. an op writes an input (a parameter, a buffer, a leaf that requires grad, or a view
   of one through ``detach``) under ``torch.no_grad()``, and the function goes on to use
   it under autograd: the backward reused the written input's memory
   (``tagged_ops/_fixes/donated_buffers.py``);
2. a clone (or a copy into a fresh tensor) of a value an op then writes in place:
   Inductor dropped the clone (``tagged_ops/_fixes/clone_of_written_value.py``);
3. ``x0.copy_(x1); op_(x1, x0)``: torch's own, plain ATen too (a canary below).

And on 2.3.1, a direct call on a view with an offset, then a clone of that view: Inductor
reused the written view's alias as a larger buffer, a heap overflow
(``tagged_ops/_fixes/reuse_of_mutated_alias.py``).

Each pattern runs eager and compiled (``fullgraph=True``), through the handle and
through ``torch.ops``, on both paths; values, every input after the call, and
gradients must match. The canaries fail once torch fixes a bug (then its fix can go).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import pytest
import torch
from torch import Tensor

import tagged_ops
from tagged_ops._compat_compiler import compiler_lowers_mutable_ops

from ._raw_programs import (
    CLONES,
    COPY_THEN_WRITE,
    DONATED,
    VIEWS_V1,
    torch_gets_wrong,
    torch_reuses_a_mutated_alias,
)
from .fixes._confined import has_the_bug

RAW_FACT = "torch_gets_wrong"  # recorded for compat_matrix.md (tests/_results.py)

Program = Callable[..., Any]


class Ops:
    """``axpby_(w, x, a)``: w := a * w + x (in-place); ``mix(a, b, out=o)``: o := a + 2 b;
    ``rev(src, out=o)``: o := src reversed along dim 0, reading ``src`` while writing ``o``.
    Each through its handle, or through ``torch.ops`` in the registered op's form."""

    def __init__(self, ns: str, route: str) -> None:
        @tagged_ops.define_inplace(f"{ns}::axpby_")
        def axpby_(w: Tensor, x: Tensor, a: float) -> Tensor:
            return w.mul_(a).add_(x)

        @tagged_ops.define_out(f"{ns}::mix")
        def mix(a: Tensor, b: Tensor, *, out: Tensor) -> Tensor:
            return torch.add(a, b * 2, out=out)

        @tagged_ops.define_out(f"{ns}::rev")
        def rev(src: Tensor, *, out: Tensor) -> Tensor:
            n = src.shape[0]
            for i in range(n):  # writes out[i] before reading src[n - 1 - i]: wrong if they alias
                out[i] = src[n - 1 - i]
            return out

        self.handles = (axpby_, mix, rev)
        if route == "handle":
            self.axpby_, self.mix, self.rev = axpby_, mix, rev
            return
        ops = getattr(torch.ops, ns)
        native = axpby_.is_native
        self.axpby_ = lambda w, x, a: ops.axpby_.default(w, x, a)
        if native:
            self.mix = lambda a, b, *, out: ops.mix.default(a, b, out=out)
            self.rev = lambda src, *, out: ops.rev.default(src, out=out)
        else:
            self.mix = lambda a, b, *, out: ops.mix.default(a, b, out)
            self.rev = lambda src, *, out: ops.rev.default(src, out)


def _clone(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, torch.nn.Module):
        import copy

        return copy.deepcopy(value)
    return value


def assert_compiled_matches_eager(
    program: Program, make_inputs: Callable[[], tuple[Any, ...]], *, dynamic: bool = False
) -> None:
    """Run ``program`` eager and compiled on equal inputs: outputs, inputs after the call and gradients agree."""
    inputs = make_inputs()
    runs = {}
    for how in ("eager", "compiled"):
        torch.compiler.reset()
        args = tuple(_clone(a) for a in inputs)
        fn = program if how == "eager" else torch.compile(program, fullgraph=True, dynamic=dynamic)
        out = fn(*args)
        if isinstance(out, Tensor) and out.requires_grad:
            out.sum().backward()
        tensors = [a for a in args if isinstance(a, Tensor)]
        for m in (a for a in args if isinstance(a, torch.nn.Module)):
            tensors += [*m.parameters(), *m.buffers()]
        runs[how] = (
            out.detach().clone() if isinstance(out, Tensor) else out,
            [t.detach().clone() for t in tensors],
            [None if t.grad is None else t.grad.clone() for t in tensors],
        )
    (out_e, after_e, grads_e), (out_c, after_c, grads_c) = runs["eager"], runs["compiled"]
    torch.testing.assert_close(out_c, out_e, msg="compiled output differs from eager")
    for i, (c, e) in enumerate(zip(after_c, after_e, strict=True)):
        torch.testing.assert_close(c, e, msg=f"input {i} after the call differs from eager")
    for i, (c, e) in enumerate(zip(grads_c, grads_e, strict=True)):
        assert (c is None) == (e is None), f"gradient {i}: compiled {c}, eager {e}"
        if c is not None:
            torch.testing.assert_close(c, e, msg=f"gradient {i} differs from eager")


def _leaf(*shape: int) -> Tensor:
    return torch.randn(*shape, dtype=torch.float64).requires_grad_()


def _plain(*shape: int) -> Tensor:
    return torch.randn(*shape, dtype=torch.float64)


class _EMA(torch.nn.Module):
    """A parameter and a running buffer updated in place by ops, then a forward through them."""

    def __init__(self, ops: Ops | None = None) -> None:
        super().__init__()
        self.ops = ops
        self.weight = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
        self.register_buffer("running", torch.zeros(3, dtype=torch.float64))

    def forward(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            assert self.ops is not None
            self.ops.axpby_(self.weight, x, 0.5)
            self.ops.axpby_(self.running, x.mean(0), 0.9)
        return (self.weight.sin() * x + self.running).sum()


def _no_grad_writes(ops: Ops) -> dict[str, tuple[Program, Callable[[], tuple[Any, ...]]]]:
    def leaf_under_no_grad(x: Tensor, w: Tensor) -> Tensor:
        with torch.no_grad():
            ops.axpby_(w, x, 0.5)
        return (w.sin() * x).sum()

    def through_detach(x: Tensor, w: Tensor) -> Tensor:
        wd = w.detach()
        ops.axpby_(wd, x, 0.5)
        ops.mix(wd, wd, out=x)
        return (w.sin() * x).sum()

    def through_a_view_of_detach(x: Tensor, w: Tensor) -> Tensor:
        wd = w.detach()
        ops.axpby_(wd.reshape(-1), x.reshape(-1), 0.5)
        ops.mix(wd, wd, out=x)
        return (w.sin() * x).sum()

    def out_into_a_leaf(x: Tensor, w: Tensor) -> Tensor:
        with torch.no_grad():
            ops.mix(x, x, out=w)
        return (w * x).sum()

    def a_view_of_an_input(x: Tensor, w: Tensor) -> Tensor:
        with torch.no_grad():
            ops.axpby_(w[1:], x[1:], 0.5)
        return (w.cos() * x).sum()

    def a_view_of_an_intermediate(x: Tensor, w: Tensor) -> Tensor:
        h = w * 2
        with torch.no_grad():
            ops.axpby_(h.detach()[:, 1:], x[:, 1:], 0.5)
        return (h * x).sum()

    def module_state(x: Tensor, m: torch.nn.Module) -> Tensor:
        return m(x)

    return {
        "leaf under no_grad": (leaf_under_no_grad, lambda: (_plain(4, 3), _leaf(4, 3))),
        "through detach": (through_detach, lambda: (_plain(4, 3), _leaf(4, 3))),
        "through a view of detach": (through_a_view_of_detach, lambda: (_plain(4, 3), _leaf(4, 3))),
        "out= into a leaf": (out_into_a_leaf, lambda: (_plain(4, 3), _leaf(4, 3))),
        "a view of an input": (a_view_of_an_input, lambda: (_plain(4, 3), _leaf(4, 3))),
        "a view of an intermediate": (a_view_of_an_intermediate, lambda: (_plain(4, 3), _leaf(4, 3))),
        "module parameter and buffer": (module_state, lambda: (_plain(4, 3), _EMA(ops))),
    }


def _clones_of_written_values(ops: Ops) -> dict[str, tuple[Program, Callable[[], tuple[Any, ...]]]]:
    def clone_then_write(x: Tensor, z: Tensor) -> Tensor:
        ops.axpby_(x, z, 1.0)
        y = x.clone()
        ops.axpby_(x, y, 0.5)
        return y

    def copy_into_fresh_then_write(x: Tensor, z: Tensor) -> Tensor:
        ops.axpby_(x, z, 1.0)
        y = x.new_zeros(x.shape)
        y.copy_(x)
        ops.axpby_(x, y, 0.5)
        return y

    def clone_then_out(x: Tensor, z: Tensor) -> Tensor:
        y = x.clone()  # pytorch/pytorch#198031: compiled to rev(x, out=x)
        ops.rev(y, out=x)
        return y * 1

    def clone_of_out_then_write(x: Tensor, z: Tensor) -> Tensor:
        o = torch.empty_like(x)
        ops.mix(x, z, out=o)
        y = o.clone()
        ops.mix(y, z, out=o)
        return y + o

    def clone_of_a_view(x: Tensor, z: Tensor) -> Tensor:
        ops.axpby_(x[1:], z[1:], 1.0)
        y = x[1:].clone()
        ops.axpby_(x[1:], y, 0.5)
        return y

    def clone_of_an_intermediate(x: Tensor, z: Tensor) -> Tensor:
        h = x * 3
        ops.axpby_(h, z, 1.0)
        y = h.clone()
        ops.axpby_(h, y, 0.5)
        return y + h

    def clone_of_a_module_buffer(x: Tensor, m: torch.nn.Module) -> Tensor:
        ops.axpby_(m.running, x.mean(0), 0.9)
        snapshot = m.running.clone()
        ops.axpby_(m.running, snapshot, 0.5)
        return snapshot

    return {
        "clone, then write": (clone_then_write, lambda: (_plain(4, 3), _plain(4, 3))),
        "copy into a fresh tensor, then write": (copy_into_fresh_then_write, lambda: (_plain(4, 3), _plain(4, 3))),
        "clone, then out= into the source": (clone_then_out, lambda: (_plain(5, 3), _plain(5, 3))),
        "clone of an out buffer, then write": (clone_of_out_then_write, lambda: (_plain(4, 3), _plain(4, 3))),
        "clone of a view": (clone_of_a_view, lambda: (_plain(4, 3), _plain(4, 3))),
        "clone of an intermediate": (clone_of_an_intermediate, lambda: (_plain(4, 3), _plain(4, 3))),
        "clone of a module buffer": (clone_of_a_module_buffer, lambda: (_plain(4, 3), _EMA())),
    }


def _needs_compilable_direct_calls(route: str) -> None:
    if route == "torch.ops" and not compiler_lowers_mutable_ops():
        pytest.xfail(f"torch {torch.__version__}'s Inductor compiles no direct call of a mutating custom op")


PATTERN_1 = sorted(_no_grad_writes(Ops.__new__(Ops)))
PATTERN_2 = sorted(_clones_of_written_values(Ops.__new__(Ops)))


@functools.cache
def torch_refuses_compiled_no_grad_writes_of_leaves() -> bool:
    """Whether compiled code raises on ATen's own in-place write of a leaf under no_grad (2.2)."""

    def aten(x: Tensor, w: Tensor) -> Tensor:
        with torch.no_grad():
            w.mul_(0.5).add_(x)
        return (w.sin() * x).sum()

    torch.compiler.reset()
    try:
        torch.compile(aten, fullgraph=True)(_plain(4, 3), _leaf(4, 3))
    except RuntimeError as e:
        return "leaf Variable that requires grad" in str(e)
    finally:
        torch.compiler.reset()
    return False


#: Writes of a leaf that requires grad itself (not of a view or a detached alias).
WRITES_OF_THE_LEAF = ("leaf under no_grad", "out= into a leaf")


@pytest.mark.parametrize("route", ["handle", "torch.ops"])
@pytest.mark.parametrize("name", PATTERN_1)
def test_writes_under_no_grad_of_inputs_used_by_autograd(path: str, ns: str, route: str, name: str) -> None:
    _needs_compilable_direct_calls(route)
    program, make_inputs = _no_grad_writes(Ops(ns, route))[name]
    if name in WRITES_OF_THE_LEAF and torch_refuses_compiled_no_grad_writes_of_leaves():
        # torch refuses the compiled write loudly, ATen's own too: so do we, never a wrong value
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            assert_compiled_matches_eager(program, make_inputs)
        return
    assert_compiled_matches_eager(program, make_inputs)


@pytest.mark.parametrize("route", ["handle", "torch.ops"])
@pytest.mark.parametrize("name", PATTERN_2)
def test_clones_of_values_an_op_writes(path: str, ns: str, route: str, name: str) -> None:
    _needs_compilable_direct_calls(route)
    program, make_inputs = _clones_of_written_values(Ops(ns, route))[name]
    assert_compiled_matches_eager(program, make_inputs)


@pytest.mark.parametrize("pattern", ["no_grad write", "clone"])
def test_both_patterns_with_dynamic_shapes(path: str, ns: str, pattern: str) -> None:
    ops = Ops(ns, "handle")
    programs = _no_grad_writes(ops) if pattern == "no_grad write" else _clones_of_written_values(ops)
    program, make_inputs = programs["through detach" if pattern == "no_grad write" else "clone, then write"]
    assert_compiled_matches_eager(program, make_inputs, dynamic=True)


# -- canaries: torch's own behaviour, measured where tagged_ops was never imported ---------------


@pytest.fixture(scope="module")
def raw(request: pytest.FixtureRequest) -> dict[str, bool | None]:
    return torch_gets_wrong()


def test_canary_donated_buffer_overwrites_a_written_input(
    raw: dict[str, bool | None], record_property: Callable[[str, object], None]
) -> None:
    """Fails once torch stops donating a saved tensor it writes into an input: retire _fixes/donated_buffers.py."""
    record_property(RAW_FACT, raw)
    import torch._functorch.config as functorch_config

    if not getattr(functorch_config, "donated_buffer", False):
        pytest.skip(f"torch {torch.__version__} donates no saved tensors: the fix has nothing to patch here")
    assert any(raw[name] for name in DONATED), {name: raw[name] for name in DONATED}


def test_canary_clone_of_a_written_value_is_dropped(raw: dict[str, bool | None]) -> None:
    """Fails once torch keeps such clones itself: retire _fixes/clone_of_written_value.py."""
    if all(raw[name] is None for name in CLONES):
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no mutating custom op")
    assert any(raw[name] for name in CLONES), {name: raw[name] for name in CLONES}


def test_canary_a_mutated_view_of_an_intermediate_is_read_out_of_bounds(raw: dict[str, bool | None]) -> None:
    """With ``auto_functionalized`` v1 (2.3-2.5, or the v2 switch off), a raw op writing rows or columns
    of ``h = w * 2`` compiles to other values than eager. Fails once torch compiles both right: retire
    _fixes/mutated_views_v1.py's graph rewrite. Ours: the "a view of an intermediate" cases above and
    tests/test_overloads.py's "v1" runs."""
    if all(raw[name] is None for name in VIEWS_V1):  # 2.2: no mutable op at all; 2.15: not with v1
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles neither program with auto_functionalized v1")
    assert any(raw[name] for name in VIEWS_V1), {name: raw[name] for name in VIEWS_V1}


@pytest.fixture(scope="module")
def raw_alias_reuse() -> bool | None:
    """Does Inductor hand a raw op's written view's alias to the next kernel as its buffer? (None: no direct call compiles.)"""
    return torch_reuses_a_mutated_alias()


def test_canary_inductor_reuses_a_mutated_alias(
    raw_alias_reuse: bool | None, record_property: Callable[[str, object], None]
) -> None:
    """A direct call that writes a view with an offset, then a clone of the view: Inductor hands the
    written view's alias to the next kernel as its buffer (raw ops, a heap overflow) on exactly the
    releases tests/fixes/_confined.py lists (2.3); fails on a release that answers otherwise.
    _fixes/reuse_of_mutated_alias.py retires with the last listed release."""
    record_property("raw_reuses_mutated_alias", raw_alias_reuse)
    if raw_alias_reuse is None:
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no direct call of a mutating custom op")
    expected = has_the_bug("reuse_of_mutated_alias", torch.__version__)
    assert raw_alias_reuse is expected, (
        f"torch {torch.__version__} {'reuses' if raw_alias_reuse else 'no longer reuses'} a mutated alias: "
        "update tests/fixes/_confined.py (and retire _fixes/reuse_of_mutated_alias.py once no release has the bug)"
    )


def test_mutated_aliases_are_never_reused(raw_alias_reuse: bool | None) -> None:
    """The same program through tagged_ops: the alias is never reused, on any release.

    The compiled-vs-eager side is ``test_clones_of_values_an_op_writes[...clone of a view-torch.ops]``."""
    if raw_alias_reuse is None:
        pytest.skip(f"torch {torch.__version__}'s Inductor compiles no direct call of a mutating custom op")
    assert torch_reuses_a_mutated_alias(through_tagged_ops=True) is False


def test_copy_then_a_write_that_reads_the_copy(path: str, ns: str, raw: dict[str, bool | None]) -> None:
    """``x0.copy_(x1); op_(x1, x0)``: compiled as eager wherever plain ATen's form is (torch's, recorded)."""
    ops = Ops(ns, "handle")

    def program(x0: Tensor, x1: Tensor) -> Tensor:
        x0.copy_(x1)
        ops.axpby_(x1, x0, 0.5)
        return torch.ones(1) + 0

    aten_wrong = raw[COPY_THEN_WRITE[0]]
    if aten_wrong:
        pytest.xfail(f"torch {torch.__version__} compiles the plain ATen form wrongly too (torch's bug)")
    assert_compiled_matches_eager(program, lambda: (torch.zeros(4, 3), torch.arange(12.0).reshape(4, 3)))
