"""What a handle's call does while Dynamo traces it: the compiled call, in plain Python.

Dynamo traces the handle's generated call like any Python function; its compiled
branch first runs the definition's ``prepare()`` for real (the first trace defines
the untagged op compiled code records and the fixes' patches, see ``_definition``),
then the function :func:`make_compiled_call` made, which Dynamo traces:

* under ``torch.export`` the op users see is recorded (tagged on 2.13+);
* an in-place call under autograd runs outside the graph (a graph break), so that a
  backward through the mutated tensor raises, as in eager;
* otherwise the untagged op is recorded (the native path's twin, or the fallback op
  itself), which Inductor writes in place; or, where ``compile_functional`` asks or a
  fix reroutes the call (``_fixes.reroute_hooks()``), the functional twin plus ``copy_``.

The decisions that do not depend on the call are asked through functions marked as
constants, so Dynamo asks them once per trace and the graph holds only the outcome.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from . import _compat, _compat_compiler, _fixes
from ._functional import FunctionalTwin
from ._signature import CallOrder, OpSignature, Param
from ._switches import compile_functional_forced

__all__ = ["make_compiled_call"]


class _Forward:
    """A call in one parameter order (positional, then keyword-only) made in another, by name."""

    def __init__(self, source: Sequence[Param], target: Sequence[Param]) -> None:
        self.source, self.target = CallOrder(source), CallOrder(target)

    def values(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return self.source.by_name(args, kwargs)

    def call(self, fn: Callable[..., Any], values: dict[str, Any]) -> Any:
        return self.target.call(fn, values)


def make_compiled_call(
    definition: _fixes.Op,
    *,
    order: Sequence[Param],
    functional: FunctionalTwin,
    autograd_call: Callable[..., None] | None,
    compile_functional: Callable[[], bool],
) -> Callable[..., None]:
    """What the handle of ``definition`` does while Dynamo traces it, given the op's arguments in ``order``.

    ``functional`` is the functional twin of the untagged op; ``autograd_call`` the
    in-place handle's path under autograd (None for out= ops); ``compile_functional()``
    whether the op was defined with ``compile_functional=True`` (asked once per trace).
    """
    sig: OpSignature = definition.sig
    op = definition.op
    target, target_order = definition.untagged()
    to_target = _Forward(order, target_order)
    written_names = sig.mutated_names
    exporting = _compat_compiler.is_exporting if definition.tagged else lambda: False
    preferred = _compat_compiler.assume_constant_result(lambda: compile_functional() or compile_functional_forced())
    reroutes = _fixes.reroute_hooks()

    eager_autograd_call = None
    if autograd_call is not None:

        def run_autograd_call(*args: Any, **kwargs: Any) -> None:
            autograd_call(*args, **kwargs)

        # named after the op: Dynamo's messages name the function
        run_autograd_call.__name__ = run_autograd_call.__qualname__ = sig.qualname
        eager_autograd_call = _compat_compiler.disable(
            run_autograd_call,
            reason=f"{sig.qualname}: an in-place call under autograd runs outside the graph, so that a "
            "backward through the mutated tensor raises, as in eager. Call it under torch.no_grad(), "
            "or on tensors that do not require grad, to keep it in the graph.",
        )

    def compiled_call(*args: Any, **kwargs: Any) -> None:
        if exporting():
            op(*args, **kwargs)
            return
        if (
            eager_autograd_call is not None
            and torch.is_grad_enabled()
            and not _compat_compiler.is_exporting()  # export keeps the op in its graph (the kernel refuses)
            and _compat.any_requires_grad_py(*args, **kwargs)
        ):
            eager_autograd_call(*args, **kwargs)
            return
        values = to_target.values(args, kwargs)
        written = [values[n] for n in written_names]
        use_twin = preferred()
        for reroute in reroutes:
            if not use_twin and reroute(definition, values, written):
                use_twin = True
        if use_twin:
            functional.write(values)
            return
        to_target.call(target, values)

    return compiled_call
