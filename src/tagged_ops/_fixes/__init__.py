"""Workarounds for bugs in torch's compiler stack: one module per bug, installed when first needed.

Each module here names the bug, the releases it was measured on, and the canary
test that fails once torch fixes it; deleting a fix is deleting its module and
its line in :data:`FIXES`. A fix hooks into an op's
life through any of five functions of its module (a fix defines only those it needs):

* ``at_definition(op)``: when the op is defined, for what must be in place before
  anything traces it (a dispatcher kernel); cheap, and imports none of torch's compiler.
  A fix whose definition hook matters only once a module of torch's is imported names
  that module in :data:`FIXES`: it is imported with that module, and its hook runs then
  for every op defined before and at each definition after.
* ``at_first_trace(op)``: the first time torch traces the op (Dynamo, export,
  functionalization, a fake-tensor call); patches of torch's compiler go here.
* ``at_destroy(op)``: the op's definition goes (a redefinition), so nothing the fix
  keeps outlives it.
* ``at_sharding_rule(op)``: a DTensor sharding rule was registered on one of the op's
  ops (``op`` is then :class:`ShardedOp`).
* ``reroutes(op, values, written) -> bool``: asked while Dynamo traces a handle's
  call (plain Python that Dynamo traces): True routes the call through the op's
  functional twin (fresh tensors, then ``copy_``), which every compiler lowers.

``op`` is the :class:`Op` protocol below; fixes import nothing of tagged_ops above
the contract layer. Patches that act on torch as a whole wait for the module they
patch to be imported (:func:`when_imported`) and replace a function of torch's once
(:func:`wrap_once`): importing tagged_ops patches nothing, and a process that only
defines and calls ops imports only the fixes with a definition hook.
docs/ARCHITECTURE.md lists each fix and the private torch names it reads.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ._after_import import when_compiler_loads, when_imported, wrap_once

__all__ = [
    "AT_DEFINITION",
    "FIXES",
    "at_definition",
    "at_destroy",
    "at_first_trace",
    "at_sharding_rule",
    "reroute_hooks",
    "reroutes",
    "when_compiler_loads",
    "when_imported",
    "wrap_once",
]


# For type checkers only (fixes annotate with them): creating Protocol classes at
# import would cost every process that defines an op.
if TYPE_CHECKING:
    from typing import Protocol

    from .._signature import OpSignature, Param

    class Twin(Protocol):
        """The functional twin of an op (see ``_functional``): fresh results instead of writes."""

        op: Any  # the twin's OpOverload
        written: tuple[str, ...]  # the arguments its results stand for, in order

        def write(self, values: dict[str, Any]) -> None: ...

    class ShardedOp(Protocol):
        """What a fix sees of an op a DTensor sharding rule was just registered on."""

        op: Any  # the OpOverload
        keyword_tensors: tuple[str, ...]  # its keyword-only Tensor parameters

    class Op(Protocol):
        """What a fix sees of one op's definition."""

        sig: OpSignature
        #: Registered with the native tag (2.13+, not forced to the fallback).
        tagged: bool
        #: Forced to the fallback where native tags exist (``TAGGED_OPS_FALLBACK``, ``fallback=True``).
        forced_fallback: bool
        #: ``define_out(pair=...)``.
        pair: bool

        @property
        def op(self) -> Any:
            """The op users call, ``torch.ops.<ns>.<name>``."""

        def untagged(self) -> tuple[Any, Sequence[Param]]:
            """The untagged op compiled code records, and its parameter order (defined on first use)."""

        def functional(self) -> Twin:
            """The functional twin of :meth:`untagged` (defined on first use)."""

        def recorded_ops(self) -> tuple[Any, ...]:
            """Every op of this definition that a compiled graph may hold."""

        def defined_names(self) -> tuple[str, ...]:
            """Every op name this definition registered (``ns::name``), helpers included."""

        def put_kernel(self, key: str, kernel: Callable[..., Any] | None) -> None:
            """Put ``kernel`` at dispatch key ``key`` of the op users call (None: remove it)."""

        def put_lasting_kernel(self, key: str, kernel: Callable[..., Any]) -> None:
            """Put ``kernel`` at ``key`` of the op users call for the op's whole life (no Library of its own)."""


