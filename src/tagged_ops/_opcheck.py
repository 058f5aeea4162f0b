"""``tagged_ops.opcheck``: ``torch.library.opcheck`` in the user's call form, on both paths."""

from __future__ import annotations

from typing import Any, Sequence

from . import _compat
from ._handle import TaggedOp

__all__ = ["DEFAULT_TEST_UTILS", "opcheck"]

#: torch.library.opcheck's default checks (the 2.4+ list on every release).
DEFAULT_TEST_UTILS: tuple[str, ...] = _compat.OPCHECK_DEFAULT_UTILS


def opcheck(
    op: TaggedOp,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    test_utils: str | Sequence[str] = DEFAULT_TEST_UTILS,
    raise_exception: bool = True,
    atol: float | None = None,
    rtol: float | None = None,
) -> dict[str, str]:
    """Check ``op``'s registrations, mirroring ``torch.library.opcheck``.

    ``args`` and ``kwargs`` are in the form you call the handle with (out
    buffers as keywords); they are translated to the registered op's form, so
    one call works on the native and the fallback path. ``atol`` / ``rtol``
    are passed on where the installed torch accepts them.

    >>> result = tagged_ops.opcheck(sin_out, (torch.randn(3),), {"out": torch.empty(3)})
    >>> sorted(set(result.values()))
    ['SUCCESS']
    """
    if not isinstance(op, TaggedOp):
        raise TypeError(f"{op!r}: tagged_ops.opcheck takes an op made by define_inplace/define_out")
    op_args, op_kwargs = op.to_op_arguments(*args, **(kwargs or {}))
    extra: dict[str, Any] = {}
    if atol is not None or rtol is not None:
        if not _compat.opcheck_accepts_tolerances():
            raise TypeError(
                f"{op.qualname}: this torch's opcheck takes no atol/rtol; leave them unset on this release."
            )
        extra = {"atol": atol, "rtol": rtol}
    return _compat.opcheck(
        op.opoverload, op_args, op_kwargs, test_utils=test_utils, raise_exception=raise_exception, **extra
    )
