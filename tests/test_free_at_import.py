"""Defining and calling ops eagerly loads nothing of torch's compiler; the first trace prepares what compiling needs.

As upstream's test_import_time does it: a fresh interpreter imports torch, then
tagged_ops, defines and declares in-place and out= ops in every form (inferred,
``schema=``, ``pair=True``, ``compile_functional=True``, classic kernels), calls them
through their handles and through ``torch.ops``, and reports which of torch's
modules that loaded. Compared with the classic pattern (``Library.define`` +
``impl`` + ``register_fake``, called through ``torch.ops``) in another fresh
interpreter. Then the same process compiles and exports once, and the results are
checked (the first trace defines the helpers and installs the fixes).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tagged_ops
import tagged_ops._compat_compiler
from tagged_ops import _fixes

from ._subprocess import env_for_path

#: What compiling loads; eager use of tagged ops must load none of it.
COMPILER = ("torch._dynamo", "torch._inductor", "torch.export", "torch.onnx", "torch._functorch.aot_autograd")

#: torch's modules the fallback path may load beyond the classic pattern (which infers no
#: schema), each a small module, on releases whose ``import torch`` does not load it: the table
#: of annotation types schema inference reads (as ``custom_op`` does; tagged_ops._compat_infer_schema).
#: The probe of 2.2's functionalization bug for an op with a defaulted parameter reads
#: ``torch._higher_order_ops.auto_functionalize`` without importing it, so it is not listed.
FALLBACK_EXTRA = {"torch._library.infer_schema", "torch._custom_op.impl"}

_CLASSIC = r"""
import json, sys
import torch
before = set(sys.modules)
fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
lib = torch.library.Library("classic_probe", "DEF")
lib.define("scale_(Tensor(a!) x, float alpha=2.0) -> ()")
lib.define("sin_out(Tensor x, Tensor(a!) out) -> ()")
def scale_(x, alpha=2.0):
    x.mul_(alpha)
def sin_out(x, out):
    torch.sin(x, out=out)
lib.impl("scale_", scale_, "CompositeExplicitAutograd")
lib.impl("sin_out", sin_out, "CompositeExplicitAutograd")
fake("classic_probe::scale_", lambda x, alpha=2.0: None, lib=lib)
fake("classic_probe::sin_out", lambda x, out: None, lib=lib)
x = torch.randn(4)
torch.ops.classic_probe.scale_(x)
torch.ops.classic_probe.scale_(x, 3.0)
torch.ops.classic_probe.sin_out(x, torch.empty(4))
print(json.dumps({"before": sorted(before), "after": sorted(sys.modules)}))
"""

_TAGGED = r"""
import json, sys
import torch
before = set(sys.modules)
import tagged_ops
from torch import Tensor

@tagged_ops.define_inplace("free_probe::scale_")
def scale_(x: Tensor, alpha: float = 2.0) -> Tensor:
    return x.mul_(alpha)

@tagged_ops.define_out("free_probe::sin_out")
def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
    return torch.sin(x, out=out)

def neg(x, *, out):
    return torch.neg(x, out=out)

neg_out = tagged_ops.define_out("free_probe::neg.out", neg, schema="(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", pair=True)
lib = torch.library.Library("free_probe", "FRAGMENT")  # neg.out's functional op, as a library has it
lib.define("neg(Tensor x) -> Tensor")
lib.impl("neg", lambda x: -x, "CompositeExplicitAutograd")

@tagged_ops.define_out("free_probe::cos_out", compile_functional=True)
def cos_out(x: Tensor, *, out: Tensor) -> Tensor:
    return torch.cos(x, out=out)

halve_ = tagged_ops.declare_inplace("free_probe::halve_", "(Tensor(a!) x) -> Tensor(a!)", classic_kernels=True)
def halve_kernel(x):
    x.mul_(0.5)

halve_.register_kernel("cpu", halve_kernel)
double_out = tagged_ops.declare_out("free_probe::double_out", "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
double_out.register_kernel(None, lambda x, *, out: torch.mul(x, 2, out=out))

x, o = torch.ones(4), torch.empty(4)
calls = [
    (scale_, (x,), {}), (scale_, (x, 3.0), {}), (sin_out, (x,), {"out": o}), (neg_out, (x,), {"out": o}),
    (cos_out, (x,), {"out": o}), (halve_, (x,), {}), (double_out, (x,), {"out": o}),
]
for op, args, kwargs in calls:
    op(*args, **kwargs)
    op_args, op_kwargs = op.to_op_arguments(*args, **kwargs)
    op.opoverload(*op_args, **op_kwargs)  # the torch.ops call, in the registered op's form
eager = {"before": sorted(before), "after": sorted(sys.modules), "native": scale_.is_native}

# The first trace: compiled and exported results as eager's.
def f(x, o):
    scale_(x)
    sin_out(x, out=o)
    c = cos_out(o, out=torch.empty_like(o))
    double_out(c, out=o)
    return halve_(o) + neg_out(x, out=torch.empty_like(x))

xe, oe = torch.randn(5), torch.empty(5)
expected = f(xe.clone(), oe.clone())
xc, oc = xe.clone(), oe.clone()
compiled = torch.compile(f, fullgraph=True)(xc, oc)
torch.testing.assert_close(compiled, expected)
torch.testing.assert_close(xc, xe * 2)

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.ones(3))
    def forward(self, x):
        scale_(self.state)
        return sin_out(x, out=torch.empty_like(x)) + self.state

