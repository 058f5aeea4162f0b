"""Programs over raw custom ops (no tagged_ops), compiled in a fresh process: does torch still get them wrong?

The canaries of tagged_ops' fixes (``tagged_ops/_fixes/``): a fix patches torch
process-wide at its first trace, so torch's own behaviour is measured where
tagged_ops was never imported. Each program runs eager and compiled
(``fullgraph=True``); the answer per program is True (compiled differs from eager:
the bug is there), False, or None (it does not compile on this torch).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

_PRELUDE = r"""
import contextlib, json, sys
import torch
import torch._inductor.config as inductor_config
fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
lib = torch.library.Library("raw_programs", "DEF")
lib.define("axpby_(Tensor(a!) w, Tensor x, float a) -> ()")
lib.define("mix(Tensor a, Tensor b, Tensor(a!) out) -> ()")
lib.define("rev(Tensor src, Tensor(a!) out) -> ()")
def axpby_(w, x, a):
    w.mul_(a).add_(x)
def mix(a, b, out):
    torch.add(a, b * 2, out=out)
def rev(src, out):
    n = src.shape[0]
    for i in range(n):  # writes out[i] before reading src[n - 1 - i]
        out[i] = src[n - 1 - i]
for name, fn in (("axpby_", axpby_), ("mix", mix), ("rev", rev)):
    lib.impl(name, fn, "CompositeExplicitAutograd")
fake("raw_programs::axpby_", lambda w, x, a: None, lib=lib)
fake("raw_programs::mix", lambda a, b, out: None, lib=lib)
fake("raw_programs::rev", lambda src, out: None, lib=lib)
ops = torch.ops.raw_programs

def v1():  # auto_functionalized v1: the switch off where torch has one (2.5+); before, v1 is all there is
    if hasattr(inductor_config, "enable_auto_functionalized_v2"):
        return inductor_config.patch(enable_auto_functionalized_v2=False)
    return contextlib.nullcontext()

def differs(program, make):
    runs = []
    for how in ("eager", "compiled"):
        torch.compiler.reset()
        args = make()
        fn = program if how == "eager" else torch.compile(program, fullgraph=True)
        try:
            out = fn(*args)
        except Exception:
            if how == "compiled":
                return None
            raise
        if out.requires_grad:
            out.sum().backward()
        runs.append([out.detach(), *[a.detach() for a in args], *[a.grad for a in args if a.grad is not None]])
    return not all(torch.allclose(a, b) for a, b in zip(*runs))
