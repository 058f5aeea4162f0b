"""Build torch_scatter unported and ported to tagged_ops, run its own tests on both, and compare.

    python downstream/torch_scatter/run.py SOURCE RESULT_JSON [--fallback] [--tests DIR]
        [--wheels UNPORTED.whl PORTED.whl]

Called by ``nox -s downstream-torch_scatter-<release>[-fallback]`` inside an environment that
has torch and tagged_ops installed. ``SOURCE`` is torch_scatter 2.1.2: its PyPI sdist
(``.tar.gz``) or a checkout of its repository at the 2.1.2 tag, whose ``test/`` folder holds
the tests (the sdist has none: pass ``--tests`` a checkout's ``test/`` then). The script
builds a wheel from the source as released and from the source with ``port.patch`` applied
(``patch -p1`` in its top folder), or takes the two wheels ``--wheels`` names (built
that way before, for this torch: the builds take most of a session's time). It installs each
into a folder of its own and, alternating between the two round after round, measures their
import (time and RSS of ``import torch_scatter`` plus one call of each public function, fresh
processes, median; the ported build a third time with ``classic/tagged_ops.py`` in tagged_ops'
place, declaring the same ops by hand: what a port pays to declare its ops in Python at all;
and a fourth time with every tagged_ops module that import loads imported before the clock: what
the declarations and calls cost through tagged_ops once its code is loaded)
and times eager calls through the public functions (best of ``--repeat``
processes each: on a loaded machine, the best of three moved a ratio by 2x between runs);
then it runs the tests on each; the ported build also runs ``test_compiled.py`` (every
public function compiled with ``fullgraph=True`` against eager, ``opcheck`` of every
declared op). Last, each build's suite runs once more plainly and once under
``python -m tagged_ops.audit torch_scatter`` (one process each): the audit of the unported
build must name every op the port changed, with the port's choice of tag, and find every
ported op honest (``RESULT_JSON``'s stem + ``-audit.json`` holds both reports). It writes both
tallies, every test whose outcome changed, the measurements and the ratios to ``RESULT_JSON``,
and exits 1 when a test passes unported and fails ported, a compiled case fails, the audit
disagrees with the port, or the audit changed a test's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # downstream/_junit.py, shared by both libraries
sys.path.insert(0, str(HERE.parent.parent / "tools"))  # provenance.py, shared with the benchmarks

import _audit  # noqa: E402
import _junit  # noqa: E402
import provenance  # noqa: E402

PATCH = HERE / "port.patch"
COMPILED_TESTS = HERE / "test_compiled.py"
CLASSIC = HERE / "classic"  # its tagged_ops.py: the classic pattern, for the import measurement
TORCH_SCATTER = "2.1.2"

# import torch_scatter and call each public function once, on small CPU tensors
_IMPORT_COST = r"""
import gc, importlib, json, os, sys, time
import torch
for name in json.loads(os.environ.get("RUN_PY_PRELOAD", "[]")):  # the "ported_preloaded" measurement
    importlib.import_module(name)
gc.collect()  # the full collection `import torch` leaves due (benchmarks/definition_cost.py says why)
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:"))
r0, t0 = rss(), time.perf_counter()
import torch_scatter as ts
src, index, indptr = torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 1, 3]), torch.tensor([0, 2, 5, 6])
for reduce in ("sum", "mul", "mean", "min", "max"):
    ts.scatter(src, index, 0, reduce=reduce)
    ts.segment_csr(src, indptr, reduce=reduce) if reduce != "mul" else None
    ts.segment_coo(src, index, reduce=reduce) if reduce != "mul" else None
