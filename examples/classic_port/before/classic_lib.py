"""classic_lib before the port: untagged mutable ops returning nothing, and wrappers."""

import torch
from torch import Tensor

_lib = torch.library.Library("classic_lib", "DEF")
_lib.define("scale_(Tensor(a!) x, float alpha) -> ()")
_lib.define("rms_norm_out(Tensor x, Tensor weight, float eps, Tensor(a!) out) -> ()")


def _scale_kernel(x: Tensor, alpha: float) -> None:
    x.mul_(alpha)


def _rms_norm_kernel(x: Tensor, weight: Tensor, eps: float, out: Tensor) -> None:
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight)


_lib.impl("scale_", _scale_kernel, "CompositeExplicitAutograd")
_lib.impl("rms_norm_out", _rms_norm_kernel, "CompositeExplicitAutograd")
_register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
_register_fake("classic_lib::scale_", lambda x, alpha: None, lib=_lib)
_register_fake("classic_lib::rms_norm_out", lambda x, weight, eps, out: None, lib=_lib)


def scale_(x: Tensor, alpha: float) -> Tensor:
    torch.ops.classic_lib.scale_(x, alpha)
    return x


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6, out: "Tensor | None" = None) -> Tensor:
    out = torch.empty_like(x) if out is None else out
    torch.ops.classic_lib.rms_norm_out(x, weight, eps, out)
    return out
