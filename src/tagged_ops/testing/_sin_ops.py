"""The reference sin ops: the mutable custom-op tutorial's op, in both tagged forms.

An in-place and an out= op with torch kernels, and the same pair with NumPy
kernels that validate their own inputs (the tutorial's ``numpy_sin``). The
self-check (``python -m tagged_ops``) and tagged_ops' own tests run them; use them
to check a torch installation, or as a model for your own ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .._define import define_inplace, define_out
from .._handle import TaggedOp

__all__ = ["SinOps", "define_sin_ops"]


@dataclass
class SinOps:
    """The four reference sin ops :func:`define_sin_ops` defines: in-place and out=, each with a torch
    kernel and a NumPy kernel (CPU); what ``python -m tagged_ops`` checks.

    >>> from tagged_ops.testing import define_sin_ops
    >>> ops = define_sin_ops("docs_sin")
    >>> ops.sin_out.qualname, ops.numpy_sin_.kind
    ('docs_sin::sin_out', 'inplace')
    """

    sin_: TaggedOp  # in-place, torch kernel
    sin_out: TaggedOp  # out=, torch kernel
    numpy_sin_: TaggedOp  # in-place, numpy kernel (CPU)
    numpy_sin_out: TaggedOp  # out=, numpy kernel (CPU)


def _check_numpy_args(name: str, x: Tensor, out: Tensor | None = None) -> None:
    if x.device.type != "cpu":
        raise ValueError(f"{name}: expected a CPU tensor, got device {x.device}")
    if out is not None:
        if out.shape != x.shape:
            raise ValueError(f"{name}: out has shape {tuple(out.shape)}, expected {tuple(x.shape)}")
        if out.dtype != x.dtype:
            raise ValueError(f"{name}: out has dtype {out.dtype}, expected {x.dtype}")


def define_sin_ops(namespace: str = "tagged_ops_sin") -> SinOps:
    """Define (or redefine) the four sin ops under ``namespace``.

    >>> from tagged_ops.testing import define_sin_ops
    >>> ops = define_sin_ops("docs_sin")
    >>> x = torch.zeros(2)
    >>> ops.sin_(x) is x
    True
    """

    @define_inplace(f"{namespace}::sin_")
    def sin_(x: Tensor) -> Tensor:
        x.sin_()
        return x

    @define_out(f"{namespace}::sin_out")
    def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        torch.sin(x, out=out)
        return out

    # numpy is imported in the kernels: it is a test dependency, not a runtime one.
    @define_inplace(f"{namespace}::numpy_sin_", device_types="cpu")
    def numpy_sin_(x: Tensor) -> Tensor:
        import numpy as np

        _check_numpy_args("numpy_sin_", x)
        a = x.numpy()
        np.sin(a, out=a)
        return x

    @define_out(f"{namespace}::numpy_sin_out", device_types="cpu")
    def numpy_sin_out(x: Tensor, *, out: Tensor) -> Tensor:
        import numpy as np

        _check_numpy_args("numpy_sin_out", x, out)
        o = out.numpy()
        np.sin(x.numpy(), out=o)
        return out

    return SinOps(sin_, sin_out, numpy_sin_, numpy_sin_out)
