"""What defining ops costs a process, side by side: tagged_ops, ``custom_op`` and ``Library.define``.

Each measurement runs in a fresh interpreter that imports torch first, collects
the garbage that import left (a full collection is otherwise due a few thousand
allocations later, and lands on whichever method gets there first), then defines
N ops of one method and reports the time and RSS that added (for tagged_ops its own
import included; the garbage collections in that time are reported too), and which
of torch's compiler modules got loaded:

* ``tagged_ops``: ``define_out`` / ``define_inplace`` (half each);
* ``custom_op``: ``torch.library.custom_op`` of the same functions (tagged where torch
  has the tags, else the classic untagged shape: out buffers positional, returning None);
* ``Library.define``: ``Library.define`` + ``impl`` + ``register_fake`` of the classic schemas;
* ``import tagged_ops`` (with the smallest N only): tagged_ops' own import, of what a
  definition uses, and no op: the part of tagged_ops' time that only the first definition pays.

The ops live in a module of their own, imported as a library's are (bytecode
compiled beforehand, as an install does), and every op has parameters named after
its index, so no generated code is shared between them. Then the first compile
(``torch.compile(fullgraph=True)``, first call) of one small graph of an in-place
and an out= call, with tagged_ops ops and with raw ``custom_op`` ops, each in a
fresh process (the compiler's own import included in both).

The methods take turns, round after round. Prints medians over ``--repeat``
processes and the ratios tagged_ops / custom_op and tagged_ops / Library.define, and,
counted in one more process per method, what a definition registers: ``Library``
objects, kernels registered through them, schema strings parsed in Python;
``--json FILE`` writes them for compat_matrix.md.

    python benchmarks/definition_cost.py [--sizes 1 30 300] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import provenance  # noqa: E402

IMPORT = "import tagged_ops"  # a pseudo-method: tagged_ops' own import, no op defined
COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch.export", "torch.onnx", "torch._functorch.aot_autograd")

_CHILD = r"""
import gc, json, os, sys, tempfile, time
import torch

# `import torch` leaves a full collection pending (on Python 3.12 about 4,800 allocations
# away, ~50 ms): without this, it lands on whichever method allocates past that first.
gc.collect()
collected = {"ms": 0.0, "start": 0.0}
def on_gc(phase, info):
    if phase == "start":
        collected["start"] = time.perf_counter()
    else:
        collected["ms"] += 1e3 * (time.perf_counter() - collected["start"])
gc.callbacks.append(on_gc)

def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")

module, folder = sys.argv[1], sys.argv[2]
sys.path.insert(0, folder)
before = set(sys.modules)
rss0 = rss_mb()
t0 = time.perf_counter()
__import__(module)  # a module that defines n ops, as a library's does
elapsed = time.perf_counter() - t0
loaded = [m for m in COMPILER_MODULES if m in sys.modules and m not in before]
added = len(set(sys.modules) - before)
print(json.dumps({"ms": 1e3 * elapsed, "gc_ms": collected["ms"], "mb": rss_mb() - rss0, "modules": added, "compiler_modules": loaded}))
"""


_COUNT_CHILD = r"""
import json, sys
import torch

# What N definitions register, counted (a process of its own: the wrappers cost time):
# Library objects made, kernels registered through them, schema strings parsed in Python.
counts = {"libraries": 0, "kernels": 0, "schema_parses": 0}
Library = torch.library.Library
init, impl, parse = Library.__init__, Library.impl, torch._C.parse_schema

def counting_init(self, *args, **kwargs):
    counts["libraries"] += 1
    return init(self, *args, **kwargs)

def counting_impl(self, *args, **kwargs):
    counts["kernels"] += 1
    return impl(self, *args, **kwargs)

def counting_parse(*args, **kwargs):
    counts["schema_parses"] += 1
    return parse(*args, **kwargs)