m = M()
exported = torch.export.export(m, (torch.zeros(3),)).module()
torch.testing.assert_close(exported(torch.zeros(3)), torch.full((3,), 2.0))
print(json.dumps(eager))
"""


def _run(code: str, *, fallback: bool) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env_for_path(fallback=fallback)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _loaded(run: dict[str, list[str]]) -> set[str]:
    return set(run["after"]) - set(run["before"])


@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
def test_defining_and_calling_ops_loads_no_more_of_torch_than_the_classic_pattern(path: str) -> None:
    fallback = path == "fallback"
    tagged = _run(_TAGGED, fallback=fallback)
    assert tagged["native"] == (path == "native")
    classic = _run(_CLASSIC, fallback=fallback)
    loaded = {m for m in _loaded(tagged) if m == "torch" or m.startswith("torch.")}
    assert not loaded & set(COMPILER), sorted(loaded & set(COMPILER))
    assert not set(COMPILER) & (set(tagged["after"]) - set(classic["after"]))
    extra = loaded - _loaded(classic)  # torch's modules that tagged_ops loads and the classic pattern does not
    allowed = FALLBACK_EXTRA if fallback or not tagged_ops.NATIVE_TAGS else set()
    assert extra <= allowed, sorted(extra - allowed)
    # The fixes without a definition hook wait for the first trace.
    fixes = {m.rpartition(".")[2] for m in _loaded(tagged) if m.startswith("tagged_ops._fixes.")}
    assert fixes - {"_after_import"} == set(_fixes.AT_DEFINITION)


def test_the_fixes_imported_at_definition_are_those_with_a_definition_hook() -> None:
    """``_fixes.FIXES`` lists every fix module; those with ``at_definition`` are imported with the first
    definition (``AT_DEFINITION``) or wait for the torch module they name (``AFTER_IMPORT``)."""
    folder = Path(_fixes.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    assert set(_fixes.FIXES) == modules
    hooked = {m for m in modules if hasattr(importlib.import_module(f"tagged_ops._fixes.{m}"), "at_definition")}
    assert set(_fixes.AT_DEFINITION) | set(_fixes.AFTER_IMPORT) == hooked
    assert not set(_fixes.AT_DEFINITION) & set(_fixes.AFTER_IMPORT)
    for module in _fixes.AFTER_IMPORT.values():
        assert importlib.util.find_spec(module.rpartition(".")[0]) is not None, module  # its package exists


_WAKING = r"""
import json, sys
import torch
import tagged_ops
from tagged_ops import _fixes

def define(name, pair):
    fn = lambda x, *, out: torch.neg(x, out=out)
    return tagged_ops.define_out(name, fn, schema="(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", pair=pair)

kept = define("waking::neg.out", False)
gone = define("waking::gone.out", False)
def seen():  # what the two waiting fixes did so far
    pairing = sys.modules.get("tagged_ops._fixes.out_variant_pairing")  # a redefinition imports it
    return {
        "pair": dict(pairing._PAIR) if pairing else {},
        "auto_functionalize": "torch._higher_order_ops.auto_functionalize" in sys.modules,
    }
before = seen()
again = define("waking::neg.out", True)  # defined again before the import: its second definition counts
for module in _fixes.AFTER_IMPORT.values():
    try:
        __import__(module)
    except ImportError:  # a release without the module: its fix waits for ever
        pass
late = define("waking::late.out", False)
print(json.dumps({"before": before, "after": seen(), "native": kept.is_native}))
"""


@pytest.mark.usefixtures("sets_the_fallback_switch_itself")
def test_fixes_that_wait_for_an_import_see_every_op_defined_before_it_and_after(path: str) -> None:
    """A fix of ``AFTER_IMPORT`` is imported with its module; its definition hook then runs for the
    live definitions made before (the latest of each name) and for every one made after."""
    done = _run(_WAKING, fallback=path == "fallback")
    assert done["before"]["pair"] == {}
    # what saved_export_loading imports with the deserializer (2.7+: `import torch` already has)
    assert done["after"]["auto_functionalize"]
    if done["native"] and importlib.util.find_spec("torch._library._out_variant") is not None:
        pair = {"waking::neg.out": True, "waking::gone.out": False, "waking::late.out": False}
    else:  # no out-variant pairing here, or untagged .out ops: nothing to keep apart
        pair = {}
    assert done["after"]["pair"] == pair


def test_the_compiler_modules_named_here_exist() -> None:
    """A rename upstream must fail here, not make the test above pass vacuously."""
    import importlib.util

    for name in COMPILER:
        assert importlib.util.find_spec(name) is not None, name
    assert torch.__version__  # the torch under test
