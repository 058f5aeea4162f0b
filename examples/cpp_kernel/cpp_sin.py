"""cpp_sin: tagged ops whose kernels are written in C++ (after/cpp_sin.cpp), declared here.

The declarations carry the 2.13 tagged schemas; tagged_ops registers them natively on
torch 2.13+ and as untagged ops elsewhere, and the C++ kernels (registered with
``TAGGED_OPS_IMPL``) fit either. No Python kernel runs in these ops.

    import cpp_sin
    cpp_sin.load_kernels()          # builds and loads the extension (once per process)
    cpp_sin.sin_out(x, out=o)       # returns o, on every torch from 2.2
    cpp_sin.sin_(x)                 # returns x

Declaring and loading may come in either order.
"""

from __future__ import annotations

import os
from typing import Sequence

import torch
import torch.utils.cpp_extension

import tagged_ops
import tagged_ops.cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))

sin_out = tagged_ops.declare_out("cpp_sin::sin.out", "(Tensor x, float scale=1.0, *, Tensor(a!) out) -> Tensor(a!)")
sin_ = tagged_ops.declare_inplace("cpp_sin::sin_", "(Tensor(a!) x) -> Tensor(a!)")
sincos_out = tagged_ops.declare_out(
    "cpp_sin::sincos.out", "(Tensor x, *, Tensor(a!) sin, Tensor(b!) cos) -> (Tensor(a!), Tensor(b!))"
)


def load_kernels(
    build_directory: str | None = None,
    *,
    cuda: bool = False,
    extra_sources: Sequence[str] = (),
    verbose: bool = False,
) -> None:
    """Build (or reuse) and load the extension that registers the C++ kernels.

    ``cuda=True`` adds the CUDA kernels (needs nvcc). ``extra_sources``: more translation
    units for the same extension (the tests add kernels that misbehave on purpose).
    """
    sources = [os.path.join(HERE, "after", "cpp_sin.cpp"), *extra_sources]
    if cuda:
        sources.append(os.path.join(HERE, "after", "cpp_sin_cuda.cu"))
    torch.utils.cpp_extension.load(
        name="cpp_sin_kernels" + ("_cuda" if cuda else ""),
        sources=sources,
        extra_include_paths=tagged_ops.cpp_extension.include_paths(),
        extra_cflags=["-O2"],  # JIT builds are unoptimized otherwise; setup.py builds get -O2 or -O3
        extra_cuda_cflags=["-O2"],
        build_directory=build_directory,
        is_python_module=False,
        verbose=verbose,
    )


def load_classic(build_directory: str | None = None, *, verbose: bool = False) -> None:
    """Build and load the extension as it was before the port (``cpp_sin_classic::sin_out``)."""
    torch.utils.cpp_extension.load(
        name="cpp_sin_classic",
        sources=[os.path.join(HERE, "before", "cpp_sin.cpp")],
        extra_cflags=["-O2"],
        build_directory=build_directory,
        is_python_module=False,
        verbose=verbose,
    )