ts.gather_csr(torch.randn(3, 4), indptr)
ts.gather_coo(torch.randn(4, 4), index)
ts.scatter_softmax(src, index, 0); ts.scatter_log_softmax(src, index, 0)
ts.scatter_logsumexp(src, index, 0); ts.scatter_std(src, index, 0)
elapsed = time.perf_counter() - t0
loaded = sorted(m for m in sys.modules if m.partition(".")[0] == "tagged_ops")
print(json.dumps({"ms": 1e3 * elapsed, "mb": rss() - r0, "dynamo": "torch._dynamo" in sys.modules, "modules": loaded}))
"""

# eager calls through the public functions, with and without out=
_CALL_COST = r"""
import json, time
import torch
import torch_scatter as ts
src, index, indptr = torch.randn(64, 8), torch.arange(64) // 4, torch.arange(0, 65, 4)
out = torch.zeros(16, 8)
calls = {
    "scatter_max": lambda: ts.scatter_max(src, index, 0, dim_size=16),
    "scatter_mul out=": lambda: ts.scatter_mul(src, index, 0, out=out),
    "segment_csr": lambda: ts.segment_csr(src, indptr),
    "segment_csr out=": lambda: ts.segment_csr(src, indptr, out=out),
    "segment_coo out=": lambda: ts.segment_coo(src, index, out=out),
    "gather_csr": lambda: ts.gather_csr(out, indptr),
}
best = {}
for name, call in calls.items():
    for _ in range(200):
        call()
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        for _ in range(2000):
            call()
        times.append((time.perf_counter() - t0) / 2000 * 1e6)
    best[name] = min(times)
print(json.dumps(best))
"""


def _source_tree(source: Path, into: Path) -> Path:
    """A copy of the source to build from: the sdist unpacked, or the checkout copied."""
    if source.is_dir():
        target = into / "torch_scatter"
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".git", "build", "*.so"))
        return target
    with tarfile.open(source) as archive:
        archive.extractall(into)  # noqa: S202 - the PyPI sdist this script was written against
    return into / f"torch_scatter-{TORCH_SCATTER}"


def _build(tree: Path, label: str) -> Path:
    wheels = tree.parent / "wheels"
    env = {**os.environ, "FORCE_ONLY_CPU": "1", "MAX_JOBS": str(os.cpu_count() or 2)}
    print(f"[{label}] building {tree}", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(wheels), str(tree)],
        check=True,
        env=env,
    )
    return next(wheels.glob("torch_scatter-*.whl"))


def _install(wheel: Path, label: str, into: Path) -> dict[str, str]:
    """Install ``wheel`` into a folder of its own; returns what a process needs to import it from there.

    Both builds stay installed side by side, so that their costs are measured alternately,
    round after round, rather than minutes apart on a machine whose load changes."""
    print(f"[{label}] installing {wheel} into {into}", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(into), str(wheel)], check=True
    )
    return {"PYTHONPATH": _path(into, os.environ.get("PYTHONPATH"))}


def _path(first: Path, rest: str | None) -> str:
    return os.pathsep.join(filter(None, [str(first), rest]))


def _measure(code: str, env: dict[str, str]) -> Any:
    """Run ``code`` in a fresh process; returns the JSON it printed last."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_tests(tests: list[str], label: str, env: dict[str, str], workers: str) -> dict[str, str]:
    junit = Path(tempfile.mkdtemp(prefix=f"ts-{label}-")) / "junit.xml"
    command = [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "-n", workers]
    print(f"[{label}]", " ".join(command), flush=True)
    run_env = {**env, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix=f"ts-inductor-{label}-")}
    subprocess.run([*command, f"--junitxml={junit}"], env=run_env, check=False, cwd=tempfile.gettempdir())
    return _junit.outcomes(junit)


#: where the port puts each kind of op the audit suggests, from the unported op's name
_PORTED_NAME = {"inplace": "{}_.default", "mutates_args": "{}_.default", "out": "{}.out"}


