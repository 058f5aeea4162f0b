"""Per-call eager cost of tagged_ops ops against torch.library.custom_op, side by side.

For the sin ops on a 1-element tensor (CPU, or ``--device cuda``: there each round ends with
``torch.cuda.synchronize()``, and the cost measured is the launch's), in one process:

* tagged_ops (whatever path this torch gives, or the forced fallback),
* the equivalent native ``custom_op``: tagged on torch with native tags,
  untagged plus a returning Python wrapper elsewhere,
* floors, per kind: a raw ``Library.define`` op of the schema tagged_ops registered
  (same path), with a hand-written Python kernel, called through ``torch.ops``;
  and ATen's ``sin_``.

Prints the best microseconds per call, and the median over 41 interleaved rounds of the
per-round ratio tagged_ops / custom_op (target <= 0.5) and
the ratio tagged_ops / raw op of the same schema per kind (target <= 1.25).
``--json FILE`` also writes the numbers for compat_matrix.md.

    python benchmarks/eager_overhead.py [--calls 10000] [--rounds 41] [--device cpu|cuda] [--json out.json]

With ``--device cuda`` on a machine without a GPU it prints ``no GPU: ...`` and measures nothing.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

import torch
from torch import Tensor

import tagged_ops
from tagged_ops._selfcheck import define_sin_ops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import provenance  # noqa: E402  (which tagged_ops was measured)
from tests._lowering import raw_untagged  # noqa: E402  (the hand-written untagged op, shared with the tests)


def _interleaved(
    fns: "dict[str, Callable[[], object]]", calls: int, rounds: int, sync: "Callable[[], None]" = lambda: None
) -> "dict[str, list[float]]":
    """Per-call microseconds of each function, one timing per round, the functions taking turns.

    Taking turns keeps drift on a shared machine (frequency, neighbours) out of the
    ratios: each round's timings are side by side.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()  # CUDA: the launches queued are done before the clock stops
            times[name].append((time.perf_counter() - start) / calls * 1e6)
    return times


def _ratio(times: "dict[str, list[float]]", a: str, b: str) -> float:
    """Median over rounds of a's time / b's time in the same round."""
    return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))


def _custom_op_pair() -> "tuple[Callable[[Tensor], Tensor], Callable[[Tensor, Tensor], Tensor], str]":
    if tagged_ops.NATIVE_TAGS:

        @torch.library.custom_op("bench_raw::sin_", mutates_args=("x",), tags=torch.Tag.inplace)  # type: ignore[attr-defined]
        def sin_(x: Tensor) -> Tensor:
            x.sin_()
            return x

        @torch.library.custom_op("bench_raw::sin_out", mutates_args=("out",), tags=torch.Tag.out)  # type: ignore[attr-defined]
        def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
            torch.sin(x, out=out)
            return out

        return sin_, lambda x, o: sin_out(x, out=o), "custom_op tagged"

    def raw_sin_(x: Tensor) -> None:
        x.sin_()

    def raw_sin_out(x: Tensor, out: Tensor) -> None:
        torch.sin(x, out=out)

    # custom_op where torch has it; on 2.2/2.3 what a library author writes by hand there
    label = (
        "custom_op untagged + wrapper" if hasattr(torch.library, "custom_op") else "Library.define untagged + wrapper"
    )
    raw_sin_ = raw_untagged("bench_raw::sin_", "(Tensor(a!) x) -> ()", ("x",), raw_sin_)
    raw_sin_out = raw_untagged("bench_raw::sin_out", "(Tensor x, Tensor(a!) out) -> ()", ("out",), raw_sin_out)

    def sin_wrapper(x: Tensor) -> Tensor:
        raw_sin_(x)
        return x

    def sin_out_wrapper(x: Tensor, o: Tensor) -> Tensor:
        raw_sin_out(x, o)
        return o

    return sin_wrapper, sin_out_wrapper, label


