"""What an op does inside torch.func's transforms (grad, vjp, jvp, jacrev, jacfwd).

Native 2.13 refuses an out= call whose arguments require grad in its Python
Autograd kernel, which functorch's grad transform reaches with its wrapped
tensors. Our ops have an Autograd fallthrough instead (a Python kernel there
would double the cost of every eager call), and their kernel sees the tensors
functorch has already unwrapped: a direct ``torch.ops`` call under
``torch.func.grad`` silently returned zero gradients.

So each op gets a kernel at ``FuncTorchDynamicLayerBackMode``, the key functorch
adds to the dispatch only while a transform is active (outside transforms it
costs nothing). There, before any level is unwrapped, it walks every active
level as functorch would and refuses where a level would need a derivative the
op does not have: an argument that requires grad at a grad level (native's own
error for out= ops), or one with a tangent at a jvp level (native lets the
tangent drop silently; we refuse). Otherwise the call goes on through functorch's
own lowering: a kernel at this key replaces functorch's fallback for the op,
so the call is made as the op's functional twin (which has functorch's
fallback) plus ``copy_`` into the mutated tensors, one extra buffer per mutated
tensor, under transforms only.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.autograd.forward_ad as fwAD

from . import _compat
from . import _compat_functorch as functorch
from ._contract import in_place_under_grad_transform, tangent_refusal
from ._functional import FunctionalTwin, arguments_by_name
from ._signature import OpSignature, Param

__all__ = ["make_transform_kernel"]


def _has_tangent(t: torch.Tensor) -> bool:
    # torch.func.jvp enters one forward-AD level per transform; a tangent at any of them counts
    return any(fwAD.unpack_dual(t, level=d).tangent is not None for d in functorch.forward_ad_levels())


def _refusal(sig: OpSignature, tensors: list[torch.Tensor], grad_error: Callable[[], Exception]) -> Exception | None:
    """The error a call with ``tensors`` gets at some active level, or None."""
    for level in functorch.transform_levels():
        # functorch gives every tensor a wrapper of the level it enters; one made at
        # another level is a fresh (untracked) wrapper there.
        own = [t for t in tensors if functorch.functorch_level(t) == level.level]
        if level.kind == "Grad" and level.grad_enabled and any(t.requires_grad for t in own):
            return grad_error() if sig.kind == "out" else RuntimeError(in_place_under_grad_transform(sig.qualname))
        if level.kind == "Jvp" and level.fwd_grad_enabled and any(_has_tangent(t) for t in own):
            return RuntimeError(tangent_refusal(sig.qualname, sig.packet, sig.kind))
        tensors = [functorch.unwrap_level(t, level.level) for t in tensors]
    return None


def make_transform_kernel(
    sig: OpSignature,
    op: _compat.OpOverload,
    schema_order: Sequence[Param],
    *,
    returns: bool,
    functional: Callable[[], FunctionalTwin],
    grad_error: Callable[[], Exception],
) -> Callable[..., Any]:
    """``op``'s kernel at ``FuncTorchDynamicLayerBackMode``, given ``op``'s arguments (``schema_order``).

    ``functional()`` gives the functional twin of the untagged op (defined on first use),
    whose parameters name the same arguments; ``returns``: the registered op returns its mutated tensors
    (native path). ``grad_error`` makes 2.13's error for an out= call under a grad level.
    """
    bind = arguments_by_name(op, schema_order)
    returned = sig.mutated_names  # what the tagged op returns, in order

    def transform_kernel(*args: Any, **kwargs: Any) -> Any:
        by_name = bind(args, kwargs)
        tensors = [t for t in functorch.tree_leaves(list(by_name.values())) if isinstance(t, torch.Tensor)]
        error = _refusal(sig, tensors, grad_error)
        if error is not None:
            raise error
        functional().write(by_name)
        if not returns:
            return None
        return by_name[returned[0]] if len(returned) == 1 else tuple(by_name[n] for n in returned)

    return transform_kernel