def _disagreements(unported: list[dict[str, Any]], ported: list[dict[str, Any]]) -> list[str]:
    """Where the audit of unported torch_scatter and the port differ, op by op (empty: they agree).

    Each op the audit says to port must exist in the port under its kind's name, and the
    audit of the ported build must find it doing what the unported op did (the same
    suggestion) and declaring it (honest); every ported op must be honest."""
    found = {op["op"]: op for op in ported}
    problems = []
    for op in unported:
        suggestion = op["suggestion"]
        if suggestion in (None, "functional"):
            continue
        name = _PORTED_NAME[suggestion].format(op["op"].removesuffix(".default"))
        twin = found.get(name)
        if twin is None:
            problems.append(f"{op['op']}: the audit says {suggestion}; the port's suite never calls {name}")
        elif twin["suggestion"] != suggestion:
            problems.append(f"{op['op']}: the audit says {suggestion}; the port's {name} does {twin['suggestion']}")
    problems += [f"{op['op']}: {op['verdict']} after the port" for op in ported if op["verdict"] != "honest"]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--fallback", action="store_true", help="the ported runs with TAGGED_OPS_FALLBACK=1")
    parser.add_argument("--tests", type=Path, help="torch_scatter's test/ folder (default: SOURCE/test)")
    parser.add_argument("--wheels", nargs=2, type=Path, metavar=("UNPORTED", "PORTED"), help="prebuilt wheels")
    parser.add_argument("--workers", default="2")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per build, for import and call cost")
    args = parser.parse_args()
    tests_dir = args.tests or args.source / "test"
    if not tests_dir.is_dir():
        sys.exit(f"no tests at {tests_dir}: pass --tests a checkout's test/ folder (the sdist has none)")
    tests = [str(tests_dir)]

    import torch

    import tagged_ops

    env = {k: v for k, v in os.environ.items() if k != "TAGGED_OPS_FALLBACK"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measured as installed: bytecode compiled once
    ported_env = {**env, "TAGGED_OPS_FALLBACK": "1"} if args.fallback else env
    work = Path(tempfile.mkdtemp(prefix="torch_scatter-"))
    result: dict[str, object] = {
        "torch": torch.__version__.split("+")[0],
        "commit": provenance.tagged_ops_commit(),  # the tagged_ops measured
        "path": "fallback" if args.fallback or not tagged_ops.NATIVE_TAGS else "native",
        "torch_scatter": TORCH_SCATTER,
        "wheels": "prebuilt (--wheels)" if args.wheels else "built here from SOURCE",
        "cost_measured": "alternating",  # both builds side by side, alternating fresh processes
        "patch_lines": sum(
            1 for line in PATCH.read_text().splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
        ),
    }
    envs: dict[str, dict[str, str]] = {}
    for label, label_env in (("unported", env), ("ported", ported_env)):
        if args.wheels:
            wheel = args.wheels[label == "ported"]
        else:
            tree = _source_tree(args.source, work / label)
            if label == "ported":
                subprocess.run(["patch", "-p1", "-d", str(tree), "-i", str(PATCH)], check=True)
            wheel = _build(tree, label)
        envs[label] = {**label_env, **_install(wheel, label, work / f"{label}-site")}
    # The ported build once more with the classic pattern in tagged_ops' place (classic/tagged_ops.py):
    # the import cost of declaring the same ops in Python by hand, for the import measurement only.
    import_envs = {**envs, "classic": {**envs["ported"], "PYTHONPATH": _path(CLASSIC, envs["ported"]["PYTHONPATH"])}}
    # And with tagged_ops' modules (those the ported import loads) imported before the clock: the
    # part of the ported import that is loading tagged_ops' code, by difference.
    modules = _measure(_IMPORT_COST, envs["ported"])["modules"]
    import_envs["ported_preloaded"] = {**envs["ported"], "RUN_PY_PRELOAD": json.dumps(modules)}
    result["tagged_ops_modules_loaded"] = len(modules)
    # the builds alternate, round after round: import cost (median) and call cost (best)
    imports: dict[str, list[dict[str, object]]] = {label: [] for label in import_envs}
    calls: dict[str, list[dict[str, float]]] = {"unported": [], "ported": []}
    for _ in range(args.repeat):
        for label in import_envs:
            imports[label].append(_measure(_IMPORT_COST, import_envs[label]))
    for _ in range(args.repeat):
        for label in envs:
            calls[label].append(_measure(_CALL_COST, envs[label]))
    outcomes = {}
    per_call: dict[str, dict[str, float]] = {}
    for label, runs in imports.items():
        result[f"{label}_import"] = {
            "ms": round(statistics.median(float(r["ms"]) for r in runs), 1),  # type: ignore[arg-type]
            "mb": round(statistics.median(float(r["mb"]) for r in runs), 1),  # type: ignore[arg-type]
            "imports_dynamo": any(r["dynamo"] for r in runs),
        }
    for label, run_env in envs.items():
        per_call[label] = {k: round(min(r[k] for r in calls[label]), 2) for k in calls[label][0]}
        result[f"{label}_us_per_call"] = per_call[label]
        outcomes[label] = _run_tests(tests, label, run_env, args.workers)
        if label == "ported":
            outcomes["compiled"] = _run_tests([str(COMPILED_TESTS)], "compiled", run_env, args.workers)
    # the audit of each build, as an adopter runs it: its report must agree with the port op by op
    audits = {label: _audit.run(tests, label, run_env, "torch_scatter") for label, run_env in envs.items()}
    disagreements = _disagreements(audits["unported"]["ops"], audits["ported"]["ops"])
    audit_file = args.result.with_name(args.result.stem + "-audit.json")
    audit_file.parent.mkdir(parents=True, exist_ok=True)
    _audit.write(audit_file, result, audits)
    result["audit"] = {
        "report": audit_file.name,
        "disagreements": disagreements,
        "same_outcomes": _audit.same_outcomes(audits),
        "ratio_seconds": {label: a["ratio_seconds"] for label, a in audits.items()},
    }
    unported, ported = outcomes["unported"], outcomes["ported"]
    result["unported"] = _junit.tally(unported)
    result["ported"] = _junit.tally(ported)
    result["compiled"] = _junit.tally(outcomes["compiled"])
    result["changed"] = {n: f"{unported.get(n, 'absent')} -> {o}" for n, o in ported.items() if unported.get(n) != o}
    result["compiled_failures"] = sorted(n for n, o in outcomes["compiled"].items() if o == "failed")
    before, after = per_call["unported"], per_call["ported"]
    result["ratio_per_call"] = {k: round(after[k] / before[k], 3) for k in after}
    imp_before, imp_after = result["unported_import"], result["ported_import"]
    result["ratio_import_ms"] = round(imp_after["ms"] / imp_before["ms"], 3)  # type: ignore[index]
    result["import_mb_added"] = round(imp_after["mb"] - imp_before["mb"], 1)  # type: ignore[index]
    # what tagged_ops costs over declaring the same ops by hand (the unported build declares none in Python)
    result["ratio_import_ms_classic"] = round(imp_after["ms"] / result["classic_import"]["ms"], 3)  # type: ignore[index]
    # the same, had tagged_ops' modules cost nothing to load
    preloaded = result["ported_preloaded_import"]["ms"]  # type: ignore[index]
    result["ratio_import_ms_classic_preloaded"] = round(preloaded / result["classic_import"]["ms"], 3)  # type: ignore[index]
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, indent=1, sort_keys=True))
    # torch_scatter 2.1.2 fails one of its own tests unported (test_logsumexp_out): no test may do worse
    worse = any(change.endswith("-> failed") for change in result["changed"].values())  # type: ignore[attr-defined]
    audit_wrong = disagreements or not result["audit"]["same_outcomes"]  # type: ignore[index]
    return 1 if worse or not unported or result["compiled"]["failed"] or audit_wrong else 0  # type: ignore[index]


if __name__ == "__main__":
    sys.exit(main())