"""

#: name -> source of ``program(*args)`` and of ``make()`` (fresh inputs, the same each time)
PROGRAMS: dict[str, tuple[str, str]] = {
    # _fixes/donated_buffers.py
    "write a leaf under no_grad, then backward through it": (
        "def program(x, w):\n"
        "    with torch.no_grad():\n"
        "        ops.axpby_.default(w, x, 0.5)\n"
        "    return (w.sin() * x).sum()\n",
        "lambda: (torch.ones(4, 3), torch.full((4, 3), 2.0).requires_grad_())",
    ),
    "write an out buffer through detach, then backward through it": (
        "def program(x, w):\n    wd = w.detach()\n    ops.mix.default(wd, wd, x)\n    return (w.sin() * x).sum()\n",
        "lambda: (torch.ones(4, 3), torch.full((4, 3), 2.0).requires_grad_())",
    ),
    # _fixes/clone_of_written_value.py
    "clone, then write the source": (
        "def program(x, z):\n"
        "    ops.axpby_.default(x, z, 1.0)\n"
        "    y = x.clone()\n"
        "    ops.axpby_.default(x, y, 0.5)\n"
        "    return y\n",
        "lambda: (torch.arange(12.0).reshape(4, 3), torch.ones(4, 3))",
    ),
    "clone, then out= into the source (pytorch#198031)": (
        "def program(x, z):\n    y = x.clone()\n    ops.rev.default(y, x)\n    return x * 1\n",
        "lambda: (torch.arange(12.0).reshape(4, 3), torch.ones(4, 3))",
    ),
    # _fixes/mutated_views_v1.py: auto_functionalized v1 (2.3-2.5, or the v2 switch off)
    "write rows of an intermediate (auto_functionalized v1)": (
        "def program(x, w):\n    h = w * 2\n    ops.axpby_.default(h[1:3], x[1:3], 0.5)\n    return h * x\n",
        "lambda: (torch.ones(4, 3), torch.arange(12.0).reshape(4, 3))",
    ),
    "write columns of an intermediate (auto_functionalized v1)": (
        "def program(x, w):\n    h = w * 2\n    ops.axpby_.default(h[:, 1:], x[:, 1:], 0.5)\n    return h * x\n",
        "lambda: (torch.ones(4, 3), torch.arange(12.0).reshape(4, 3))",
    ),
    # torch's own (tests/test_compile_right_by_default.py): plain ATen, and a raw custom op
    "x0.copy_(x1), then ATen writes x1 reading x0": (
        "def program(x0, x1):\n    x0.copy_(x1)\n    x1.mul_(0.5).add_(x0)\n    return torch.ones(1) + 0\n",
        "lambda: (torch.zeros(4, 3), torch.arange(12.0).reshape(4, 3))",
    ),
    "x0.copy_(x1), then an op writes x1 reading x0": (
        "def program(x0, x1):\n    x0.copy_(x1)\n    ops.axpby_.default(x1, x0, 0.5)\n    return torch.ones(1) + 0\n",
        "lambda: (torch.zeros(4, 3), torch.arange(12.0).reshape(4, 3))",
    ),
}

DONATED = (
    "write a leaf under no_grad, then backward through it",
    "write an out buffer through detach, then backward through it",
)
CLONES = ("clone, then write the source", "clone, then out= into the source (pytorch#198031)")
VIEWS_V1 = (
    "write rows of an intermediate (auto_functionalized v1)",
    "write columns of an intermediate (auto_functionalized v1)",
)
COPY_THEN_WRITE = ("x0.copy_(x1), then ATen writes x1 reading x0", "x0.copy_(x1), then an op writes x1 reading x0")


def torch_gets_wrong() -> dict[str, bool | None]:
    """Each program of :data:`PROGRAMS`: does this torch compile it to other values than eager?"""
    lines = [_PRELUDE, "result = {}"]
    for name, (program, make) in PROGRAMS.items():
        context = "v1()" if name in VIEWS_V1 else "contextlib.nullcontext()"
        lines += [program, f"with {context}:", f"    result[{name!r}] = differs(program, {make})"]
    lines.append("print(json.dumps(result))")
    return _last_json_line("\n".join(lines))  # type: ignore[no-any-return]


def _last_json_line(code: str) -> Any:
    """Run ``code`` in a fresh interpreter; what its last printed line says, as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_MUTATED_ALIAS_REUSE = r"""
import json
import torch._inductor.codegen.wrapper as wrapper
from torch._inductor.ir import MutationOutput

codegen = getattr(wrapper, "PythonWrapperCodegen", None) or wrapper.WrapperCodeGen
original = codegen.codegen_inplace_reuse
seen = []

def codegen_inplace_reuse(self, input_buffer, output_buffer):
    if isinstance(input_buffer, MutationOutput):
        seen.append(input_buffer.get_name())
        raise RuntimeError("stop: the compiled code would overflow the alias")  # never run it
    return original(self, input_buffer, output_buffer)

codegen.codegen_inplace_reuse = codegen_inplace_reuse

def program(x, z):
    ops.axpby_.default(x[1:], z[1:], 1.0)
    y = x[1:].clone()
    ops.axpby_.default(x[1:], y, 0.5)
    return y

try:
    torch.compile(program, fullgraph=True)(torch.randn(4, 3), torch.randn(4, 3))
    compiled = True
except Exception:
    compiled = False
print(json.dumps(True if seen else (False if compiled else None)))
"""


# The same op defined through tagged_ops (its fixes installed at the first trace), called the same way.
_TAGGED_PRELUDE = r"""
import json, sys
import torch, tagged_ops

@tagged_ops.define_inplace("alias_reuse::axpby_")
def axpby_(w: torch.Tensor, x: torch.Tensor, a: float) -> torch.Tensor:
    return w.mul_(a).add_(x)

ops = torch.ops.alias_reuse
"""


def torch_reuses_a_mutated_alias(*, through_tagged_ops: bool = False) -> bool | None:
    """Does Inductor hand a mutated view's alias (``MutationOutput``, which owns no memory) to the
    next kernel as its buffer? Decided at code generation, before anything runs: the
    program would overflow the heap. None: this torch compiles no direct call of the op.
    ``through_tagged_ops``: the op defined with tagged_ops instead of a raw classic op."""
    prelude = _TAGGED_PRELUDE if through_tagged_ops else _PRELUDE
    return _last_json_line(prelude + _MUTATED_ALIAS_REUSE)  # type: ignore[no-any-return]
