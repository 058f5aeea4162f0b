"""Drops torch.fx's cached Python signature of an op name when the name is defined again (every release).

``normalize_function`` (Inductor, opcheck's schema test) caches one signature per op
name and overload in ``torch.fx.operator_schemas._SCHEMA_TO_SIGNATURE_CACHE``, never
invalidated: a name redefined with another schema (native <-> fallback in one
process, an edited signature) was normalized with the old one.

The fix: a definition that goes drops its names from that cache. Canary:
tests/fixes/test_fx_signature_cache.py::test_canary_fx_keeps_the_signature_of_a_destroyed_op.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import Op


def at_destroy(op: Op) -> None:
    module = sys.modules.get("torch.fx.operator_schemas")
    cache = getattr(module, "_SCHEMA_TO_SIGNATURE_CACHE", None)
    if not isinstance(cache, dict):
        return
    for qualname in op.defined_names():
        packet, _, overload = qualname.partition(".")
        cache.pop((packet, overload), None)
