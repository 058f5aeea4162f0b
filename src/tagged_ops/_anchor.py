"""Dispatcher entries that outlive their definitions, so ops captured earlier stay valid.

``torch.ops.ns.op.default`` objects (and compiled graphs) hold the dispatcher's
entry for the op. Destroying the last registration on a name erases that entry,
and a redefinition makes a new one: calls through a captured object then crash
(bad_alloc, INTERNAL ASSERT) or run a stale kernel with no error. One registration
per name that is never destroyed (the Autograd fallthrough every op of ours has)
keeps the entry, so a redefinition fills the same entry and captured objects call
the newest definition, as native ``custom_op`` does across a module reload.
"""

from __future__ import annotations

from torch.library import Library, fallthrough_kernel

__all__ = ["anchor"]

_ANCHORS: dict[tuple[str, str], Library] = {}


def anchor(namespace: str, opname: str) -> None:
    """Register ``namespace::opname``'s Autograd fallthrough once per process, never destroyed."""
    if (namespace, opname) in _ANCHORS:
        return  # still registered from an earlier definition of the name
    lib = Library(namespace, "FRAGMENT")
    lib.impl(opname, fallthrough_kernel, "Autograd")
    _ANCHORS[namespace, opname] = lib