#: The fixes, in the order their hooks run (module names in this package), and when each is
#: imported: "definition" for those with ``at_definition`` (imported with the first definition),
#: a torch module's name for those whose ``at_definition`` waits for that module's import,
#: "sharding" for those with ``at_sharding_rule`` (the first DTensor sharding rule), "trace" for
#: the others (imported at the first trace, or the first destroy), so a process that never
#: compiles never loads them (tests/test_free_at_import.py checks them).
FIXES: dict[str, str] = {
    "returned_alias": "definition",
    "out_variant_pairing": "torch._library._out_variant",
    "reads_before_writes": "trace",
    "clone_of_written_value": "trace",
    "donated_buffers": "trace",
    "compile_cache_key": "trace",
    "fx_signature_cache": "trace",
    "mutable_ops_on_2_2": "trace",
    "mutated_views_v1": "trace",
    "returned_written_input": "trace",
    "written_arguments_sharing_memory": "trace",
    "shared_output_tangents": "trace",
    "reuse_of_mutated_alias": "trace",
    "saved_export_loading": "torch._export.serde.serialize",
    "dtensor_ops_returning_nothing": "sharding",
    "dtensor_keyword_tensors_in_cache_key": "sharding",
}
#: The fixes whose ``at_definition`` hook runs from the first definition, from :data:`FIXES`.
AT_DEFINITION: tuple[str, ...] = tuple(fix for fix, when in FIXES.items() if when == "definition")
#: The fixes whose ``at_definition`` hook waits for a module of torch's: fix -> that module.
AFTER_IMPORT: dict[str, str] = {fix: when for fix, when in FIXES.items() if "." in when}


def _hooks(fixes: Sequence[str], name: str) -> tuple[Callable[..., Any], ...]:
    modules: list[ModuleType] = [importlib.import_module(f"{__name__}.{fix}") for fix in fixes]
    return tuple(hook for module in modules if (hook := getattr(module, name, None)) is not None)


@functools.cache
def _all_hooks(name: str) -> tuple[Callable[..., Any], ...]:
    return _hooks(list(FIXES), name)


def at_definition(op: Op) -> None:
    for hook in _definition_hooks():
        hook(op)
    _wait_for_imports()
    for hook in _woken:
        hook(op)
    if len(_woken) < len(AFTER_IMPORT):
        _defined[op.sig.qualname] = op  # for the hooks still waiting


# qualified name -> its live definition, while a fix of AFTER_IMPORT waits for its module
_defined: dict[str, Op] = {}
# the definition hooks of the fixes of AFTER_IMPORT whose module was imported
_woken: list[Callable[[Op], None]] = []


@functools.cache
def _wait_for_imports() -> None:  # once, at the first definition
    for fix, module in AFTER_IMPORT.items():
        when_imported(module, functools.partial(_wake, fix))


def _wake(fix: str, module: ModuleType) -> None:
    hook: Callable[[Op], None] = importlib.import_module(f"{__name__}.{fix}").at_definition
    _woken.append(hook)
    for op in list(_defined.values()):
        hook(op)
    if len(_woken) == len(AFTER_IMPORT):
        _defined.clear()


@functools.cache
def _definition_hooks() -> tuple[Callable[..., Any], ...]:
    return _hooks(AT_DEFINITION, "at_definition")


def at_first_trace(op: Op) -> None:
    for hook in _all_hooks("at_first_trace"):
        hook(op)


def at_sharding_rule(op: ShardedOp) -> None:
    """A DTensor sharding rule was registered on ``op`` (``torch.distributed.tensor`` is imported by then)."""
    for hook in _sharding_hooks():
        hook(op)


@functools.cache
def _sharding_hooks() -> tuple[Callable[..., Any], ...]:
    return _hooks([fix for fix, when in FIXES.items() if when == "sharding"], "at_sharding_rule")


def at_destroy(op: Op) -> None:
    if _defined.get(op.sig.qualname) is op:
        del _defined[op.sig.qualname]
    for hook in _all_hooks("at_destroy"):
        hook(op)


def reroute_hooks() -> tuple[Callable[..., bool], ...]:
    """The ``reroutes`` hooks, for the compiled call to ask in turn."""
    return _all_hooks("reroutes")


def reroutes(op: Op, values: dict[str, Any], written: list[Any]) -> bool:
    """Whether any fix routes this traced call through the functional twin."""
    return any(hook(op, values, written) for hook in reroute_hooks())
