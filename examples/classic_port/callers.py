"""The call forms classic_lib's users already have; they must keep working after the port.

python callers.py before|after      # eager and compiled; exits non-zero on any difference
"""

import sys
from pathlib import Path

import torch

variant = sys.argv[1]
sys.path.insert(0, str(Path(__file__).resolve().parent / variant))
import classic_lib  # noqa: E402


def eager_and_compiled(fn, *make):  # noqa: ANN001, ANN002, ANN201
    eager_args = [m() for m in make]
    compiled_args = [a.clone() for a in eager_args]
    expected = fn(*eager_args)
    got = torch.compile(fn, fullgraph=True)(*compiled_args)
    torch.testing.assert_close(got, expected)
    for a, b in zip(compiled_args, eager_args, strict=True):
        torch.testing.assert_close(a, b)


torch.manual_seed(0)
x, w = torch.randn(4, 8), torch.randn(8)
reference = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

# 1. direct torch.ops calls, positional, return value ignored
o = torch.empty(4, 8)
torch.ops.classic_lib.rms_norm_out(x, w, 1e-6, o)
torch.testing.assert_close(o, reference)
y = x.clone()
torch.ops.classic_lib.scale_(y, 2.0)
torch.testing.assert_close(y, x * 2)

# 2. the library's wrappers
torch.testing.assert_close(classic_lib.rms_norm(x, w), reference)
z = x.clone()
assert classic_lib.scale_(z, 3.0) is z
torch.testing.assert_close(z, x * 3)

# 3. the same forms compiled: views of inputs, whole intermediates (what a raw mutable op compiles right)
import torch._higher_order_ops.auto_functionalize  # noqa: E402
import torch._inductor.lowering  # noqa: E402

_hop = getattr(torch.ops.higher_order, "auto_functionalized", None)
if _hop is not None and _hop in torch._inductor.lowering.lowerings:  # 2.3+

    def step(x, w, o):  # noqa: ANN001, ANN202
        torch.ops.classic_lib.scale_(x[1:3], 0.5)
        torch.ops.classic_lib.rms_norm_out(x, w, 1e-6, o)
        h = x * 2
        torch.ops.classic_lib.scale_(h, 0.25)
        return classic_lib.rms_norm(h, w) + o

    eager_and_compiled(step, lambda: x.clone(), lambda: w.clone(), lambda: torch.zeros(4, 8))
    print(f"classic_lib ({variant}): eager and compiled call forms OK on torch {torch.__version__}")
else:
    print(
        f"classic_lib ({variant}): eager call forms OK; torch {torch.__version__}'s Inductor compiles no mutable custom op"
    )
