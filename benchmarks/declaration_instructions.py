"""What declaring torch_scatter's ops costs a process, in instructions: tagged_ops against the classic pattern.

A fresh process's import time varies by a third from one process to the next on a shared
machine, so small changes to what a declaration costs drown in it. Instructions counted by
``valgrind --tool=callgrind`` repeat to a tenth of a percent whatever else the machine runs.

The workload is the torch_scatter port's declarations (``downstream/torch_scatter/port.patch``):
11 ``declare_inplace`` / ``declare_out`` and 4 ``adopt_classic`` of ops defined with
``Library.define``. It runs once through tagged_ops (``src/``) and once through
``downstream/torch_scatter/classic/``, the same calls written in the classic pattern, each
in a fresh process that imports torch first. Callgrind counts two stages only:

* ``first``: the import and the 15 declarations, as the port's import pays them;
* ``again``: the same 15 declarations in a second namespace, once everything is loaded.

``first - again`` is what only the first declarations pay (loading modules, first-use work).
Each count is one process: the counts repeat, so there is nothing to take a median of.

    python benchmarks/declaration_instructions.py [--json out.json]

Needs valgrind; bytecode is compiled first, as an install does. About 1.5 minutes a method.
"""

from __future__ import annotations

import argparse
import compileall
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import provenance  # noqa: E402

METHODS = {"tagged_ops": ROOT / "src", "classic": ROOT / "downstream" / "torch_scatter" / "classic"}

_CHILD = r"""
import functools
import torch

def declare(namespace, _):
    import tagged_ops  # tagged_ops, or the classic pattern's functions under the same names
    lib = torch.library.Library(namespace, "DEF")
    inplace = "(Tensor(a!) out, Tensor src, Tensor index, int dim) -> Tensor(a!)"
    for r in ("sum", "mul", "mean"):
        tagged_ops.declare_inplace(f"{namespace}::scatter_{r}_", inplace)
    for r in ("min", "max"):
        lib.define(f"scatter_{r}_(Tensor(a!) out, Tensor src, Tensor index, int dim) -> Tensor")
        tagged_ops.adopt_classic(f"{namespace}::scatter_{r}_")
    one_out = "(Tensor src, Tensor indptr, *, Tensor(a!) out) -> Tensor(a!)"
    two_outs = "(Tensor src, Tensor indptr, *, Tensor(a!) out, Tensor(b!) arg_out) -> (Tensor(a!), Tensor(b!))"
    for r in ("sum", "mean"):
        tagged_ops.declare_out(f"{namespace}::segment_{r}_csr.out", one_out)
    for r in ("min", "max"):
        tagged_ops.declare_out(f"{namespace}::segment_{r}_csr.out", two_outs)
    tagged_ops.declare_out(f"{namespace}::gather_csr.out", one_out)
    for r in ("sum", "mean"):
        tagged_ops.declare_inplace(f"{namespace}::segment_{r}_coo_", "(Tensor(a!) out, Tensor src, Tensor index) -> Tensor(a!)")
    for r in ("min", "max"):
        lib.define(f"segment_{r}_coo_(Tensor(a!) out, Tensor src, Tensor index) -> Tensor")
        tagged_ops.adopt_classic(f"{namespace}::segment_{r}_coo_")
    tagged_ops.declare_out(f"{namespace}::gather_coo.out", "(Tensor src, Tensor index, *, Tensor(a!) out) -> Tensor(a!)")
    _libraries.append(lib)  # the classic ops stay defined
    return None

_libraries = []
# callgrind counts inside functools.reduce only: one stage per call
functools.reduce(declare, [None], "bench_first")
functools.reduce(declare, [None], "bench_again")
"""

STAGES = ("first", "again")


def _count(method: str, python: str) -> dict[str, int]:
    folder = METHODS[method]
    out = Path(tempfile.mkdtemp(prefix="tagged_ops_instructions_"))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TAGGED_OPS_FALLBACK")}
        env.update(PYTHONPATH=str(folder), PYTHONHASHSEED="0")
        if os.environ.get("TAGGED_OPS_FALLBACK") and method == "tagged_ops":
            env["TAGGED_OPS_FALLBACK"] = os.environ["TAGGED_OPS_FALLBACK"]
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            "--dump-after=functools_reduce",
            f"--callgrind-out-file={out / 'cg.out'}",
            python,
            "-c",
            _CHILD,
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{method}: the process failed under valgrind:\n{done.stderr[-3000:]}")
        dumps = sorted(glob.glob(str(out / "cg.out.*")), key=lambda f: int(f.rsplit(".", 1)[1]))
        counts = []
        for dump in dumps:
            found = re.search(r"^(?:summary|totals): (\d+)", Path(dump).read_text(), re.M)
            if found and int(found.group(1)) > 0:
                counts.append(int(found.group(1)))
        if len(counts) != len(STAGES):
            raise SystemExit(f"{method}: expected {len(STAGES)} counted stages, callgrind wrote {counts}")
        return dict(zip(STAGES, counts, strict=True))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _versions(python: str) -> dict[str, str]:
    code = "import json, platform, torch; print(json.dumps({'torch': torch.__version__, 'python': platform.python_version()}))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    versions: dict[str, str] = json.loads(done.stdout)
    return versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("declaration_instructions: valgrind is not installed (Debian: apt-get install valgrind)")
        return 1
    for folder in METHODS.values():
        compileall.compile_dir(str(folder), quiet=1)  # an install's bytecode: unmarshalled, not compiled
    python = sys.executable
    counts = {method: _count(method, python) for method in METHODS}
    millions = {m: {s: c[s] / 1e6 for s in STAGES} for m, c in counts.items()}
    for m in millions.values():
        m["one-time"] = m["first"] - m["again"]
    tagged, classic = millions["tagged_ops"], millions["classic"]
    result: dict[str, Any] = {
        **_versions(python),
        "commit": provenance.tagged_ops_commit(),
        "fallback_forced": bool(os.environ.get("TAGGED_OPS_FALLBACK")),
        "instructions_millions": {m: {k: round(v, 2) for k, v in c.items()} for m, c in millions.items()},
        "ratio_first": round(tagged["first"] / classic["first"], 3),
    }
    print(f"torch {result['torch']}, Python {result['python']}: millions of instructions (callgrind)")
    print(f"{'':34s}{'tagged_ops':>12s}{'classic':>10s}{'ratio':>8s}")
    rows = (
        ("import + 15 declarations", "first"),
        ("  of which the first time only", "one-time"),
        ("15 declarations again", "again"),
    )
    for label, stage in rows:
        print(f"{label:34s}{tagged[stage]:12.2f}{classic[stage]:10.2f}{tagged[stage] / classic[stage]:8.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
