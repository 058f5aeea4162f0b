"""Defining a qualified name again works; the newest definition wins, also through old handles."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import Tensor

import tagged_ops

from ._subprocess import env_for_path


def _define(ns: str, fn_name: str) -> tagged_ops.TaggedOp:
    @tagged_ops.define_inplace(f"{ns}::apply_")
    def apply_(x: Tensor) -> Tensor:
        getattr(x, fn_name)()
        return x

    return apply_


def test_newest_definition_wins_through_old_handles(path: str, ns: str) -> None:
    first = _define(ns, "sin_")
    second = _define(ns, "cos_")
    for handle in (first, second):
        x = torch.randn(3)
        expected = x.cos()
        assert handle(x) is x
        torch.testing.assert_close(x, expected)
    x = torch.randn(3)
    torch.ops.__getattr__(ns).apply_(x)
    assert first.schema == second.schema


def test_many_redefinitions_never_crash(path: str, ns: str) -> None:
    handles = [_define(ns, "neg_") for _ in range(30)]
    x = torch.ones(2)
    for h in handles:
        h(x)
    assert torch.equal(x, torch.ones(2))  # 30 negations
    opcheck_result = tagged_ops.opcheck(handles[0], (torch.randn(3),))
    assert set(opcheck_result.values()) == {"SUCCESS"}


def test_switching_path_between_definitions(ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tagged_ops.FALLBACK_ENV_VAR, "1")
    old = _define(ns, "sin_")
    assert not old.is_native
    monkeypatch.delenv(tagged_ops.FALLBACK_ENV_VAR)
    new = _define(ns, "cos_")
    assert old.is_native == new.is_native == tagged_ops.NATIVE_TAGS
    x = torch.randn(3)
    expected = x.cos()
    assert old(x) is x
    torch.testing.assert_close(x, expected)
    compiled = torch.compile(lambda t: old(t), fullgraph=True)
    y = torch.randn(3)
    expected = y.cos()
    compiled(y)
    torch.testing.assert_close(y, expected)


def test_module_reload(path: str, ns: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    module = tmp_path / f"{ns}_mod.py"
    module.write_text(
        textwrap.dedent(
            f"""
            import torch
            import tagged_ops

            @tagged_ops.define_out("{ns}::double_out")
            def double_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
                torch.mul(x, FACTOR, out=out)
                return out

            FACTOR = 2
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # no bytecode: an edit within the same second and of the same size would reload the stale .pyc
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    mod = importlib.import_module(f"{ns}_mod")
    old_handle = mod.double_out
    module.write_text(module.read_text().replace("FACTOR = 2", "FACTOR = 3  # edited"))
    importlib.invalidate_caches()
    mod = importlib.reload(mod)
    x, o = torch.ones(2), torch.empty(2)
    assert old_handle(x, out=o) is o
    assert torch.equal(o, torch.full((2,), 3.0))
    assert mod.double_out(x, out=o) is o
    sys.modules.pop(f"{ns}_mod", None)


@pytest.mark.parametrize("kind", ["inplace", "out"])
def test_ops_captured_before_a_redefinition_call_the_newest(path: str, ns: str, kind: str) -> None:
    """``torch.ops...default`` objects and compiled code captured earlier keep working, as with native custom_op.

    Before: a captured op crashed (native path) or ran a stale kernel that wrote nothing (fallback).
    """

    def define(factor: float) -> tagged_ops.TaggedOp:
        if kind == "inplace":
            return tagged_ops.define_inplace(
                f"{ns}::scale_", lambda x: x.mul_(factor), schema="(Tensor(a!) x) -> Tensor(a!)"
            )
        return tagged_ops.define_out(
            f"{ns}::scale_out",
            lambda x, *, out: torch.mul(x, factor, out=out),
            schema="(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
        )

    handle = define(2.0)
    captured = handle.opoverload
    x, o = torch.ones(3), torch.zeros(3)
    compiled = torch.compile(
        (lambda t, b: handle(t)) if kind == "inplace" else (lambda t, b: handle(t, out=b)),
        backend="aot_eager",
        fullgraph=True,
    )
    compiled(x.clone(), o)
    for round in range(4):
        define(3.0 + round)
        expected = torch.full((3,), 3.0 + round)
        x, o = torch.ones(3), torch.zeros(3)
        args, kwargs = handle.to_op_arguments(x, **({} if kind == "inplace" else {"out": o}))
        captured(*args, **kwargs)
        torch.testing.assert_close(x if kind == "inplace" else o, expected)
        x, o = torch.ones(3), torch.zeros(3)
        compiled(x, o)
        torch.testing.assert_close(x if kind == "inplace" else o, expected)


