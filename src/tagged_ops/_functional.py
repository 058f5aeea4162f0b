"""The compile lowering where Inductor cannot compile a mutating custom op (torch 2.2).

AOTAutograd turns a mutating op into ``auto_functionalized`` on 2.2 already,
but only 2.3's Inductor lowers it (2.2 fails with "auto_functionalized is not
an OpOverload"). There the handle, under ``torch.compile``, calls a functional
twin, ``torch.ops.<ns>.<name>__functional``: the same arguments, no mutation,
and it returns fresh tensors holding what the op would write. The handle then
``copy_``s them into the user's tensors, which every compiler lowers. Results
are exact; the price is one extra buffer and one copy per mutated tensor.

The same twin serves calls that mutate a view (the handle checks ``._base``
while Dynamo traces) wherever Inductor lowers through ``auto_functionalized``
v1 (2.3-2.5, or a user's ``enable_auto_functionalized_v2 = False`` later):
v1 miscompiles a mutated view of a tensor the graph made, and a view of a
graph input cannot be told apart while tracing. Views then cost one copy;
whole tensors keep the in-place lowering. On the native path the functional twin is the
untagged twin's (see ``_native.py``).

The twin is defined with its op (a user may turn ``auto_functionalized`` v2
off at any time before compiling), and only compiled code that needs it calls it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.library import Library

from . import _capabilities as caps
from ._anchor import anchor, release_unless_same
from ._signature import OpSignature, Param, helper_name, join_params

__all__ = ["FUNCTIONAL_SUFFIX", "FunctionalTwin", "arguments_by_name", "make_functionalize_kernel"]

FUNCTIONAL_SUFFIX = "__functional"


class FunctionalTwin:
    """``<ns>::<name>__functional``: the functional twin of one untagged op, defined with it."""

    def __init__(
        self, sig: OpSignature, op: Callable[..., Any], fake: Callable[..., Any], schema_order: tuple[Param, ...]
    ) -> None:
        """``op`` is the registered (mutating) op, which the twin runs on fresh tensors; ``fake``
        its fake kernel (the user's, if registered), so that its checks still run."""
        name = helper_name(sig.name, FUNCTIONAL_SUFFIX)
        # No alias annotations, and no defaults: the handle passes every argument,
        # and the kernel must hand all of them on to the op.
        plain = join_params(schema_order, lambda p: p.render(alias=False, default=False))
        mutated = [i for i, p in enumerate(schema_order) if p.mutated]  # positional in the fallback order
        ret = "Tensor" if len(mutated) == 1 else f"({', '.join(['Tensor'] * len(mutated))})"
        fresh = torch.clone if sig.kind == "inplace" else torch.empty_like  # out= buffers are write-only

        def run_on_fresh(
            make: Callable[[torch.Tensor], torch.Tensor], run: Callable[..., Any], args: Any, kwargs: Any
        ) -> Any:
            # run(...) with each mutated argument replaced by a fresh tensor; those are the results
            args_list = list(args)
            results = []
            for i in mutated:
                args_list[i] = make(args_list[i])
                results.append(args_list[i])
            run(*args_list, **kwargs)
            return results[0] if len(results) == 1 else tuple(results)

        self._lib: Library | None = Library(sig.namespace, "FRAGMENT")
        self.op: Any = None
        #: The arguments the twin's results stand for, in order.
        self.written = tuple(schema_order[i].name for i in mutated)
        try:
            definition = f"{name}({plain}) -> {ret}"
            release_unless_same(sig.namespace, name, definition, owner=sig.qualname)
            self._lib.define(definition, tags=(torch.Tag.pt2_compliant_tag,))
            self._lib.impl(name, lambda *a, **k: run_on_fresh(fresh, op, a, k), "CompositeExplicitAutograd")
            anchor(
                sig.namespace, name, definition, caps.lookup_op(f"{sig.namespace}::{name}")
            )  # the Autograd fallthrough, kept across reloads
            caps.register_fake(
                f"{sig.namespace}::{name}", lambda *a, **k: run_on_fresh(torch.empty_like, fake, a, k), lib=self._lib
            )
            self.op = caps.lookup_op(f"{sig.namespace}::{name}")
        except Exception:
            self.destroy()  # leave the twin's name free for the next definition
            raise

    @staticmethod
    def needed() -> bool:
        """Whether compiled code must call the twin instead of the op (2.2).

        Asked by Dynamo at trace time (see ``caps.assume_constant_result``).
        """
        return not caps.compiler_lowers_mutable_ops()

    @staticmethod
    def needed_for_views() -> bool:
        """Whether compiled code must call the twin for a call that mutates a view."""
        return not caps.compiler_lowers_mutated_views()

    def write(self, values: dict[str, Any]) -> None:
        """Run the twin on ``values`` (every argument by name) and ``copy_`` its results into the written ones."""
        results = self.op(**values)
        for name, result in zip(self.written, (results,) if len(self.written) == 1 else results, strict=True):
            values[name].copy_(result)

    def destroy(self) -> None:
        if self._lib is not None:
            caps.destroy_library(self._lib)
            self._lib = None
            self.op = None


def arguments_by_name(
    op: torch._ops.OpOverload, schema_order: Sequence[Param]
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """A kernel's ``(args, kwargs)`` for ``op`` (parameters ``schema_order``) -> every argument by name.

    The dispatcher leaves out arguments equal to their defaults, and the twin may have
    none (2.2): they are filled in.
    """
    positional = [p.name for p in schema_order if not p.keyword_only]
    defaults = {a.name: a.default_value for a in op._schema.arguments if a.has_default_value()}

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**defaults, **dict(zip(positional, args, strict=False)), **kwargs}

    return bind


def make_functionalize_kernel(
    sig: OpSignature,
    op: torch._ops.OpOverload,
    untagged_op: torch._ops.OpOverload,
    functional: FunctionalTwin,
) -> Callable[..., Any]:
    """The tagged ``op``'s kernel at the Functionalize key (native path): functionalized as ``untagged_op``.

    Functionalization (torch.compile's AOTAutograd, ``run_decompositions()`` of an export)
    hands back what a tagged op returns as a new tensor, not as the argument it is, so a
    write through it was lost (see ``caps.auto_functionalize``). This kernel records the
    call as its untagged twin's (``auto_functionalized_v2``, which Inductor writes in
    place), or, where an argument it writes is a view, as the functional twin plus
    ``copy_`` (the kernel cannot name the view's base, and Inductor miscompiles a view
    recorded as its own base), and returns the very arguments it wrote.
    """
    bind = arguments_by_name(op, sig.params)  # the tagged op's parameters: the user's order
    names = [a.name for a in untagged_op._schema.arguments]
    returned = [p.name for p in sig.mutated]  # what the tagged op returns, in order

    def functionalize_kernel(*args: Any, **kwargs: Any) -> Any:
        by_name = bind(args, kwargs)
        values = {n: by_name[n] for n in names}
        bases = all(caps.is_functional_base(values[n]) for n in functional.written)
        if not (bases and caps.auto_functionalize(untagged_op, dict(values))):
            functional.write(values)
        return by_name[returned[0]] if len(returned) == 1 else tuple(by_name[n] for n in returned)

    return functionalize_kernel
