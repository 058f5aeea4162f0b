"""The example library's tests: the tagged_ops pytest plugin and test kit.

Run them as they are (native tags where torch has them), and with
``pytest --tagged-ops-fallback`` (the path your users on torch 2.4-2.12 get).
"""

import kernel_lib
import torch
from torch import Tensor

from tagged_ops.testing import check


def test_scale_(tagged_ops_device: str) -> None:
    x = torch.randn(4, 8, device=tagged_ops_device)
    print(
        check(
            kernel_lib.scale_,
            [((x, 3.0),), ((x,),)],
            reference=lambda x, factor=2.0: x * factor,
            devices=[tagged_ops_device],
        )
    )


def test_rms_norm_out(tagged_ops_device: str) -> None:
    x = torch.randn(4, 8, device=tagged_ops_device)
    w = torch.randn(8, device=tagged_ops_device)

    def reference(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:  # functional: what `out` must hold
        return x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * weight

    print(
        check(
            kernel_lib.rms_norm_out,
            [((x, w), {"out": torch.empty(4, 8, device=tagged_ops_device)})],
            reference=reference,
            dtypes=(torch.float64,),
            devices=[tagged_ops_device],
        )
    )
