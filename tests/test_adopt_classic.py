"""``tagged_ops.adopt_classic``: a classic mutable op kept beside tagged ones compiles to eager's values.

The op, as a port keeps one (``scatter_min_``'s shape: in place on ``out``, and a fresh
tensor returned), written through a view of an intermediate under ``auto_functionalized``
v1, which torch compiles wrongly with raw mutable ops (docs/hazards.md). Each run is a
fresh process: the fixes are process-wide once installed, so a test process that already
compiled a tagged op would pass either way.
"""

from __future__ import annotations

import pytest
import torch

import tagged_ops

from ._raw_programs import _last_json_line

_PROGRAM = r"""
import contextlib, json, sys
import torch
adopt = sys.argv[1] == "adopt"
fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
lib = torch.library.Library("adopted", "DEF")
lib.define("min_(Tensor(a!) out, Tensor src) -> Tensor")

def min_(out, src):
    took = (src < out).to(out.dtype)  # a fresh tensor: which elements src gave
    torch.minimum(out, src, out=out)
    return took

lib.impl("min_", min_, "CompositeExplicitAutograd")
fake("adopted::min_", lambda out, src: torch.empty_like(out), lib=lib)
compiler = []
if adopt:
    import tagged_ops
    before = set(sys.modules)
    tagged_ops.adopt_classic("adopted::min_")
    loaded = set(sys.modules) - before
    compiler = sorted(m for m in loaded if m.startswith(("torch._dynamo", "torch._inductor", "tagged_ops._fixes.")))
    compiler = [m for m in compiler if not m.startswith("tagged_ops._fixes._")]  # the package's own helpers

def program(x, w):  # rows of an intermediate, written in place
    h = w * 2
    took = torch.ops.adopted.min_(h[1:3], x[1:3])
    return h * x, took

def v1():  # auto_functionalized v1: the switch off where torch has one (2.5+)
    import torch._inductor.config as inductor_config  # here: on 2.13+ it imports torch._dynamo

    if hasattr(inductor_config, "enable_auto_functionalized_v2"):
        return inductor_config.patch(enable_auto_functionalized_v2=False)
    return contextlib.nullcontext()

def run(fn):
    x = torch.ones(4, 3, dtype=torch.float64)
    w = torch.arange(12.0, dtype=torch.float64).reshape(4, 3) - 4
    return [t.tolist() for t in fn(x, w)]

eager = run(program)
torch.compiler.reset()
try:
    with v1():
        compiled = run(torch.compile(program, fullgraph=True))
    wrong = compiled != eager
except Exception:
    wrong = None  # this torch compiles no such program
print(json.dumps({"wrong": wrong, "compiler_loaded_by_adopting": compiler}))
"""


def _run(how: str) -> dict[str, object]:
    return _last_json_line(_PROGRAM.replace("sys.argv[1]", repr(how)))  # type: ignore[no-any-return]


def test_an_adopted_classic_op_writing_a_view_of_an_intermediate_compiles_right() -> None:
    """Adopted: compiled as eager; adopting loaded neither torch's compiler nor a fix (they load
    with the compiler). Not adopted, torch's answer is the v1 canary's
    (tests/test_compile_right_by_default.py): wrong on 2.4.1 and 2.13.0, no compile on 2.15.0."""
    adopted = _run("adopt")
    assert adopted["compiler_loaded_by_adopting"] == []
    if adopted["wrong"] is None:
        pytest.skip(f"torch {torch.__version__} compiles no mutating custom op with auto_functionalized v1")
    assert adopted["wrong"] is False


def test_a_functional_op_is_refused_by_name(ns: str) -> None:
    lib = torch.library.Library(ns, "DEF")
    lib.define("plain(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match=rf"adopt_classic: {ns}::plain.default writes no argument"):
        tagged_ops.adopt_classic(f"{ns}::plain")


def test_an_undefined_name_gets_the_dispatchers_error(ns: str) -> None:
    with pytest.raises((AttributeError, RuntimeError), match="nothing"):
        tagged_ops.adopt_classic(f"{ns}::nothing")


def test_adopting_twice_is_harmless(ns: str) -> None:
    lib = torch.library.Library(ns, "DEF")
    lib.define("bump_(Tensor(a!) x) -> ()")
    op = getattr(torch.ops, ns).bump_.default
    tagged_ops.adopt_classic(op)
    tagged_ops.adopt_classic(f"{ns}::bump_")


_PATCHES = r"""
import json, sys
import torch
lib = torch.library.Library("adopted_patches", "DEF")
lib.define("min_(Tensor(a!) out, Tensor src) -> Tensor")
lib.impl("min_", lambda out, src: out.clone(), "CompositeExplicitAutograd")
import tagged_ops
if sys.argv[1] == "after":
    import torch._dynamo, torch._functorch.aot_autograd  # the compiler first, then the adoption
tagged_ops.adopt_classic("adopted_patches::min_")
torch.compile(lambda x: x.sin() * 2, fullgraph=True)(torch.ones(3))
patched = set()
for name, module in list(sys.modules.items()):
    if module is None or not name.startswith(("torch._dynamo", "torch._inductor", "torch._functorch", "torch.fx")):
        continue
    for attr, value in list(vars(module).items()):
        if getattr(value, "__tagged_ops_fix__", None) is True:
            patched.add(f"{name}.{attr}")
print(json.dumps({"patched": sorted(patched)}))
"""


def test_adopting_before_the_compiler_loads_patches_what_adopting_after_it_does() -> None:
    """The fixes wait for the compiler's import and then install as they would at once."""
    before = _last_json_line(_PATCHES.replace("sys.argv[1]", repr("before")))
    after = _last_json_line(_PATCHES.replace("sys.argv[1]", repr("after")))
    assert before == after
