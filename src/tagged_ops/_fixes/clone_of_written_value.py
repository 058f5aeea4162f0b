"""Keeps a clone of a value that an op then writes in place, which Inductor would drop (2.3-2.15).

Inductor's ``remove_noop_ops`` drops a ``clone`` (and a ``copy`` into a fresh tensor)
whose result has the metadata of its source: in the functional graph that is a
no-op. But Inductor then writes a mutating custom op's result in place, into its
argument, so the clone's source is overwritten while the clone's value is still to
be read: ``op_(x); y = x.clone(); op_(x, y); return y`` returned the new ``x``, and
``y = x.clone(); op(y, out=x)`` (pytorch/pytorch#198031) compiled to ``op(x, out=x)``.
Measured on 2.12.1, 2.13.0 and 2.15.0 with raw ``custom_op`` too (#198031 on 2.3-2.14).

The fix: a clone or copy of a value that gets written in place, or of a view of one
(an input the graph mutates, or an ``auto_functionalized`` argument or result), is kept. Installed at the
first trace of a tagged op, once Inductor's post-grad passes are imported. Canary:
tests/test_compile_right_by_default.py::test_canary_clone_of_a_written_value_is_dropped.
"""

from __future__ import annotations

import functools
import operator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op


def at_first_trace(op: Op) -> None:
    when_imported("torch._inductor.fx_passes.post_grad", _install)


def _install(module: ModuleType) -> None:
    wrap_once(module, "remove_noop_ops", _keeping_clones)


class _Kept:
    """A node's stand-in target while ``remove_noop_ops`` runs: nothing it removes."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tagged_ops: a kept clone was run while Inductor removed no-ops")


_KEPT = _Kept()


def _written_values(graph: Any) -> set[Any]:
    """Nodes whose value some op writes in place once Inductor reinplaces the graph."""
    aten = torch.ops.aten
    hops = tuple(
        getattr(torch.ops.higher_order, n)
        for n in ("auto_functionalized", "auto_functionalized_v2")
        if hasattr(torch.ops.higher_order, n)
    )
    written: set[Any] = set()
    for node in graph.nodes:
        if node.target is aten.copy_.default and getattr(node.args[0], "op", None) == "placeholder":
            written.add(node.args[0])  # an input the graph mutates
        elif node.target in hops:
            written.update(b for b in node.kwargs.get("_all_bases", None) or () if hasattr(b, "op"))  # v2's bases
            written.update(a for a in node.kwargs.values() if hasattr(a, "op"))  # v1's arguments
            written.update(u for u in node.users if u.target is operator.getitem)
    return written


def _storage(node: Any) -> Any:
    value = getattr(node, "meta", {}).get("val")
    if not isinstance(value, torch.Tensor):
        return None
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(value.untyped_storage())


def _keeping_clones(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def remove_noop_ops(graph: Any) -> None:
        aten = torch.ops.aten
        written = _written_values(graph)
        storages = {_storage(n) for n in written} - {None}  # views of a written value share its storage

        def of_written(node: Any) -> bool:
            return node in written or _storage(node) in storages

        kept = [
            (node, node.target)
            for node in graph.nodes
            if (node.target is aten.clone.default and of_written(node.args[0]))
            or (node.target is aten.copy.default and len(node.args) > 1 and of_written(node.args[1]))
        ]
        for node, _ in kept:
            node.target = _KEPT
        try:
            original(graph)
        finally:
            for node, target in kept:
                node.target = target

    return remove_noop_ops
