"""What torch's compiler offers and does: ``torch.compiler``'s functions, and the probes the fixes ask.

The first sections are ``torch.compiler``'s functions the eager call and the compiled
call use, with backports where a release lacks them, laid out as ``_compat`` lays out
its sections. The fixes (``_fixes/``) patch torch's compiler where it is wrong; whether
it is wrong on the installed torch is asked in the later sections, of the compiler's own
code (the names a function reads, whether a lowering exists), never of a version string.
Each probe names the fix that asks it and the releases that answer each way; a fix is
deleted with its module, its test module and its line in ``_fixes.FIXES``, and its probe
here once nothing asks it. tagged_ops imports this module with ``_calls`` (an op's
first Python kernel or first call) or its first trace, not to declare an op; importing
it imports none of torch's compiler, and a probe imports what it reads when first asked,
or reads it from the module's code unrun.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from types import CodeType
from typing import Any, Callable

import torch

from . import _compat

# -- torch.compiler.is_dynamo_compiling (2.3; torch._utils.is_compiling on 2.2) --------
# Breakpoint: torch 2.3 (upstream PR not identified).

#: True only while Dynamo traces (it constant-folds this call); a plain
#: function returning False in eager, so the hot path pays next to nothing.
is_dynamo_compiling: Callable[[], bool] = (
    getattr(torch.compiler, "is_dynamo_compiling", None)
    or getattr(torch.compiler, "is_compiling", None)
    or torch._utils.is_compiling  # 2.2: the one Dynamo constant-folds there
)


# -- torch.compiler.assume_constant_result (every release) ----------------------------
# torch's own imports torch._dynamo (seconds, +150 MB) to set one attribute, which Dynamo
# reads while it traces (torch/_dynamo/decorators.py, 2.2-2.15); the backport sets it
# without importing anything. tests/test_compat.py checks the two agree.


def assume_constant_result(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` so that Dynamo calls it while tracing and uses the result as a constant."""
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn


# -- torch.compiler.is_exporting (2.7; 2.7-2.9 fold it to True under torch.compile) --
# Breakpoint: pytorch/pytorch#176499 (fixes #176347: is_exporting() True under torch.compile).

_HAS_EXPORTING_FLAG = hasattr(torch.compiler, "_is_exporting_flag")


def is_exporting() -> bool:
    """True while ``torch.export`` traces (strict export only where torch sets the flag there: 2.13).

    Reads the flag that ``torch.compiler.is_exporting()`` returns, as newer
    Dynamo does: Dynamo on 2.7-2.9 folds a call to that function to True under
    ``torch.compile`` too. False before 2.7, which cannot tell us.
    """
    return _HAS_EXPORTING_FLAG and bool(torch.compiler._is_exporting_flag)


# -- torch.compiler.disable(fn, reason=...) ---------------------------------------
# Breakpoint: pytorch/pytorch#150341 (the reason= argument).


def disable(fn: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """``fn`` run outside any graph (a graph break); fullgraph errors quote ``reason`` where torch can.

    ``torch.compiler.disable`` imports torch._dynamo: call this while tracing only.
    """
    return torch.compiler.disable(
        fn, **({"reason": reason} if _compat.accepts_keyword(torch.compiler.disable, "reason") else {})
    )


# -- torch._higher_order_ops.auto_functionalize (2.2; v2 from 2.6) ---------------------
# Breakpoint: pytorch/pytorch#118673 (2.3 fills in defaults), #134409 (auto_functionalized_v2).


@functools.cache
def schema_defaults_survive_functionalization() -> bool:
    """Whether an untagged op's schema may carry defaults (False on 2.2: the fallback
    schema then leaves them out, and the handle always passes them).

    2.2's ``auto_functionalized(op, mutated_args_names, kwargs)`` rebuilds the arguments
    by schema position, but the dispatcher drops trailing arguments equal to their
    default: a mutable op called with a default value then fails under
    functionalization (opcheck's AOT test, torch.ops calls in compiled code) with
    IndexError. 2.3 made it ``auto_functionalized(op, **kwargs)`` and fills in defaults.
    Asked when a fallback op with a defaulted parameter is defined, so the module is read,
    not imported, where ``import torch`` has not loaded it (2.2, 2.4, 2.5): importing it is
    work only compiling needs (1.3-1.9 ms on 2.5.1, 0.6-0.9 ms on 2.4.1; reading it 0.2 ms).
    """
    return "mutated_args_names" not in _call_parameters(_AUTO_FUNCTIONALIZE, "AutoFunctionalized")


_AUTO_FUNCTIONALIZE = "torch._higher_order_ops.auto_functionalize"


def _call_parameters(module_name: str, class_name: str) -> tuple[str, ...]:
    """The parameter names of ``class_name.__call__`` in module ``module_name``: of the loaded
    class, or else read from the module's code without running it (empty where either is missing)."""
    module = sys.modules.get(module_name)
    code: CodeType | None
    if module is not None:
        method = vars(getattr(module, class_name, object)).get("__call__")
        code = getattr(method, "__code__", None)
    else:
        spec = importlib.util.find_spec(module_name)
        get_code = getattr(spec.loader, "get_code", None) if spec is not None else None
        code = get_code(module_name) if get_code is not None else None
        for name in (class_name, "__call__"):  # the class body's code, then its method's
            consts = code.co_consts if code is not None else ()
            code = next((c for c in consts if isinstance(c, CodeType) and c.co_name == name), None)
    if code is None:
        return ()
    return code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]


# -- torch._is_functional_tensor / _is_functional_tensor_base (every release) -----------


def is_functional_base(t: torch.Tensor) -> bool:
    """Whether ``t`` is a tensor under functionalization and no view of another."""
    return torch._is_functional_tensor(t) and bool(torch._is_functional_tensor_base(t))


# -- Inductor's lowering of auto_functionalized (2.3; 2.6 with auto_functionalized_v2) -----
# Breakpoint: pytorch/pytorch#118673 (Inductor lowers auto_functionalized, 2.3).


@functools.cache
def compiler_lowers_mutable_ops() -> bool:
    """Whether Inductor compiles a mutating custom op (lowers ``auto_functionalized``).

    ``auto_functionalized_v2`` came with Inductor's lowering of it (2.6): where it exists the
    answer needs no import of Inductor, which torch loads only when it compiles (seconds, at
    trace time). Before it, Inductor itself is asked (torch.compile has loaded it by then).
    """
    module = importlib.import_module(_AUTO_FUNCTIONALIZE)
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
