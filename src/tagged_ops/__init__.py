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

Set ``TAGGED_OPS_FALLBACK=1`` before defining ops to force the fallback path
(to test your old-torch path on a new torch).

Attributes load on first use (PEP 562), so ``tagged_ops._switches`` and
``tagged_ops.testing.nox`` import without torch: a noxfile or pytest start-up
pays nothing for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes
from ._switches import FALLBACK_ENV_VAR

if TYPE_CHECKING:
    from ._classic import adopt_classic
    from ._compat import NATIVE_TAGS
    from ._define import declare_inplace, declare_out, define_inplace, define_out
    from ._handle import TaggedOp, is_native
    from ._opcheck import opcheck

__all__ = [
    "FALLBACK_ENV_VAR",
    "NATIVE_TAGS",
    "TaggedOp",
    "adopt_classic",
    "declare_inplace",
    "declare_out",
    "define_inplace",
    "define_out",
    "is_native",
    "opcheck",
]


_HOME = {
    "__version__": "._version",
    "NATIVE_TAGS": "._compat",
    "TaggedOp": "._handle",
    "adopt_classic": "._classic",
    "declare_inplace": "._define",
    "declare_out": "._define",
    "define_inplace": "._define",
    "define_out": "._define",
    "is_native": "._handle",
    "opcheck": "._opcheck",
}


__getattr__, __dir__ = lazy_attributes(__name__, _HOME)
