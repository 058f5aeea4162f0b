"""The functional twin of an untagged op: the same arguments, fresh results instead of writes.

``torch.ops.<ns>.<name>__functional`` runs the op on fresh tensors (a clone of an
in-place op's argument, empty out buffers) and returns them; :meth:`FunctionalTwin.write`
then ``copy_``s them into the caller's tensors. Every compiler lowers that, and
torch.func's transforms have their own rules for it, so compiled calls that a fix
reroutes (``_fixes``), calls of ``compile_functional`` ops, and calls under
torch.func go through it: exact results, for one extra buffer and copy per written
tensor. It is defined the first time one of those needs it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.library import Library

from . import _compat
from ._anchor import anchor, release_unless_same
from ._registration import RegisteredOp
from ._signature import CallOrder, Param, helper_name, join_params

__all__ = ["FUNCTIONAL_SUFFIX", "FunctionalTwin", "arguments_by_name"]

FUNCTIONAL_SUFFIX = "__functional"


class FunctionalTwin:
    """``<ns>::<name>__functional``: the functional twin of one untagged op."""

    def __init__(self, untagged: RegisteredOp) -> None:
        """The twin runs ``untagged`` on fresh tensors, and its fake kernel (the user's, if
        registered) on fake ones, so that its checks still run."""
        sig, op, fake, schema_order = untagged.sig, untagged.op, untagged.fake_kernel, untagged.schema_order
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

        self.qualname = f"{sig.namespace}::{name}"
        self._lib: Library | None = Library(sig.namespace, "FRAGMENT")
        self.op: Any = None
        #: The arguments the twin's results stand for, in order.
        self.written = tuple(schema_order[i].name for i in mutated)
        self._order = CallOrder(schema_order)
        try:
            definition = f"{name}({plain}) -> {ret}"
            release_unless_same(sig.namespace, name, definition, owner=sig.qualname)
            self._lib.define(definition, tags=(torch.Tag.pt2_compliant_tag,))
            self._lib.impl(name, lambda *a, **k: run_on_fresh(fresh, op, a, k), "CompositeExplicitAutograd")
            anchor(
                sig.namespace, name, definition, _compat.lookup_op(f"{sig.namespace}::{name}")
            )  # the Autograd fallthrough, kept across reloads
            _compat.register_fake(
                f"{sig.namespace}::{name}", lambda *a, **k: run_on_fresh(torch.empty_like, fake, a, k), lib=self._lib
            )
            self.op = _compat.lookup_op(f"{sig.namespace}::{name}")
        except Exception:
            self.destroy()  # leave the twin's name free for the next definition
            raise

    def write(self, values: dict[str, Any]) -> None:
        """Run the twin on ``values`` (every argument by name) and ``copy_`` its results into the written ones.

        Plain enough for Dynamo to trace (compiled calls routed through the twin).
        """
        results = self._order.call(self.op, values)
        if len(self.written) == 1:
            results = (results,)
        for i in range(len(self.written)):
            values[self.written[i]].copy_(results[i])

    def destroy(self) -> None:
        if self._lib is not None:
            _compat.destroy_library(self._lib)
            self._lib = None
            self.op = None


def arguments_by_name(
    op: _compat.OpOverload, schema_order: Sequence[Param]
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """A kernel's ``(args, kwargs)`` for ``op`` (parameters ``schema_order``) -> every argument by name.

    The dispatcher leaves out arguments equal to their defaults, and the twin may have
    none (2.2): they are filled in.
    """
    order = CallOrder(schema_order)
    defaults = _compat.schema_defaults(op)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return order.by_name(args, kwargs, defaults)

    return bind
