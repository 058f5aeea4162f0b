"""What torch's compiler does: the probes the fixes ask, and the private objects they read.

The fixes (``_fixes/``) patch torch's compiler where it is wrong; whether it is wrong
on the installed torch is asked here, of the compiler's own code (the names a function
reads, whether a lowering exists), never of a version string, as ``_compat`` does for
what torch offers. Each probe names the fix that asks it and the releases that answer
each way; a fix is deleted with its module, its test module and its line in
``_fixes.FIXES``, and its probe here once nothing asks it. Nothing here imports torch's
compiler at import: each probe imports what it reads when first asked.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

import torch

# -- Inductor's lowering of auto_functionalized (2.3; 2.6 with auto_functionalized_v2) -----
# Breakpoint: pytorch/pytorch#118673 (Inductor lowers auto_functionalized, 2.3).


@functools.cache
def compiler_lowers_mutable_ops() -> bool:
    """Whether Inductor compiles a mutating custom op (lowers ``auto_functionalized``).

    ``auto_functionalized_v2`` came with Inductor's lowering of it (2.6): where it exists the
    answer needs no import of Inductor, which torch loads only when it compiles (seconds, at
    trace time). Before it, Inductor itself is asked (torch.compile has loaded it by then).
    """
    module = importlib.import_module("torch._higher_order_ops.auto_functionalize")
    if hasattr(module, "auto_functionalized_v2"):
        return True
    lowering = importlib.import_module("torch._inductor.lowering")
    hop = getattr(module, "auto_functionalized", None)
    return hop is not None and hop in lowering.lowerings


# -- what torch's compiler functions read: the probes of two fixes (2.5, 2.15) -------------
# Breakpoint: pytorch/pytorch#195664's sibling in 2.15 (AOTAutograd offsets the slot; PR not
# identified) and 2.5's reinplacing (clones one of two written arguments sharing memory; PR not
# identified). Both read the code's names, not a version: a torch that fixes a bug another way
# reads as still having it, which only costs its fix one buffer, never a value.


def _names_read(fn: Callable[..., Any]) -> set[str]:
    """The names ``fn`` and the functions defined in it read, assign or define."""
    names: set[str] = set()
    codes = [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names, code.co_varnames, code.co_cellvars, (code.co_name,))
        codes.extend(c for c in code.co_consts if isinstance(c, type(code)))
    return names


def aot_misplaces_returned_written_inputs(create_functionalized_fn: Callable[..., Any]) -> bool:
    """Whether AOTAutograd's functionalized trace hands back a returned input that the graph writes
    in the slot of another output when the trace's outputs start with inputs written outside the
    graph (``_fixes/returned_written_input.py``): its helper places such inputs by
    ``meta.output_info`` (2.4+; 2.2-2.3 never place them) without the offset 2.15 adds."""
    names = _names_read(create_functionalized_fn)
    return "output_info" in names and "num_mutated_inp_runtime_indices" not in names


def inductor_reinplaces_shared_written_arguments(reinplace_inplaceable_ops_core: Callable[..., Any]) -> bool:
    """Whether Inductor's reinplacing lets two written arguments of one ``auto_functionalized`` call
    be written in place into one buffer (``_fixes/written_arguments_sharing_memory.py``): 2.4;
    2.5 added ``tensor_with_same_storage_already_reinplaced``, which clones the second."""
    return "tensor_with_same_storage_already_reinplaced" not in _names_read(reinplace_inplaceable_ops_core)


# -- AOTAutograd's compiled autograd.Function and its output slots (2.2-2.15) ---------------
# Breakpoint: none in the matrix; 2.2-2.3 call ``create_runtime_wrapper`` from
# jit_compile_runtime_wrappers, 2.4+ ``_create_runtime_wrapper`` from RuntimeWrapper. Every
# release marks non-differentiable outputs by tensor (pytorch/pytorch#195688 dealiases them).

#: (module, function): where AOTAutograd wraps its compiled ``autograd.Function``'s ``apply``.
AOT_RUNTIME_WRAPPERS: tuple[tuple[str, str], ...] = (
    ("torch._functorch._aot_autograd.runtime_wrappers", "_create_runtime_wrapper"),
    ("torch._functorch._aot_autograd.jit_compile_runtime_wrappers", "create_runtime_wrapper"),
)


def compiled_autograd_function(compiled_fn: Any) -> type[torch.autograd.Function] | None:
    """The ``autograd.Function`` whose ``apply`` AOTAutograd hands its runtime wrapper (None:
    an inference graph's function, or another callable)."""
    function = getattr(compiled_fn, "__self__", None)
    if isinstance(function, type) and issubclass(function, torch.autograd.Function):
        if getattr(function, "metadata", None) is not None:
            return function
    return None


def non_differentiable_output_slots(function: type[torch.autograd.Function]) -> tuple[int, ...]:
    """The slots of ``function.forward``'s outputs it marks non-differentiable: the inputs written
    outside the graph, then the user's outputs, the ones that need no gradient. Empty where effect
    tokens lead the outputs (2.4-2.5 put them first): that layout is left as torch has it."""
    meta: Any = function.metadata  # type: ignore[attr-defined]
    if getattr(meta, "tokens", None):
        return ()
    written_outside = [
        info for info in meta.input_info if getattr(info.mutation_type, "name", "") == "MUTATED_OUT_GRAPH"
    ]
    return tuple(i for i, info in enumerate([*written_outside, *meta.output_info]) if not info.requires_grad)
