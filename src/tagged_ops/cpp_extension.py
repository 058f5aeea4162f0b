"""Building C++ kernels for tagged_ops ops, as ``torch.utils.cpp_extension`` builds any extension.

``#include <tagged_ops/kernel.h>`` and register a kernel written once in the tagged form
(it returns its buffer, or its first argument) with ``TAGGED_OPS_IMPL(m, "op.overload", fn)``
inside ``TORCH_LIBRARY_IMPL``; it fits the schema the op has on the running path (see the
header). Declare the op from Python with :func:`tagged_ops.declare_out` /
:func:`tagged_ops.declare_inplace`::

    torch.utils.cpp_extension.load(
        name="mylib_kernels",
        sources=["kernels.cpp"],
        extra_include_paths=tagged_ops.cpp_extension.include_paths(),
        is_python_module=False,
    )
"""

from __future__ import annotations

import os

__all__ = ["include_paths"]


def include_paths() -> list[str]:
    """The folders to add to a C++ extension's include path for ``<tagged_ops/kernel.h>``.

    Pass them as ``extra_include_paths`` (``torch.utils.cpp_extension.load``) or
    ``include_dirs`` (``CppExtension``):

    >>> import os, tagged_ops.cpp_extension
    >>> folder = tagged_ops.cpp_extension.include_paths()[0]
    >>> os.path.isfile(os.path.join(folder, "tagged_ops", "kernel.h"))
    True
    """
    return [os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")]
