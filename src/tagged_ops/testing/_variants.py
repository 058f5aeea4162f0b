"""Samples that keep an example's values but change what an op must not depend on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor

from .._handle import TaggedOp

__all__ = ["Sample", "default_devices", "noncontiguous", "variants", "with_storage_offset"]


@dataclass(frozen=True)
class Sample:
    """One call of an op: ``op(*args, **kwargs)``, with a label saying what was changed.

    >>> from tagged_ops.testing import Sample
    >>> sample = Sample("original", (torch.ones(2),), {"out": torch.empty(2)})
    >>> sin_out(*sample.args, **sample.kwargs) is sample.kwargs["out"]
    True
    """

    label: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def clone(self) -> Sample:
        """A deep copy that keeps every tensor's layout (strides, storage offset)."""
        return self.mapped("", _clone_layout)

    def mapped(self, change: str, fn: Callable[[Tensor], Tensor], *, only: set[str] | None = None) -> Sample:
        """This call with ``fn`` applied to its Tensors (those of the keywords in ``only``, if given).

        Labelled ``<label>/<change>``, or ``<label>`` for an empty ``change``.
        """
        args = self.args if only is not None else _map(self.args, fn)
        kwargs = {k: _map_one(v, fn) if only is None or k in only else v for k, v in self.kwargs.items()}
        return Sample(f"{self.label}/{change}" if change else self.label, args, kwargs)


def default_devices() -> list[str]:
    """CPU, plus CUDA when this machine has it.

    >>> from tagged_ops.testing import default_devices
    >>> default_devices() == ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    True
    """
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def _map_one(value: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_one(v, fn) for v in value)
    return value


def _map(values: Sequence[Any], fn: Callable[[Tensor], Tensor]) -> tuple[Any, ...]:
    return tuple(_map_one(v, fn) for v in values)


def _clone_layout(t: Tensor) -> Tensor:
    storage = torch.empty(t.untyped_storage().nbytes() // t.element_size(), dtype=t.dtype, device=t.device)
    out = storage.as_strided(t.shape, t.stride(), t.storage_offset())
    out.copy_(t)
    return out


def noncontiguous(t: Tensor) -> Tensor:
    """Same values in a non-contiguous layout (a copy for tensors with fewer than 2 elements).

    1-D: every other element. More dimensions: rows padded by one element, as
    in a slice of a larger buffer; no single stride can flatten that layout, so
    a kernel that silently works on a flattened copy is caught.

    >>> from tagged_ops.testing import noncontiguous
    >>> t = noncontiguous(torch.arange(6.0).reshape(2, 3))
    >>> t.is_contiguous(), t.tolist()
    (False, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    """
    if t.numel() < 2:
        return t.clone()
    if t.dim() == 1:
        out = torch.empty((t.shape[0], 2), dtype=t.dtype, device=t.device)[:, 0]
    else:
        out = torch.empty((*t.shape[:-1], t.shape[-1] + 1), dtype=t.dtype, device=t.device)[..., : t.shape[-1]]
    out.copy_(t)
    return out


def with_storage_offset(t: Tensor, offset: int = 3) -> Tensor:
    """Same values and contiguous strides, starting ``offset`` elements into its storage.

    >>> from tagged_ops.testing import with_storage_offset
    >>> t = with_storage_offset(torch.ones(2))
    >>> t.storage_offset(), t.tolist()
    (3, [1.0, 1.0])
    """
    base = torch.empty(t.numel() + offset, dtype=t.dtype, device=t.device)
    out = base[offset:].view(t.shape)
    out.copy_(t)
    return out


def variants(
    op: TaggedOp,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    dtypes: Sequence[torch.dtype] = (),
    devices: Sequence[str] | None = None,
) -> Iterator[Sample]:
    """From one example call, samples with the same values and shapes but other layouts.

    Per device (default: CPU, plus CUDA when available): the original; every
    Tensor argument non-contiguous; every Tensor argument with a storage offset;
    for out= ops, the out buffers alone non-contiguous; and the original with
    each extra floating dtype in ``dtypes``.

    >>> from tagged_ops.testing import variants
    >>> [s.label for s in variants(sin_out, (torch.ones(4, 4),), {"out": torch.empty(4, 4)}, devices=["cpu"])]
    ['cpu', 'cpu/noncontiguous', 'cpu/storage-offset', 'cpu/noncontiguous-out']
    """
    kwargs = dict(kwargs or {})
    outs = set(op.mutated_args) if op.kind == "out" else set()
    for device in default_devices() if devices is None else devices:

        def on(t: Tensor, device: str = device) -> Tensor:
            return t.to(device)

        base = Sample(device, tuple(args), kwargs).mapped("", on)
        yield base
        yield base.mapped("noncontiguous", noncontiguous)
        yield base.mapped("storage-offset", with_storage_offset)
        if outs:
            yield base.mapped("noncontiguous-out", noncontiguous, only=outs)
        for dtype in dtypes:

            def cast(t: Tensor, dtype: torch.dtype = dtype) -> Tensor:
                return t.to(dtype) if t.is_floating_point() else t

            yield base.mapped(str(dtype).removeprefix("torch."), cast)
