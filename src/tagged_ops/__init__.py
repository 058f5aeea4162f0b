"""tagged_ops: PyTorch 2.13's tagged mutable custom ops, with one contract on torch 2.2+.

Public surface:

* :func:`define_inplace`, :func:`define_out`: decorators like
  ``torch.library.custom_op(..., tags=torch.Tag.inplace | torch.Tag.out)``.
* :func:`declare_inplace`, :func:`declare_out`: the same ops from a schema alone,
  kernels registered per device later (as ``torch.library.define``).
* :class:`TaggedOp`: the handle they return.
* :data:`NATIVE_TAGS`, :func:`is_native`: which path ops take.
* :func:`opcheck`: ``torch.library.opcheck`` in the handle's call form.

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
    from ._capabilities import NATIVE_TAGS
    from ._handle import TaggedOp, declare_inplace, declare_out, define_inplace, define_out, is_native
    from ._opcheck import opcheck

__all__ = [
    "FALLBACK_ENV_VAR",
    "NATIVE_TAGS",
    "TaggedOp",
    "declare_inplace",
    "declare_out",
    "define_inplace",
    "define_out",
    "is_native",
    "opcheck",
]


def _installed_version() -> str:
    # One place to bump: pyproject.toml's ``version``, read back from the installed metadata.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tagged-ops")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "0+unknown"


__version__ = _installed_version()

_HOME = {
    "NATIVE_TAGS": "._capabilities",
    "TaggedOp": "._handle",
    "declare_inplace": "._handle",
    "declare_out": "._handle",
    "define_inplace": "._handle",
    "define_out": "._handle",
    "is_native": "._handle",
    "opcheck": "._opcheck",
}


__getattr__, __dir__ = lazy_attributes(__name__, _HOME)