def _library_define_floors(ops: Any, x: Tensor, o: Tensor) -> "tuple[Callable[[], Any], Callable[[], Any]]":
    """A raw ``Library.define`` op per kind with the schema tagged_ops registered on this path.

    Python kernels as a library author writes them by hand, called through
    ``torch.ops`` with ``x`` (and ``o``) as tagged_ops' op takes them: the
    dispatcher's own cost for that schema, nothing of ours.
    """
    lib = torch.library.Library("bench_floor", "FRAGMENT")
    lib.define("sin_" + ops.sin_.schema.split("::", 1)[1].removeprefix("sin_"))
    lib.define("sin_out" + ops.sin_out.schema.split("::", 1)[1].removeprefix("sin_out"))
    if ops.sin_out.is_native:  # (Tensor(a!) x) -> Tensor(a!); (Tensor x, *, Tensor(a!) out) -> Tensor(a!)

        def sin_(x: Tensor) -> Tensor:
            return x.sin_()

        def sin_out(x: Tensor, *, out: Tensor) -> Tensor:
            return torch.sin(x, out=out)

        inplace, out = torch.ops.bench_floor.sin_.default, torch.ops.bench_floor.sin_out.default
        floors = (lambda: inplace(x), lambda: out(x, out=o))
    else:  # (Tensor(a!) x) -> (); (Tensor x, Tensor(a!) out) -> ()

        def sin_(x: Tensor) -> None:  # type: ignore[misc]
            x.sin_()

        def sin_out(x: Tensor, out: Tensor) -> None:  # type: ignore[misc]
            torch.sin(x, out=out)

        inplace, out = torch.ops.bench_floor.sin_.default, torch.ops.bench_floor.sin_out.default
        floors = (lambda: inplace(x), lambda: out(x, o))
    lib.impl("sin_", sin_, "CompositeExplicitAutograd")
    lib.impl("sin_out", sin_out, "CompositeExplicitAutograd")
    _library_define_floors.lib = lib  # type: ignore[attr-defined]  # keep it alive
    return floors


def measure(calls: int, rounds: int, device: str = "cpu") -> dict[str, Any]:
    ops = define_sin_ops("bench_tagged")
    raw_inplace, raw_out, raw_label = _custom_op_pair()
    x = torch.randn(1, device=device)
    o = torch.empty(1, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    floor_inplace, floor_out = _library_define_floors(ops, x, o)
    # Warm up every path once (first calls build caches).
    for f in (
        lambda: ops.sin_(x),
        lambda: ops.sin_out(x, out=o),
        lambda: raw_inplace(x),
        lambda: raw_out(x, o),
        floor_inplace,
        floor_out,
    ):
        f()
    times = _interleaved(
        {
            "tagged_ops in-place": lambda: ops.sin_(x),
            f"{raw_label} in-place": lambda: raw_inplace(x),
            "Library.define in-place (same schema)": floor_inplace,
            "tagged_ops out=": lambda: ops.sin_out(x, out=o),
            f"{raw_label} out=": lambda: raw_out(x, o),
            "Library.define out= (same schema)": floor_out,
            "ATen sin_": lambda: x.sin_(),
        },
        calls,
        rounds,
        sync,
    )
    return {
        "torch": torch.__version__,
        "commit": provenance.tagged_ops_commit(),
        "path": "native" if ops.sin_.is_native else "fallback",
        "device": device if device == "cpu" else torch.cuda.get_device_name(0),
        "baseline": raw_label,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "us_per_call": {k: round(min(v), 2) for k, v in times.items()},
        "ratio_inplace": round(_ratio(times, "tagged_ops in-place", f"{raw_label} in-place"), 3),
        "ratio_out": round(_ratio(times, "tagged_ops out=", f"{raw_label} out="), 3),
        "ratio_inplace_floor": round(_ratio(times, "tagged_ops in-place", "Library.define in-place (same schema)"), 3),
        "ratio_out_floor": round(_ratio(times, "tagged_ops out=", "Library.define out= (same schema)"), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU: CUDA is not available on this machine; nothing measured")
        return
    result = measure(args.calls, args.rounds, args.device)
    print(
        f"torch {result['torch']}, tagged_ops path: {result['path']}, device: {result['device']}, "
        f"baseline: {result['baseline']}"
    )
    for name, value in result["us_per_call"].items():
        print(f"  {name:40s} {value:8.2f} us/call")
    print(
        f"ratio tagged_ops / {result['baseline']}: in-place {result['ratio_inplace']:.2f}, out= {result['ratio_out']:.2f} (target <= 0.5)"
    )
    print(
        "ratio tagged_ops / Library.define op of the same schema: "
        f"in-place {result['ratio_inplace_floor']:.2f}, out= {result['ratio_out_floor']:.2f} (target <= 1.25)"
    )
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
