"""tagged_ops: PyTorch 2.13's tagged mutable custom ops, with one contract on torch 2.4+.

Public surface:

* :func:`define_inplace`, :func:`define_out`: decorators like
  ``torch.library.custom_op(..., tags=torch.Tag.inplace | torch.Tag.out)``.
* :class:`TaggedOp`: the handle they return.
* :data:`NATIVE_TAGS`, :func:`is_native`: which path ops take.
* :func:`opcheck`: ``torch.library.opcheck`` in the handle's call form.

Set ``TAGGED_OPS_FALLBACK=1`` before defining ops to force the fallback path
(to test your old-torch path on a new torch).
"""

from ._capabilities import FALLBACK_ENV_VAR, NATIVE_TAGS
from ._handle import TaggedOp, define_inplace, define_out, is_native
from ._opcheck import opcheck

__all__ = [
    "FALLBACK_ENV_VAR",
    "NATIVE_TAGS",
    "TaggedOp",
    "define_inplace",
    "define_out",
    "is_native",
    "opcheck",
]

__version__ = "0.1.0"
