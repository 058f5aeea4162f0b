"""The classic pattern in tagged_ops' place: what the port's import costs without tagged_ops.

run.py puts this folder first on ``sys.path`` for one measurement: the ported
torch_scatter imported with these functions instead of tagged_ops', so the
same declarations are made the way a library writes them by hand (bitsandbytes',
vLLM's): ``Library.define`` of the untagged schema (the buffers written, nothing
returned), a no-op ``register_fake``, and a Python wrapper that returns the
buffers. No autograd refusal, no torch.func kernel, no errors in 2.13's words, no
native tags: the floor under what any port that declares its ops in Python pays,
which the unported build (ops registered in C++ alone, no fake kernels) does not.
Only run.py's import measurement uses it; torch_scatter's tests run on tagged_ops.
"""

from __future__ import annotations

import re
from typing import Any

import torch

_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract  # 2.2/2.3: impl_abstract
_libraries: dict[str, torch.library.Library] = {}


class TaggedOp:
    """The op, called as declared: returns the buffers it wrote."""

    def __init__(self, op: Any, written: list[str] | None) -> None:
        self._op, self._written = op, written  # None: the first argument (in-place)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._op(*args, **kwargs)
        if self._written is None:
            return args[0]
        buffers = tuple(kwargs[name] for name in self._written)
        return buffers[0] if len(buffers) == 1 else buffers


def _declare(qualname: str, schema: str, written: list[str] | None) -> TaggedOp:
    namespace, name = qualname.split("::")
    library = _libraries.get(namespace) or _libraries.setdefault(
        namespace, torch.library.Library(namespace, "FRAGMENT")
    )
    arguments = schema[: schema.rindex("->")].strip()
    library.define(f"{name}{arguments} -> ()")
    _fake(qualname, lambda *args, **kwargs: None, lib=library)
    packet, _, overload = name.partition(".")
    return TaggedOp(getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default"), written)


def declare_inplace(qualname: str, schema: str) -> TaggedOp:
    return _declare(qualname, schema, None)


def declare_out(qualname: str, schema: str) -> TaggedOp:
    *_, keyword_only = schema.partition("*")
    return _declare(qualname, schema, re.findall(r"Tensor\(\w!\) (\w+)", keyword_only))


def adopt_classic(op: Any) -> Any:
    """The classic pattern has no compiler fixes to extend to a classic op: nothing to do."""
    return op
