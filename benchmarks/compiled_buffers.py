"""Compiled in-place / out= steps on a 64 MB buffer: tagged_ops against both raw lowerings.

Patterns (a) in-place on a graph input and (b) out= into a graph-input buffer,
each compiled (fullgraph, Inductor; CPU, or Triton with ``--device cuda``) for: tagged_ops, the raw natively
tagged ``custom_op`` (torch with native tags only) and the raw untagged
``custom_op`` plus a returning wrapper, all in one process. Prints ms per call
(best of the interleaved rounds) and the ratio tagged_ops / best raw lowering:
the median over rounds of that ratio within each round (target: within 5%,
i.e. <= 1.05).

    python benchmarks/compiled_buffers.py [--mb 64] [--calls 10] [--repeat 15] [--device cpu|cuda] [--json out.json]

With ``--device cuda`` on a machine without a GPU it prints ``no GPU: ...`` and measures nothing.
"""

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import torch

import tagged_ops
import tagged_ops._switches

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import provenance  # noqa: E402  (which tagged_ops was measured)
from tests._lowering import lowerings, pattern  # noqa: E402


def measure(mb: int, calls: int, repeat: int, device: str = "cpu") -> dict[str, Any]:
    n = mb * 1024 * 1024 // 4
    results: dict[str, dict[str, float]] = {}
    ratios: dict[str, float | None] = {}  # None: no raw lowering compiles on this release
    failed: dict[str, str] = {}
    found = lowerings("bench_compiled")
    for name in ("a", "b"):
        compiled = {}
        args = None
        for lowering, (inplace, out) in found.items():
            fn, make = pattern(name, inplace, out, n, device)
            # Every lowering works on the same buffers: two 64 MB allocations can
            # differ in speed for the whole run (pages), which is not the lowering.
            args = make() if args is None else args
            torch._dynamo.reset()
            step = torch.compile(fn, fullgraph=True)
            try:
                step(*args)  # compile and warm up
            except Exception as e:  # 2.2: Inductor cannot lower a raw untagged op at all
                if lowering == "tagged_ops":
                    raise
                failed[lowering] = f"does not compile: {type(e).__name__}: {str(e).splitlines()[0]}"
                continue
            compiled[lowering] = (step, args)
        best = {k: float("inf") for k in compiled}
        round_ratios = []
        order = list(compiled.items())
        for r in range(repeat):  # interleaved and rotated: drift and position hit every lowering alike
            took = {}
            for lowering, (step, args) in order[r % len(order) :] + order[: r % len(order)]:
                start = time.perf_counter()
                for _ in range(calls):
                    step(*args)
                if device == "cuda":
                    torch.cuda.synchronize()
                took[lowering] = (time.perf_counter() - start) / calls
                best[lowering] = min(best[lowering], took[lowering])
            if len(took) > 1:
                round_ratios.append(took["tagged_ops"] / min(v for k, v in took.items() if k != "tagged_ops"))
        results[name] = {k: round(v * 1e3, 3) for k, v in best.items()}
        # Paired within a round, then the median: robust to this machine's drift and outliers.
        ratios[name] = round(statistics.median(round_ratios), 3) if round_ratios else None
    return {
        "torch": torch.__version__,
        "commit": provenance.tagged_ops_commit(),
        "path": "native" if tagged_ops.NATIVE_TAGS and not tagged_ops._switches.fallback_forced() else "fallback",
        "device": device if device == "cpu" else torch.cuda.get_device_name(0),
        "buffer_mb": mb,
        "ms_per_call": results,
        "ratio_to_best_raw": ratios,
        "raw_lowerings_not_compiled": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU: CUDA is not available on this machine; nothing measured")
        return
    result = measure(args.mb, args.calls, args.repeat, args.device)
    print(
        f"torch {result['torch']}, tagged_ops path: {result['path']}, {args.mb} MB float32 buffer, {result['device']}"
    )
    labels = {"a": "(a) in-place on a graph input", "b": "(b) out= into a graph-input buffer"}
    for name, timings in result["ms_per_call"].items():
        cells = ", ".join(f"{k} {v:.2f} ms" for k, v in timings.items())
        ratio = result["ratio_to_best_raw"][name]
        shown = f"{ratio:.3f}" if ratio is not None else "none (no raw lowering compiles)"
        print(f"  {labels[name]}: {cells}; ratio tagged_ops / best raw {shown}")
    for lowering, why in result["raw_lowerings_not_compiled"].items():
        print(f"  {lowering}: {why}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
