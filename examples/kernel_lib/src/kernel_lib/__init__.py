"""A tiny "kernel library": one in-place and one out= op, defined with tagged_ops."""

import torch
from torch import Tensor

import tagged_ops


@tagged_ops.define_inplace("kernel_lib::scale_")
def scale_(x: Tensor, factor: float = 2.0) -> Tensor:
    """x *= factor, in place."""
    x.mul_(factor)
    return x


@tagged_ops.define_out("kernel_lib::rms_norm_out")
def rms_norm_out(x: Tensor, weight: Tensor, eps: float = 1e-6, *, out: Tensor) -> Tensor:
    """RMS-normalize the last dimension of x, times weight, into out."""
    rms = x.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
    torch.mul(x * rms, weight, out=out)
    return out
