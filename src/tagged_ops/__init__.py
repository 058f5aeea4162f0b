"""tagged_ops: PyTorch 2.13's tagged mutable custom ops, with one contract on torch 2.2+.

Public surface:

* :func:`define_inplace`, :func:`define_out`: decorators like
  ``torch.library.custom_op(..., tags=torch.Tag.inplace | torch.Tag.out)``.
* :func:`declare_inplace`, :func:`declare_out`: the same ops from a schema alone,
  kernels registered per device later (as ``torch.library.define``).
* :class:`TaggedOp`: the handle they return.
* :data:`NATIVE_TAGS`, :func:`is_native`: which path ops take.
* :func:`opcheck`: ``torch.library.opcheck`` in the handle's call form.
* :func:`adopt_classic`: the compiler fixes for a classic mutable op kept beside tagged ones.
* :func:`pointwise_sharding`: the DTensor sharding rule of an elementwise op
  (:meth:`TaggedOp.register_sharding`).

* :class:`RedefinitionError`: a name defined again with another schema where torch
  cannot drop the old one (C++ kernels registered for it).

Set ``TAGGED_OPS_FALLBACK=1`` (:data:`FALLBACK_ENV_VAR`) before defining ops to force
the fallback path (to test your old-torch path on a new torch);
``TAGGED_OPS_COMPILE_FUNCTIONAL=1`` (:data:`COMPILE_FUNCTIONAL_ENV_VAR`) compiles every
op's calls through its functional twin.

Attributes load on first use (PEP 562), so ``tagged_ops._switches`` and
``tagged_ops.testing.nox`` import without torch: a noxfile or pytest start-up
pays nothing for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes
from ._switches import COMPILE_FUNCTIONAL_ENV_VAR, FALLBACK_ENV_VAR

if TYPE_CHECKING:
    from ._anchor import RedefinitionError
    from ._classic import adopt_classic
    from ._compat import NATIVE_TAGS
    from ._define import declare_inplace, declare_out, define_inplace, define_out
    from ._handle import TaggedOp, is_native
    from ._opcheck import opcheck
    from ._sharding import pointwise_sharding

__all__ = [
    "COMPILE_FUNCTIONAL_ENV_VAR",
    "FALLBACK_ENV_VAR",
    "NATIVE_TAGS",
    "RedefinitionError",
    "TaggedOp",
    "adopt_classic",
    "declare_inplace",
    "declare_out",
    "define_inplace",
    "define_out",
    "is_native",
    "opcheck",
    "pointwise_sharding",
]


_HOME = {
    "__version__": "._version",
    "NATIVE_TAGS": "._compat",
    "RedefinitionError": "._anchor",
    "TaggedOp": "._handle",
    "adopt_classic": "._classic",
    "declare_inplace": "._define",
    "declare_out": "._define",
    "define_inplace": "._define",
    "define_out": "._define",
    "is_native": "._handle",
    "opcheck": "._opcheck",
    "pointwise_sharding": "._sharding",
}


__getattr__, __dir__ = lazy_attributes(__name__, _HOME)
