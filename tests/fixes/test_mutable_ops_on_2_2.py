"""_fixes/mutable_ops_on_2_2.py: where Inductor compiles no mutating custom op, handle calls go through the twin.

Ours: every compiled test of the suite, on 2.2.2 (tests/test_compile.py and the rest).
"""

from __future__ import annotations

import torch

from tagged_ops._compat_compiler import compiler_lowers_mutable_ops

from .._raw_programs import _last_json_line

_RAW = r"""
import json, torch
fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
lib = torch.library.Library("raw_mutable", "DEF")
lib.define("bump_(Tensor(a!) x) -> ()")
def bump_(x):
    x.add_(1)
lib.impl("bump_", bump_, "CompositeExplicitAutograd")
fake("raw_mutable::bump_", lambda x: None, lib=lib)

def program(x):
    torch.ops.raw_mutable.bump_.default(x)
    return x * 2

x = torch.zeros(3)
try:
    got = torch.compile(program, fullgraph=True)(x)
    print(json.dumps(got.tolist() == [2.0, 2.0, 2.0]))
except Exception:
    print(json.dumps(None))
"""


def test_canary_inductor_compiles_no_raw_mutable_op() -> None:
    """A raw classic op's direct call compiles (to eager's values) exactly where the probe says Inductor
    lowers mutating ops; on 2.2 it does not compile at all. Fails once 2.2's answer changes, or the probe's."""
    compiled = _last_json_line(_RAW)
    assert (compiled is True) is compiler_lowers_mutable_ops(), {"compiled right": compiled, "torch": torch.__version__}
    if not compiler_lowers_mutable_ops():
        assert compiled is None  # refused loudly, never a wrong value
