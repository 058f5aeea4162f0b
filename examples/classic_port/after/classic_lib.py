"""classic_lib after the port (docs/adopting.md): tagged ops, old names kept for old callers."""

import torch
from torch import Tensor

import tagged_ops

# The classic out= op keeps its name and form for existing torch.ops callers.
_lib = torch.library.Library("classic_lib", "DEF")
_lib.define("rms_norm_out(Tensor x, Tensor weight, float eps, Tensor(a!) out) -> ()")


def _scale_kernel(x: Tensor, alpha: float) -> None:
    x.mul_(alpha)


def _rms_norm_kernel(x: Tensor, weight: Tensor, eps: float, out: Tensor) -> None:
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight)


_lib.impl("rms_norm_out", _rms_norm_kernel, "CompositeExplicitAutograd")
_register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
_register_fake("classic_lib::rms_norm_out", lambda x, weight, eps, out: None, lib=_lib)


# In-place: same name, same positional arguments; it now returns x, and refuses autograd misuse.
@tagged_ops.define_inplace("classic_lib::scale_")
def scale_(x: Tensor, alpha: float) -> Tensor:
    _scale_kernel(x, alpha)
    return x


# out=: the tagged op under an ATen-style overload name; the classic name stays above.
@tagged_ops.define_out("classic_lib::rms_norm.out")
def rms_norm_out(x: Tensor, weight: Tensor, eps: float = 1e-6, *, out: Tensor) -> Tensor:
    _rms_norm_kernel(x, weight, eps, out)
    return out


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6, out: "Tensor | None" = None) -> Tensor:
    """The wrapper callers already use; now a thin call of the tagged op."""
    return rms_norm_out(x, weight, eps, out=torch.empty_like(x) if out is None else out)
