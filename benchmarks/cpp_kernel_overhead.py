"""Per-call eager cost of a C++-kernel tagged op against the same kernel on a classic op, side by side.

examples/cpp_kernel, in one process: the classic C++ op (``cpp_sin_classic::sin_out``, defined and
registered in C++, unboxed) and the ported op (declared with ``tagged_ops.declare_out``, the same
kernel body registered with ``TAGGED_OPS_IMPL``, boxed), on a 1-element CPU tensor:

* the ported op through its handle, ``cpp_sin.sin_out(x, out=o)``;
* the ported op through ``torch.ops`` (the path's own argument form);
* the classic op through ``torch.ops``.

Prints the best microseconds per call and the median over interleaved rounds of the per-round
ratios to the classic op (the target for the handle: <= 1.25, as for Python kernels).
Builds both extensions first (``torch.utils.cpp_extension``; needs a C++ compiler and ninja).

    python benchmarks/cpp_kernel_overhead.py [--calls 10000] [--rounds 21]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

import tagged_ops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "cpp_kernel"))
import cpp_sin  # noqa: E402  (the example: declares the ported ops)
from eager_overhead import _interleaved  # noqa: E402  (beside this script: the functions take turns per round)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as build:
        start = time.perf_counter()
        os.makedirs(os.path.join(build, "ported"))
        os.makedirs(os.path.join(build, "classic"))
        cpp_sin.load_kernels(os.path.join(build, "ported"))
        cpp_sin.load_classic(os.path.join(build, "classic"))
        print(f"built both extensions in {time.perf_counter() - start:.1f} s")
    x, o = torch.randn(1), torch.empty(1)
    handle = cpp_sin.sin_out
    op_args, op_kwargs = handle.to_op_arguments(x, out=o)
    ported = handle.opoverload
    classic = torch.ops.cpp_sin_classic.sin_out.default
    fns = {
        "handle": lambda: handle(x, out=o),
        "ported op via torch.ops": lambda: ported(*op_args, **op_kwargs),
        "classic op via torch.ops": lambda: classic(x, o),
    }
    for fn in fns.values():  # warm up, and check all three compute the same thing
        o.zero_()
        fn()
        torch.testing.assert_close(o, x.sin())
    times = _interleaved(fns, args.calls, args.rounds)
    path = "native" if tagged_ops.is_native(handle) else "fallback"
    print(f"torch {torch.__version__}, tagged_ops path: {path}; us per call (best of {args.rounds} rounds):")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(t, times["classic op via torch.ops"], strict=True))
        print(f"  {name:26s} {min(t):6.2f} us   ratio to the classic op {ratio:.2f}")


if __name__ == "__main__":
    main()
