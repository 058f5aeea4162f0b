"""Ops written with postponed annotations (torch 2.4's own inference rejects these)."""

from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor

import tagged_ops


def define(ns: str) -> tuple[tagged_ops.TaggedOp, tagged_ops.TaggedOp]:
    @tagged_ops.define_inplace(f"{ns}::scale_")
    def scale_(
        x: Tensor, factors: Optional[List[float]] = None, repeat: int = 1, bias: Optional[Tensor] = None
    ) -> Tensor:
        for _ in range(repeat):
            x.mul_(torch.tensor(factors if factors is not None else [1.0] * x.shape[-1], dtype=x.dtype))
        if bias is not None:
            x.add_(bias)
        return x

    @tagged_ops.define_out(f"{ns}::gather_out")
    def gather_out(x: Tensor, idx: list[int], *, out: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        out.copy_(x[idx])
        if bias is not None:
            out.add_(bias)
        return out

    return scale_, gather_out
