"""Run bitsandbytes' own tests unported and ported to tagged_ops, and compare them test by test.

    python downstream/bitsandbytes/run.py CHECKOUT RESULT_JSON [--fallback]

Called by ``nox -s downstream-bitsandbytes-<release>[-fallback]`` inside an environment
that has torch, bitsandbytes (the release ``port.patch`` was written against) and
tagged_ops installed. ``CHECKOUT`` is a checkout of bitsandbytes' repository at
``PINNED_COMMIT`` (its tests are not in the wheel). The script runs the tests
against the installed bitsandbytes as released, applies ``port.patch`` (the port
docs/adopting.md describes) to the installed copy, runs them again, restores the
file, and writes both tallies, every test whose outcome changed, and the import cost of
each (time and RSS of ``import bitsandbytes`` plus a quantize and dequantize on CPU,
fresh processes, median) to ``RESULT_JSON``. Each version's tests also run once plainly and once
under ``python -m tagged_ops.audit bitsandbytes`` (``RESULT_JSON``'s stem + ``-audit.json``):
bitsandbytes declares what its ops write, so the audit must report nothing hidden. It exits 1
when the ported run passes fewer tests than the unported one or fails any, when the audit finds
an op that is not honest, or when it changed a test's outcome. Each run compiles into an Inductor cache of its own (the ported ops
share names with the unported ones).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # downstream/_junit.py, shared by both libraries
sys.path.insert(0, str(HERE.parent.parent / "tools"))  # provenance.py, shared with the benchmarks

import _audit  # noqa: E402
import _junit  # noqa: E402
import provenance  # noqa: E402

PATCH = HERE / "port.patch"
BITSANDBYTES = "0.50.2"
# bitsandbytes-foundation/bitsandbytes main after 0.50.1; its bitsandbytes/ equals the 0.50.2 wheel's but for __version__
PINNED_COMMIT = "95f9af309d4d5793847169c39288dcd3fcbdf564"
TESTS = ["tests/test_ops.py", "tests/test_linear4bit.py::test_linear4bit_torch_compile"]

# import bitsandbytes and quantize and dequantize once (CPU: its out= ops have no CPU kernel), as a user would
_IMPORT_COST = r"""
import gc, json, sys, time
import torch
gc.collect()  # the full collection `import torch` leaves due (benchmarks/definition_cost.py says why)
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:"))
r0, t0 = rss(), time.perf_counter()
import bitsandbytes.functional as F
A = torch.randn(64, 64)
q, state = F.quantize_blockwise(A)
F.dequantize_blockwise(q, state)
q4, state4 = F.quantize_4bit(A, blocksize=64, quant_type="nf4")
F.dequantize_4bit(q4, state4)
elapsed = time.perf_counter() - t0
print(json.dumps({"ms": 1e3 * elapsed, "mb": rss() - r0, "dynamo": "torch._dynamo" in sys.modules}))
"""


def _run(checkout: Path, label: str, workers: str, env: dict[str, str]) -> dict[str, str]:
    junit = Path(tempfile.mkdtemp(prefix=f"bnb-{label}-")) / "junit.xml"
    run_env = {**os.environ, **env, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix=f"bnb-inductor-{label}-")}
    command = [sys.executable, "-m", "pytest", *TESTS, "-q", "-p", "no:cacheprovider", "-n", workers]
    print(f"[{label}]", " ".join(command), flush=True)
    subprocess.run([*command, f"--junitxml={junit}"], cwd=checkout, env=run_env, check=False)
    return _junit.outcomes(junit)


def _import_cost(env: dict[str, str], repeat: int) -> dict[str, object]:
    run_env = {k: v for k, v in {**os.environ, **env}.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", _IMPORT_COST], capture_output=True, text=True, env=run_env)
        if done.returncode:
            return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        "ms": round(statistics.median(float(r["ms"]) for r in runs), 1),
        "mb": round(statistics.median(float(r["mb"]) for r in runs), 1),
        "imports_dynamo": any(r["dynamo"] for r in runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--fallback", action="store_true", help="the ported run with TAGGED_OPS_FALLBACK=1")
    parser.add_argument("--workers", default="2")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per import measurement")
    args = parser.parse_args()

    import bitsandbytes
    import torch

    import tagged_ops

    if bitsandbytes.__version__ != BITSANDBYTES:
        sys.exit(f"port.patch is for bitsandbytes {BITSANDBYTES}; {bitsandbytes.__version__} is installed")
    head = subprocess.run(["git", "-C", str(args.checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.stdout.strip() != PINNED_COMMIT:
        sys.exit(f"{args.checkout} is not a checkout of bitsandbytes at {PINNED_COMMIT}")

    unported = _run(args.checkout, "unported", args.workers, {})
    unported_import = _import_cost({}, args.repeat)
    base_env = {k: v for k, v in os.environ.items() if k != "TAGGED_OPS_FALLBACK"}
    audits = {"unported": _audit.run(TESTS, "unported", base_env, "bitsandbytes", cwd=str(args.checkout))}
    ops_py = Path(bitsandbytes.__file__).parent / "_ops.py"
    saved = ops_py.with_suffix(".py.unported")
    shutil.copy2(ops_py, saved)
    try:
        subprocess.run(["patch", "-p1", "-d", str(ops_py.parent.parent), "-i", str(PATCH)], check=True)
        env = {"TAGGED_OPS_FALLBACK": "1"} if args.fallback else {}
        ported = _run(args.checkout, "ported", args.workers, env)
        ported_import = _import_cost(env, args.repeat)
        audits["ported"] = _audit.run(TESTS, "ported", {**base_env, **env}, "bitsandbytes", cwd=str(args.checkout))
    finally:
        shutil.move(saved, ops_py)

    changed = {name: f"{unported.get(name, 'absent')} -> {o}" for name, o in ported.items() if unported.get(name) != o}
    result = {
        "torch": torch.__version__.split("+")[0],
        "commit": provenance.tagged_ops_commit(),  # the tagged_ops measured
        "path": "fallback" if args.fallback or not tagged_ops.NATIVE_TAGS else "native",
        "bitsandbytes": BITSANDBYTES,
        "bitsandbytes_tests_commit": PINNED_COMMIT,
        "tests": TESTS,
        "unported": _junit.tally(unported),
        "ported": _junit.tally(ported),
        "changed": changed,
        "unported_import": unported_import,
        "ported_import": ported_import,
    }
    if "ms" in unported_import and "ms" in ported_import:
        result["ratio_import_ms"] = round(float(ported_import["ms"]) / float(unported_import["ms"]), 3)  # type: ignore[arg-type]
        result["import_mb_added"] = round(float(ported_import["mb"]) - float(unported_import["mb"]), 1)  # type: ignore[arg-type]
    # bitsandbytes declares what its ops write (mutates_args): the audit must find nothing hidden, before
    # the port and after
    audit_file = args.result.with_name(args.result.stem + "-audit.json")
    _audit.write(audit_file, result, audits)
    hidden = [
        f"{label}: {op['op']}: {op['verdict']}"
        for label, audit in audits.items()
        for op in audit["ops"]
        if op["verdict"] not in ("honest", "not observed")
    ]
    result["audit"] = {
        "report": audit_file.name,
        "not_honest": hidden,
        "same_outcomes": _audit.same_outcomes(audits),
        "ratio_seconds": {label: a["ratio_seconds"] for label, a in audits.items()},
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, indent=1, sort_keys=True))
    worse = result["ported"]["passed"] < result["unported"]["passed"] or result["ported"]["failed"] > 0
    return 1 if worse or not unported or hidden or not result["audit"]["same_outcomes"] else 0


if __name__ == "__main__":
    sys.exit(main())
