"""_fixes/fx_signature_cache.py: a redefined op is normalized with its new schema.

Ours: tests/test_redefinition.py::test_redefinition_with_another_schema_gets_a_fresh_entry and
tests/test_redefinition.py::test_compile_after_switching_path_in_one_process.
"""

from __future__ import annotations

from .._raw_programs import _last_json_line

_RAW = r"""
import json, torch
from torch.fx import operator_schemas
from tagged_ops._compat import destroy_library  # torch's _destroy, and what 2.2 leaves behind

def define(schema):
    lib = torch.library.Library("raw_sig", "DEF")
    lib.define(schema)
    lib.impl("f", lambda *args: args[0].clone(), "CompositeExplicitAutograd")
    return lib

lib = define("f(Tensor x) -> Tensor")
operator_schemas.normalize_function(torch.ops.raw_sig.f.default, (torch.ones(1),), {}, normalize_to_only_use_kwargs=True)
old = lib  # kept, as a redefinition keeps the old definition's objects until it is done
destroy_library(old)
lib = define("f(Tensor x, Tensor y) -> Tensor")
op = torch.ops.raw_sig.f.default
cache = getattr(operator_schemas, "_SCHEMA_TO_SIGNATURE_CACHE", {})
stale = [str(sig) for key, sig in cache.items() if key[0].startswith("raw_sig") and "y" not in str(sig)]
print(json.dumps(bool(stale)))
"""


def test_canary_fx_keeps_the_signature_of_a_destroyed_op() -> None:
    """torch.fx still holds the first schema's signature after the op is destroyed and defined again
    (torch drops it only when the old ``Library`` object is collected, 2.13). Fails once torch drops
    it at the destroy (then the fix can go)."""
    assert _last_json_line(_RAW) is True