Library.__init__, Library.impl, torch._C.parse_schema = counting_init, counting_impl, counting_parse
module, folder, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, folder)
__import__(module)
print(json.dumps({k: round(v / n, 2) for k, v in counts.items()}))
"""


def _module(method: str, n: int) -> str:
    """The name of the library module that defines ``n`` ops by ``method``."""
    return f"bench_{method.replace('.', '_').replace(' ', '_')}_{n}"


def _library_source(method: str, n: int, tagged: bool) -> str:
    # The ops of a library module: half in-place, half out=, each with parameter names of its own.
    lines = ["import torch", "from torch import Tensor"]
    if method == IMPORT:
        return "import tagged_ops\ntagged_ops.define_out  # loads what a definition uses (attributes load lazily)\n"
    if method == "tagged_ops":
        lines.append("import tagged_ops")
    if method == "Library.define":
        lines.append("fake = getattr(torch.library, 'register_fake', None) or torch.library.impl_abstract")
    for i in range(n):
        inplace = bool(i % 2)
        if method == "tagged_ops" and inplace:
            lines += [
                f"@tagged_ops.define_inplace('bench{i}::op_')",
                f"def op{i}(x{i}: Tensor, alpha{i}: float = 2.0) -> Tensor:",
                f"    return x{i}.mul_(alpha{i})",
            ]
        elif method == "tagged_ops":
            lines += [
                f"@tagged_ops.define_out('bench{i}::op_out')",
                f"def op{i}(x{i}: Tensor, alpha{i}: float = 2.0, *, out{i}: Tensor) -> Tensor:",
                f"    return torch.mul(x{i}, alpha{i}, out=out{i})",
            ]
        elif method == "custom_op" and tagged:
            tag, mutates = ("inplace", f"x{i}") if inplace else ("out", f"out{i}")
            lines.append(
                f"@torch.library.custom_op('bench{i}::op_{tag}', mutates_args=('{mutates}',), tags=torch.Tag.{tag})"
            )
            if inplace:
                lines += [
                    f"def op{i}(x{i}: Tensor, alpha{i}: float = 2.0) -> Tensor:",
                    f"    return x{i}.mul_(alpha{i})",
                ]
            else:
                lines += [
                    f"def op{i}(x{i}: Tensor, alpha{i}: float = 2.0, *, out{i}: Tensor) -> Tensor:",
                    f"    return torch.mul(x{i}, alpha{i}, out=out{i})",
                ]
        elif method == "custom_op":  # the classic untagged shape: out buffers positional, returning None
            mutates = f"x{i}" if inplace else f"out{i}"
            lines.append(f"@torch.library.custom_op('bench{i}::op', mutates_args=('{mutates}',))")
            if inplace:
                lines += [f"def op{i}(x{i}: Tensor, alpha{i}: float = 2.0) -> None:", f"    x{i}.mul_(alpha{i})"]
            else:
                lines += [
                    f"def op{i}(x{i}: Tensor, out{i}: Tensor, alpha{i}: float = 2.0) -> None:",
                    f"    torch.mul(x{i}, alpha{i}, out=out{i})",
                ]
        else:
            lines.append(f"lib{i} = torch.library.Library('bench{i}', 'DEF')")
            if inplace:
                lines += [
                    f"lib{i}.define('op_(Tensor(a!) x{i}, float alpha{i}=2.0) -> ()')",
                    f"def op{i}(x{i}, alpha{i}=2.0):",
                    f"    x{i}.mul_(alpha{i})",
                    f"lib{i}.impl('op_', op{i}, 'CompositeExplicitAutograd')",
                    f"fake('bench{i}::op_', lambda x{i}, alpha{i}=2.0: None, lib=lib{i})",
                ]
            else:
                lines += [
                    f"lib{i}.define('op_out(Tensor x{i}, Tensor(a!) out{i}, float alpha{i}=2.0) -> ()')",
                    f"def op{i}(x{i}, out{i}, alpha{i}=2.0):",
                    f"    torch.mul(x{i}, alpha{i}, out=out{i})",
                    f"lib{i}.impl('op_out', op{i}, 'CompositeExplicitAutograd')",
                    f"fake('bench{i}::op_out', lambda x{i}, out{i}, alpha{i}=2.0: None, lib=lib{i})",
                ]
    return "\n".join(lines) + "\n"


_COMPILE_CHILD = r"""
import json, sys, time
import torch

method = sys.argv[1]
x, o = torch.randn(64), torch.empty(64)
tagged = hasattr(torch.Tag, "inplace") and hasattr(torch.Tag, "out")
if method == "tagged_ops":
    import tagged_ops

    @tagged_ops.define_inplace("cbench::scale_")
    def scale_(x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)

    @tagged_ops.define_out("cbench::sin_out")
    def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.sin(x, out=out)

    def f(x, o):
        scale_(x)
        sin_out(x, out=o)
        return o * 2
elif tagged:
    @torch.library.custom_op("cbench::scale_", mutates_args=("x",), tags=torch.Tag.inplace)
    def scale_(x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)

    @torch.library.custom_op("cbench::sin_out", mutates_args=("out",), tags=torch.Tag.out)
    def sin_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.sin(x, out=out)

    def f(x, o):
        scale_(x)
        sin_out(x, out=o)
        return o * 2
else:
    @torch.library.custom_op("cbench::scale_", mutates_args=("x",))
    def scale_(x: torch.Tensor) -> None:
        x.mul_(2)

    @torch.library.custom_op("cbench::sin_out", mutates_args=("out",))
    def sin_out(x: torch.Tensor, out: torch.Tensor) -> None:
        torch.sin(x, out=out)

    def f(x, o):
        scale_(x)
        sin_out(x, o)
        return o * 2
