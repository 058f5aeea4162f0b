"""Dispatcher entries that outlive their definitions, so ops captured earlier stay valid.

``torch.ops.ns.op.default`` objects (and compiled graphs) hold the dispatcher's
entry for the op. Destroying the last registration on a name erases that entry,
and a redefinition makes a new one: calls through a captured object then crash
(bad_alloc, INTERNAL ASSERT) or run a stale kernel with no error. One registration
per name that outlives its definition (the Autograd fallthrough every op of ours
has) keeps the entry, so a redefinition fills the same entry and captured objects
call the newest definition, as native ``custom_op`` does across a module reload.

Only while the definition stays the same: torch caches a schema per entry (fx's
argument normalization, functionalization), so a definition with another schema
or tags (native -> fallback, an edited signature) releases the anchor first and
gets a fresh entry; objects captured before it then hold the destroyed op.
"""

from __future__ import annotations

from torch.library import Library, fallthrough_kernel

from . import _capabilities as caps

__all__ = ["anchor", "release_unless_same"]

_ANCHORS: dict[tuple[str, str], tuple[str, Library]] = {}


def release_unless_same(namespace: str, opname: str, definition: str) -> None:
    """Before ``namespace::opname`` is defined as ``definition``: drop an anchor kept for another one."""
    held = _ANCHORS.get((namespace, opname))
    if held is not None and held[0] != definition:
        del _ANCHORS[namespace, opname]
        caps.destroy_library(held[1])


def anchor(namespace: str, opname: str, definition: str) -> None:
    """Register ``namespace::opname``'s Autograd fallthrough, kept until a different definition."""
    if (namespace, opname) in _ANCHORS:
        return  # still registered from an earlier, identical definition of the name
    lib = Library(namespace, "FRAGMENT")
    lib.impl(opname, fallthrough_kernel, "Autograd")
    _ANCHORS[namespace, opname] = (definition, lib)
