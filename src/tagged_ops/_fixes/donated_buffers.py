"""Keeps the backward from reusing a saved tensor that Inductor writes into a graph input (2.6-2.15).

AOTAutograd marks tensors saved for the backward as donated (the backward may reuse
their memory) when, in the functional graph, they alias no input or output. What a
mutating custom op writes is such a tensor there (an ``auto_functionalized`` result),
but Inductor then writes it in place into the argument, a graph input: the backward
reused the input's memory for a gradient. ``with torch.no_grad(): op_(w, ...)`` then
a forward and backward through ``w`` left ``w`` holding a gradient; an out= buffer
written through ``w.detach()`` lost its value the same way. Measured on 2.13.0 and
2.15.0 (raw ``custom_op`` too; ATen's in-place ops are right).

The fix: no saved tensor is donated that shares storage with an ``auto_functionalized``
result or with the new value of an input the graph mutates (an op writing a view of
an input: Inductor writes the scatter of the view's new value into the input). Installed at the first trace of a tagged op, once AOTAutograd is
imported. Canary: tests/test_compile_right_by_default.py::test_canary_donated_buffer_overwrites_a_written_input.
"""

from __future__ import annotations

import functools
import operator
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

from ._after_import import when_imported, wrap_once

if TYPE_CHECKING:
    from . import Op

_NAME = "collect_bw_donated_buffer_idxs"


def at_first_trace(op: Op) -> None:
    when_imported("torch._functorch.aot_autograd", _install)


def _install(module: ModuleType) -> None:
    # The function lives in one of AOTAutograd's modules, and others import it by name: replace it in each.
    for name, mod in list(sys.modules.items()):
        if not name.startswith("torch._functorch") or mod is None:
            continue
        wrap_once(mod, _NAME, _keeping_written_results)


def _auto_functionalized() -> tuple[Any, ...]:
    return tuple(
        getattr(torch.ops.higher_order, n)
        for n in ("auto_functionalized", "auto_functionalized_v2")
        if hasattr(torch.ops.higher_order, n)
    )


def _storage(node: Any) -> Any:
    value = getattr(node, "meta", {}).get("val")
    if not isinstance(value, torch.Tensor):
        return None
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(value.untyped_storage())


def _keeping_written_results(original: Callable[..., list[int]]) -> Callable[..., list[int]]:
    @functools.wraps(original)
    def collect_bw_donated_buffer_idxs(fw_module: Any, bw_module: Any, fw_metadata: Any) -> list[int]:
        donated = original(fw_module, bw_module, fw_metadata)
        if not donated:
            return donated
        hops = _auto_functionalized()
        copy_ = torch.ops.aten.copy_.default
        written = {  # what Inductor may write in place into a graph input
            _storage(n)
            for n in fw_module.graph.nodes
            if n.target is operator.getitem and getattr(n.args[0], "target", None) in hops
        } | {
            _storage(n.args[1])
            for n in fw_module.graph.nodes
            if n.target is copy_ and getattr(n.args[0], "op", None) == "placeholder"  # an input's new value
        }
        written.discard(None)
        if not written:
            return donated
        outputs = next(reversed(fw_module.graph.find_nodes(op="output"))).args[0]
        saved = outputs[fw_metadata.tensors_saved_for_backwards_slice]
        first = fw_metadata.num_symints_saved_for_bw or 0
        return [i for i in donated if _storage(saved[i - first]) not in written]

    return collect_bw_donated_buffer_idxs