t0 = time.perf_counter()
torch.compile(f, fullgraph=True)(x, o)
print(json.dumps({"ms": 1e3 * (time.perf_counter() - t0)}))
"""


def _env(pycache: str) -> dict[str, str]:
    env = dict(os.environ)
    # As installed packages run: bytecode compiled once (here into a scratch folder), not on every import.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    env.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # every first compile compiles
    return env


def _run(env: dict[str, str], code: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{args}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(sizes: list[int], repeat: int, compile_repeat: int) -> dict[str, Any]:
    import torch

    tagged = hasattr(torch.Tag, "inplace") and hasattr(torch.Tag, "out")
    methods: tuple[str, ...] = ("tagged_ops", "custom_op", "Library.define")
    if not hasattr(torch.library, "custom_op"):
        methods = ("tagged_ops", "Library.define")  # 2.2/2.3 have no custom_op
    child = f"COMPILER_MODULES = {COMPILER_MODULES!r}\n" + _CHILD
    result: dict[str, Any] = {
        "torch": torch.__version__,
        "commit": provenance.tagged_ops_commit(),
        "python": ".".join(map(str, sys.version_info[:2])),
        "repeat": repeat,
        "definitions": {},
        "compile": {},
    }
    with tempfile.TemporaryDirectory() as folder:
        env = _env(os.path.join(folder, "pycache"))
        for n in sizes:
            row: dict[str, Any] = {}
            # with the smallest N, what only the first definition pays: importing what a definition uses
            measured = methods + (IMPORT,) * (n == min(sizes))
            for method in measured:
                with open(os.path.join(folder, f"{_module(method, n)}.py"), "w") as f:
                    f.write(_library_source(method, n, tagged))
                _run(env, child, _module(method, n), folder)  # compiles the bytecode, as an install does
            # the methods take turns, round after round, so a change in the machine's load hits each alike
            by_method: dict[str, list[dict[str, Any]]] = {method: [] for method in measured}
            for _ in range(repeat):
                for method in measured:
                    by_method[method].append(_run(env, child, _module(method, n), folder))
            for method, runs in by_method.items():
                row[method] = {
                    "ms": round(statistics.median(r["ms"] for r in runs), 2),
                    "gc_ms": round(statistics.median(r["gc_ms"] for r in runs), 2),
                    "mb": round(statistics.median(r["mb"] for r in runs), 2),
                    "modules": statistics.median_low(r["modules"] for r in runs),  # the library's module included
                    "compiler_modules": sorted({m for r in runs for m in r["compiler_modules"]}),
                }
            for method in methods:  # per definition: Library objects, kernels registered, schemas parsed
                row[method]["per_definition"] = _run(env, _COUNT_CHILD, _module(method, n), folder, str(n))
            for method in methods[1:]:
                row[f"ratio_ms_{method}"] = round(row["tagged_ops"]["ms"] / row[method]["ms"], 2)
            result["definitions"][str(n)] = row
        if hasattr(torch.library, "custom_op") and compile_repeat > 0:
            first: dict[str, list[float]] = {"tagged_ops": [], "custom_op": []}
            for method in first:
                _run(env, _COMPILE_CHILD, method)
            for _ in range(compile_repeat):  # in turns, as above
                for method, times in first.items():
                    times.append(_run(env, _COMPILE_CHILD, method)["ms"])
            result["compile"] = {m: round(statistics.median(v), 1) for m, v in first.items()}
            result["compile"]["ratio"] = round(result["compile"]["tagged_ops"] / result["compile"]["custom_op"], 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 30, 300])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per measurement (median)")
    parser.add_argument("--compile-repeat", type=int, default=3, help="0 skips the first-compile measurement")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    result = measure(args.sizes, args.repeat, args.compile_repeat)
    print(
        f"torch {result['torch']}, tagged_ops {result['commit'] or '(no git)'}: defining N ops over `import torch` "
        f"(median of {args.repeat} fresh processes)"
    )
    for n, row in result["definitions"].items():
        for method, value in row.items():
            if isinstance(value, dict):
                loaded = ", ".join(value["compiler_modules"]) or "none"
                print(
                    f"  N={n:>4} {method:17s} {value['ms']:9.1f} ms (garbage collection {value['gc_ms']:5.1f}) "
                    f"{value['mb']:7.1f} MB {value['modules']:4d} modules, of torch's compiler: {loaded}"
                )
                if "per_definition" in value:
                    c = value["per_definition"]
                    print(
                        f"  {'':6} {'':17s} per definition: {c['libraries']} Library objects, "
                        f"{c['kernels']} kernels registered, {c['schema_parses']} schemas parsed in Python"
                    )
        ratios = ", ".join(f"/ {k.removeprefix('ratio_ms_')} {v:.2f}" for k, v in row.items() if k.startswith("ratio"))
        print(f"  N={n:>4} time ratio tagged_ops {ratios}")
    if result["compile"]:
        c = result["compile"]
        print(
            f"first compile of a small graph: tagged_ops {c['tagged_ops']:.0f} ms, custom_op {c['custom_op']:.0f} ms, "
            f"ratio {c['ratio']:.3f}"
        )
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
