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
gets a fresh entry; objects captured before it then hold the destroyed op. Where
kernels registered from C++ keep the entry alive, no fresh entry can be had, and such
a redefinition raises :class:`RedefinitionError` instead.
"""

from __future__ import annotations

from torch.library import Library, fallthrough_kernel

from . import _compat

__all__ = ["RedefinitionError", "anchor", "release_unless_same"]


class RedefinitionError(RuntimeError):
    """An op name cannot be defined again with another schema in this process.

    Defining a name again replaces its definition, as ``custom_op`` does, except where
    kernels were registered for it outside Python (C++ ``TORCH_LIBRARY_IMPL``,
    ``TAGGED_OPS_IMPL``): the dispatcher entry they keep holds the previous schema. Keep
    the schema, or restart the process. A subclass of ``RuntimeError``:

    >>> import tagged_ops
    >>> issubclass(tagged_ops.RedefinitionError, RuntimeError)
    True
    """


_ANCHORS: dict[tuple[str, str], tuple[str, Library]] = {}
#: Every op object an anchored entry may have cached (see :func:`anchor`); never dropped,
#: because an entry can outlive its anchor (C++ kernels keep it), and they are small.
_PYTHON_OPS: list[object] = []


def release_unless_same(namespace: str, opname: str, definition: str, *, owner: str) -> None:
    """Before ``namespace::opname`` is defined as ``definition``: drop an anchor kept for another one.

    ``owner``: the user's op the name belongs to (itself, or the op a helper serves), for errors.
    """
    held = _ANCHORS.get((namespace, opname))
    if held is not None and held[0] != definition:
        del _ANCHORS[namespace, opname]
        _compat.destroy_library(held[1])
        if _compat.dispatcher_entry_exists(f"{namespace}::{opname}"):
            raise RedefinitionError(
                f"{owner}: cannot be defined again with another schema in this process: kernels "
                "registered for it elsewhere (C++ TORCH_LIBRARY_IMPL / TAGGED_OPS_IMPL) keep its dispatcher entry, "
                "where torch keeps the previous definition's Python op. Keep the schema, or restart the process."
            )


def anchor(namespace: str, opname: str, definition: str, op: object) -> None:
    """Register ``namespace::opname``'s Autograd fallthrough, kept until a different definition.

    ``op`` (the new definition's ``OpOverload``) is kept alive for good: torch caches the
    Python op object in the entry on its first Python dispatch (a TorchDispatchMode,
    Dynamo's tracing) and holds it without a reference; a reload that dropped it left
    the entry pointing at freed memory (a segfault in the next compile after opcheck).
    """
    _PYTHON_OPS.append(op)
    if (namespace, opname) in _ANCHORS:
        return  # still registered from an earlier, identical definition of the name
    lib = Library(namespace, "FRAGMENT")
    lib.impl(opname, fallthrough_kernel, "Autograd")
    _ANCHORS[namespace, opname] = (definition, lib)
