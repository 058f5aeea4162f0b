"""Compiled code that a later process loads from torch's caches finds every op it names.

Code loaded from Inductor's and AOTAutograd's on-disk caches, or a saved export, traces
nothing: the ops it names (an op's untagged twin, which compiled code records on the
native path) must exist before it runs, although eager code never defines them. Each
case compiles (or exports and saves) in one fresh process and loads in a second one,
on both paths.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest
import torch

import tagged_ops

from ._subprocess import env_for_path
from .fixes._confined import has_the_bug

# An out= op used only in another op's backward formula: Dynamo traces the forward,
# which holds no tagged op, and AOTAutograd's cache hit skips tracing the backward.
IN_A_BACKWARD = textwrap.dedent(
    """
    import json, torch, tagged_ops

    @tagged_ops.define_out("cached_bw::twice_out")
    def twice_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return out.copy_(x * 2)

    @torch.library.custom_op("cached_bw::sin", mutates_args=())
    def sin(x: torch.Tensor) -> torch.Tensor:
        return x.sin()

    @sin.register_fake
    def _(x):
        return torch.empty_like(x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        buf = torch.empty_like(grad)
        twice_out(grad * x.cos(), out=buf)
        return buf / 2

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    sin.register_autograd(backward, setup_context=setup_context)

    def fn(x):
        return sin(x) * 3

    x = torch.linspace(-1, 1, 7, requires_grad=True)
    torch.compile(fn, fullgraph=True)(x).sum().backward()
    torch.testing.assert_close(x.grad, 3 * x.detach().cos())
    from torch._dynamo.utils import counters
    print(json.dumps({"aot_hits": counters["aot_autograd"].get("autograd_cache_hit", 0)}))
    """
)

# A program exported, decomposed and saved; loaded and run in another process.
SAVED_EXPORT = textwrap.dedent(
    """
    import sys, torch, tagged_ops

    @tagged_ops.define_inplace("cached_export::scale_")
    def scale_(x: torch.Tensor, alpha: float) -> torch.Tensor:
        return x.mul_(alpha)

    @tagged_ops.define_out("cached_export::add_out")
    def add_out(x: torch.Tensor, y: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.add(x, y, out=out)

    class M(torch.nn.Module):
        def forward(self, x, y):
            o = torch.empty_like(x)
            add_out(x[1:], y, out=o[1:])
            scale_(o[1:], 3.0)
            return o[1:] + 1

    x, y = torch.arange(5.0), torch.ones(4)
    path = sys.argv[1]
    if sys.argv[2] == "save":
        ep = torch.export.export(M(), (x, y)).run_decompositions()
        torch.export.save(ep, path)
    else:
        got = torch.export.load(path).module()(x, y)
        torch.testing.assert_close(got, (x[1:] + y) * 3 + 1)
    print("ok")
    """
)


# The same program's out= call as a raw classic mutable op, where tagged_ops was never imported.
RAW_SAVED_EXPORT = textwrap.dedent(
    """
    import sys, torch

    fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
    lib = torch.library.Library("raw_export", "DEF")
    lib.define("add_out(Tensor x, Tensor y, Tensor(a!) out) -> ()")
    def add_out(x, y, out):
        torch.add(x, y, out=out)

    lib.impl("add_out", add_out, "CompositeExplicitAutograd")
    fake("raw_export::add_out", lambda x, y, out: None, lib=lib)

    class M(torch.nn.Module):
        def forward(self, x, y):
            o = torch.empty_like(x)
            torch.ops.raw_export.add_out(x[1:], y, o[1:])
            return o[1:] + 1

    x, y = torch.arange(5.0), torch.ones(4)
    path = sys.argv[1]
    if sys.argv[2] == "save":
        torch.export.save(torch.export.export(M(), (x, y)).run_decompositions(), path)
    else:
        if len(sys.argv) > 3:  # "cured": what _fixes/saved_export_loading.py makes the deserializer do
            import torch._higher_order_ops.auto_functionalize
        torch.testing.assert_close(torch.export.load(path).module()(x, y), x[1:] + y + 1)
    print("ok")
    """
)


def _run(code: str, args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("fallback", [False, True], ids=["default", "fallback"])
def test_backward_loaded_from_the_caches_finds_the_ops_it_calls(tmp_path: Path, fallback: bool) -> None:
    if not hasattr(torch.library, "custom_op"):
        pytest.skip(f"torch {torch.__version__} has no torch.library.custom_op to put the op in a backward (2.4+)")
    env = env_for_path(fallback=fallback)
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        TORCHINDUCTOR_FX_GRAPH_CACHE="1",
        TORCHINDUCTOR_AUTOGRAD_CACHE="1",
    )
    first = json.loads(_run(IN_A_BACKWARD, [], env))
    second = json.loads(_run(IN_A_BACKWARD, [], env))  # the same graphs, from the caches
    assert first["aot_hits"] == 0
    if second["aot_hits"] == 0:
        # 2.13+ loads this backward from AOTAutograd's cache (measured); older releases may
        # not cache it (2.4 ships the cache's module unused), and then nothing was loaded
        if tagged_ops.NATIVE_TAGS:
            pytest.fail("the second process compiled afresh: the case was not exercised")
        pytest.skip(f"torch {torch.__version__} compiled the backward afresh: nothing was loaded from a cache")


@pytest.mark.parametrize("fallback", [False, True], ids=["default", "fallback"])
def test_saved_export_loads_and_runs_in_a_fresh_process(tmp_path: Path, fallback: bool) -> None:
    env = env_for_path(fallback=fallback)
    path = str(tmp_path / "program.pt2")
    assert _run(SAVED_EXPORT, [path, "save"], env) == "ok"
    assert _run(SAVED_EXPORT, [path, "load"], env) == "ok"


def _raw_saved_export(tmp_path: Path, *, cured: bool = False) -> tuple[bool | None, str]:
    """Does a raw op's saved export load in a fresh process? (None: it does not even export here,
    2.2.2), and the loading process's stderr. ``cured``: the loading process first imports what
    _fixes/saved_export_loading.py makes the deserializer import, so the bug cannot show."""
    path = str(tmp_path / "raw.pt2")
    steps = [
        subprocess.run(
            [sys.executable, "-c", RAW_SAVED_EXPORT, path, *step], capture_output=True, text=True, timeout=600
        )
        for step in (["save"], ["load", "cured"] if cured else ["load"])
    ]
    return (None if steps[0].returncode else steps[1].returncode == 0), steps[1].stderr


def _saved_export_canary(loads: bool, stderr: str) -> str | None:
    """What is wrong with torch's answer ``loads`` for this release, if anything: the canary's verdict."""
    if has_the_bug("saved_export_loading", torch.__version__):
        if loads:
            return (
                f"torch {torch.__version__} loads a raw op's saved export: update tests/fixes/_confined.py "
                "(and retire _fixes/saved_export_loading.py once no release has the bug)"
            )
        if "auto_functionalized" not in stderr:
            return f"a raw op's saved export fails to load for another reason: {stderr[-2000:]}"
        return None
    if not loads:
        return f"torch {torch.__version__} cannot load a raw op's saved export: {stderr[-2000:]}"
    return None


def test_canary_a_raw_saved_export_does_not_load_in_a_fresh_process(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """torch.export.load of a raw mutable op's program, in a process that did not export it, fails
    with SerializeError ("Unsupported target type ... auto_functionalized") on exactly the releases
    tests/fixes/_confined.py lists (2.3-2.6); fails on a release that answers otherwise.
    _fixes/saved_export_loading.py retires with the last listed release."""
    loads, stderr = _raw_saved_export(tmp_path)
    record_property("raw_saved_export_loads", loads)
    if loads is None:
        pytest.skip(f"torch {torch.__version__} cannot export a raw mutable op's program")
    problem = _saved_export_canary(loads, stderr)
    assert problem is None, problem


def test_the_saved_export_canary_fails_where_the_bug_is_cured(tmp_path: Path) -> None:
    """The canary can fail: on a release with the bug, the loading process cured by hand (the module
    that defines ``auto_functionalized`` imported first) loads, and the canary's verdict says so."""
    if not has_the_bug("saved_export_loading", torch.__version__):
        pytest.skip(f"torch {torch.__version__} loads a raw op's saved export: there is no bug to cure")
    loads, stderr = _raw_saved_export(tmp_path, cured=True)
    assert loads is True, stderr[-2000:]
    problem = _saved_export_canary(loads, stderr)
    assert problem is not None and "update tests/fixes/_confined.py" in problem
