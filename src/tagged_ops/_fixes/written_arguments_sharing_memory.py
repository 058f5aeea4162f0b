"""Gives each argument a call writes memory of its own before Inductor writes them in place (2.4).

AOTAutograd's common-subexpression elimination (on in training graphs) makes two equal
fresh tensors one: ``lo = t.new_zeros(n); hi = t.new_zeros(n); op(t, lo=lo, hi=hi)``
becomes one ``full`` passed as both written arguments of the op's ``auto_functionalized``
call, which is right while the graph is functional. Inductor's reinplacing then lets the
op write both in place, into that one buffer: ``lo`` and ``hi`` come back as the same
values, silently. Measured on 2.4.1 with raw classic ops too (2.3.1 not measured; the
probe decides there); 2.5.1 and later clone one of them themselves.

The fix: before torch reinplaces, a written argument of an ``auto_functionalized`` (v1)
call whose memory an earlier written argument of the same call already has gets a
``clone`` of its own, which torch then writes in place. One copy, only where two written
arguments shared memory; inert where torch clones one itself
(:func:`.._compat_compiler.inductor_reinplaces_shared_written_arguments`). Installed at the first
trace of a tagged op, once Inductor's post-grad passes are imported. Canary:
tests/fixes/test_written_arguments_sharing_memory.py::test_canary_two_written_arguments_get_one_buffer.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

from .. import _compat, _compat_compiler
from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op


def at_first_trace(op: Op) -> None:
    when_imported("torch._inductor.fx_passes.post_grad", _install)


def _install(module: ModuleType) -> None:
    if torch_reinplaces_them_into_one():
        wrap_once(module, "reinplace_inplaceable_ops", _with_memory_of_their_own)


def torch_reinplaces_them_into_one() -> bool:
    """Whether this torch has the bug (the fix acts exactly there; its canary holds torch to it)."""
    if importlib.util.find_spec("torch._inductor.fx_passes.reinplace") is None:
        return False  # 2.2: no reinplacing (and no mutating op compiled in place)
    reinplace = importlib.import_module("torch._inductor.fx_passes.reinplace")
    return _compat_compiler.inductor_reinplaces_shared_written_arguments(reinplace.reinplace_inplaceable_ops_core)


def _with_memory_of_their_own(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def reinplace_inplaceable_ops(graph: Any) -> None:
        _clone_shared_written_arguments(graph)
        original(graph)

    return reinplace_inplaceable_ops


def _clone_shared_written_arguments(graph: Any) -> None:
    v1 = getattr(torch.ops.higher_order, "auto_functionalized", None)
    if v1 is None:
        return
    storage_of = importlib.import_module("torch._inductor.fx_passes.reinplace").get_node_storage
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not v1:
            continue
        claimed: set[Any] = set()
        kwargs = dict(node.kwargs)
        for name in _compat.written_argument_names(_compat.schema_of(node.args[0])):
            arg = kwargs.get(name)
            if not isinstance(arg, torch.fx.Node):  # None (an absent optional) or a list
                continue
            storage = storage_of(arg)
            if storage is None:
                continue
            if storage in claimed:
                kwargs[name] = _clone_before(graph, node, arg)
            else:
                claimed.add(storage)
        if kwargs != dict(node.kwargs):
            node.kwargs = kwargs


def _clone_before(graph: Any, node: Any, arg: Any) -> Any:
    with graph.inserting_before(node):
        clone = graph.call_function(torch.ops.aten.clone.default, (arg,))
    value = arg.meta.get("val")
    if isinstance(value, torch.Tensor):
        clone.meta["val"] = value.clone()  # a fake tensor with storage of its own
    return clone