def test_redefinition_with_another_schema_gets_a_fresh_entry(path: str, ns: str) -> None:
    """Ops captured earlier follow a redefinition only while the schema stays the same:
    an edited signature must not inherit the old schema from the kept entry (opcheck,
    eager, compiled)."""

    def first(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2.0)
        return x

    def second(x: torch.Tensor, alpha: float = 3.0) -> torch.Tensor:
        x.mul_(alpha)
        return x

    tagged_ops.define_inplace(f"{ns}::scale_", first)(torch.ones(2))
    op = tagged_ops.define_inplace(f"{ns}::scale_", second)
    assert "alpha" in op.schema
    tagged_ops.opcheck(op, (torch.ones(3),), {"alpha": 4.0})
    x = torch.ones(3)
    torch.compile(lambda t: op(t[1:], 5.0), fullgraph=True)(x)
    assert torch.equal(x, torch.tensor([1.0, 5.0, 5.0]))


@pytest.mark.parametrize("first", ["native", "fallback"])
def test_compile_after_switching_path_in_one_process(ns: str, first: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor caches per op name must not carry the old schema into the new definition."""
    from tagged_ops.testing import define_sin_ops

    def compile_and_check() -> None:
        ops = define_sin_ops(ns)
        torch._dynamo.reset()
        x, o = torch.randn(4), torch.empty(4)
        expected_x = x.clone()
        expected_x[1:3].sin_()
        expected = expected_x.sin() * 2

        def f(x: Tensor, o: Tensor) -> Tensor:
            ops.sin_(x[1:3])
            return ops.sin_out(x, out=o) * 2

        torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, o), expected)

    for fallback in [False, True] if first == "native" else [True, False]:
        if fallback:
            monkeypatch.setenv(tagged_ops.FALLBACK_ENV_VAR, "1")
        else:
            monkeypatch.delenv(tagged_ops.FALLBACK_ENV_VAR, raising=False)
        compile_and_check()


def test_failed_redefinition_leaves_old_handles_safe(path: str, ns: str) -> None:
    old = _define(ns, "sin_")
    # Refused while checking the definition: the old definition stays in place.
    with pytest.raises(ValueError, match="Schema tagged with torch.Tag.inplace"):
        tagged_ops.define_inplace(f"{ns}::apply_", lambda x: x, schema="(Tensor x) -> Tensor")
    x = torch.zeros(2)
    assert old(x) is x and torch.equal(x, torch.zeros(2))
    # Refused while registering (the old op is already gone): old handles raise, never crash.
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        tagged_ops.define_inplace(f"{ns}::apply_", _neg_, device_types="tpu")
    with pytest.raises(RuntimeError, match=f"{ns}::apply_: its latest definition failed"):
        old(torch.randn(2))
    _define(ns, "neg_")
    x = torch.ones(2)
    assert old(x) is x and torch.equal(x, -torch.ones(2))


def _neg_(x: Tensor) -> Tensor:
    x.neg_()
    return x


@pytest.mark.parametrize("failing", ["fake kernel", "handle call"])
def test_definition_failing_midway_leaves_every_name_free(
    path: str, ns: str, failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A definition that fails after its op is registered removes what it registered, helpers included."""
    from tagged_ops import _compat, _definition

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broken on purpose")

    if failing == "fake kernel":  # after the op's own schema is defined
        monkeypatch.setattr(_compat, "register_fake", broken)
    else:
        monkeypatch.setattr(_definition, "make_first_call", broken)
    with pytest.raises(RuntimeError, match="broken on purpose"):
        _define(ns, "sin_")
    assert not hasattr(getattr(torch.ops, ns), "apply_")
    monkeypatch.undo()
    op = _define(ns, "neg_")  # every name is free again: no "registered multiple times"
    x = torch.ones(2)
    assert op(x) is x and torch.equal(x, -torch.ones(2))
    torch.testing.assert_close(torch.compile(op, fullgraph=True)(torch.ones(2)), -torch.ones(2))


def _call_in_worker(op: tagged_ops.TaggedOp) -> list[float]:
    x = torch.ones(2)
    return op(x, out=torch.empty(2)).tolist()


def test_handles_pickle_by_name_into_spawned_workers(
    path: str, ns: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    """A handle in a spawn-start DataLoader's Dataset or a Pool's arguments: the worker imports the
    defining module and gets its own handle (before: PicklingError, native custom_op too)."""
    import multiprocessing
    import pickle

    module = tmp_path / f"{ns}_pickled.py"
    module.write_text(
        textwrap.dedent(
            f"""
            import torch
            import tagged_ops

            @tagged_ops.define_out("{ns}::triple_out")
            def triple_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
                torch.mul(x, 3, out=out)
                return out
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    op = importlib.import_module(f"{ns}_pickled").triple_out
    assert pickle.loads(pickle.dumps(op)) is op
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_call_in_worker, (op,)) == [3.0, 3.0]
    sys.modules.pop(f"{ns}_pickled", None)


def test_unpickling_a_handle_whose_op_is_not_defined_says_so(ns: str) -> None:
    import pickle

    from tagged_ops._handle import _handle_named

    with pytest.raises(pickle.UnpicklingError, match=f"{ns}::gone: no op of that name is defined in this process"):
        _handle_named(f"{ns}::gone", "tagged_ops")


_DISPATCH_MODE_THEN_RELOAD = """
import gc, torch, tagged_ops
from torch.utils._python_dispatch import TorchDispatchMode

class Seen(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

def define():
    @tagged_ops.define_out("reload_probe::sin.out")
    def sin_out(x: torch.Tensor, scale: float = 1.0, *, out: torch.Tensor) -> torch.Tensor:
        torch.sin(x, out=out).mul_(scale)
        return out
    return sin_out

op = define()
with Seen():  # torch caches the Python op object in the dispatcher entry here
    op(torch.randn(3), out=torch.empty(3))
op = define()  # a module reload: same schema, new Python op objects
gc.collect()
x, o = torch.randn(3), torch.empty(3)
torch.compile(lambda x, o: op(x, 2.0, out=o), fullgraph=True)(x, o)
assert torch.allclose(o, 2 * x.sin())
print("ok")
"""


@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
@pytest.mark.parametrize("fallback", [False, True])
def test_reload_after_a_dispatch_mode_saw_the_op_then_compile(fallback: bool) -> None:
    """The dispatcher entry kept across a reload caches the Python op object without holding it.

    Before tagged_ops kept those objects alive, the compile after such a reload read
    freed memory (a segfault on the fallback path, 2.13.0: opcheck's schema test is such
    a dispatch mode). A fresh process, as the crash would take the test run with it.
    """
    if not fallback and not tagged_ops.NATIVE_TAGS:
        pytest.skip(f"torch {torch.__version__} has no native tagged custom ops")
    env = env_for_path(fallback=fallback)
    run = subprocess.run([sys.executable, "-c", _DISPATCH_MODE_THEN_RELOAD], env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"exit status {run.returncode}\n" + run.stdout[-2000:] + run.stderr[-4000:]
    assert run.stdout.strip().endswith("ok")
