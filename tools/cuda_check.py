"""The CUDA check: everything only a GPU can show, in one command, with results compat_matrix.md reads.

    tools/cuda_check.sh [--dry-run] [--results DIR] [--jobs N]
    python tools/cuda_check.py ...          # the same, with this interpreter

For a machine with a CUDA build of torch and no network: it uses the interpreter that
runs it (``$PYTHON`` for the shell script, else ``python3``), puts ``src/`` on the path
(nothing is installed), and needs only torch, pytest, pytest-xdist, hypothesis, numpy
and packaging (ninja and nvcc for the C++ stage). Stages, each with its own time limit:

1. self-check: ``python -m tagged_ops`` (eager, opcheck, compile, export; CUDA included).
2. suite, native path (where the release has native tags) and 3. suite, forced fallback:
   the suite's CUDA tests (``-k cuda``: opcheck of the sin ops, per-device kernels and
   dispatch, Triton's generated code, CUDA graphs) with ``--tagged-ops-require-cuda``,
   the machine's cores split between them; results for compat_matrix.md's CUDA column.
4. C++ kernels: examples/cpp_kernel built with nvcc and run, eager and compiled (beside 2, 3).
5. compiled buffers: ``benchmarks/compiled_buffers.py --device cuda``.
6. eager cost: ``benchmarks/eager_overhead.py --device cuda``.

Results go to ``results/cuda/`` (``<release>.json`` and ``<release>-fallback.json`` from
the suite, ``check-<release>.json`` with every stage, the GPU, driver and torch build,
and ``bench/``); ``python tools/compat_matrix.py`` then fills the CUDA column and the
runs table. The last line printed sums it up.

``--dry-run`` runs the same stages on a machine without a GPU: CUDA tests skip instead
of failing, the benchmarks say "no GPU", and results go to a temporary folder (or
``--results``), so CI proves the plumbing between GPU machines. Exit status: 0 when
every stage passed (dry run: ran without error), else 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Seconds each stage may take. Stages 2-4 run side by side (the suites split the cores; nvcc
#: builds beside them), so the whole check takes at most 60 + 150 + 45 + 45 s: 5 minutes,
#: inside the 8 a lent GPU machine leaves once it has started.
LIMITS = {
    "self-check": 60,
    "suite, native": 150,
    "suite, fallback": 150,
    "C++ kernels": 150,
    "compiled buffers": 45,
    "eager cost": 45,
}


@dataclass
class Stage:
    name: str
    status: str = "not started"  # passed | failed | timed out | no GPU | not applicable
    seconds: float = 0.0
    detail: str = ""
    counts: dict[str, int] = field(default_factory=dict)


def _torch_facts(python: str, env: dict[str, str]) -> dict[str, Any]:
    code = (
        "import json, torch, tagged_ops\n"
        "cuda = torch.cuda.is_available()\n"
        "print(json.dumps({'torch': torch.__version__, 'cuda_build': torch.version.cuda,\n"
        "  'native_tags': tagged_ops.NATIVE_TAGS, 'cuda_available': cuda,\n"
        "  'gpu': torch.cuda.get_device_name(0) if cuda else None}))"
    )
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise SystemExit(f"cuda_check: this interpreter cannot import torch and tagged_ops:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _driver() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    done = subprocess.run(
        [smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def _pytest_counts(output: str) -> dict[str, int]:
    """pytest's closing tally ("3 passed, 2 skipped in 1.2s") as numbers."""
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|error)", tail)}


def _run(stage: Stage, command: list[str], env: dict[str, str], log: Path) -> str:
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMITS[stage.name])
        output, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        output, rc = out + f"\n[timed out after {LIMITS[stage.name]} s]", None
    stage.seconds = round(time.monotonic() - started, 1)
    log.write_text(f"$ {' '.join(command)}\n{output}")
    if rc is None:
        stage.status, stage.detail = "timed out", f"after {LIMITS[stage.name]} s; log: {log.name}"
    elif rc:
        stage.status, stage.detail = "failed", f"exit {rc}; log: {log.name}"
    else:
        stage.status = "passed"
    return output


def _pytest_stage(
    stage: Stage, python: str, env: dict[str, str], log: Path, args: list[str], *, gpu: bool, jobs: int
) -> None:
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args]
    if jobs > 1:
        command += ["-n", str(jobs)]
    if gpu:
        command.append("--tagged-ops-require-cuda")
    output = _run(stage, command, env, log)
    stage.counts = _pytest_counts(output)
    if stage.status == "passed" and not gpu and not stage.counts.get("passed"):
        stage.status, stage.detail = "no GPU", f"{stage.counts.get('skipped', 0)} CUDA tests skipped"
    elif stage.status == "passed" and gpu and not stage.counts.get("passed"):
        stage.status, stage.detail = "failed", "no test ran"


def _bench_stage(stage: Stage, python: str, env: dict[str, str], log: Path, script: list[str], out: Path) -> None:
    output = _run(stage, [python, *script, "--device", "cuda", "--json", str(out)], env, log)
    if stage.status == "passed" and "no GPU:" in output:
        stage.status, stage.detail = "no GPU", "nothing measured"
    elif stage.status == "passed":
        stage.detail = output.strip().splitlines()[-1][:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="no GPU needed: the same stages, CUDA ones skipping")
    parser.add_argument("--results", type=Path, help="where results go (default: results/cuda, or a temp folder)")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 16), help="pytest-xdist workers")
    args = parser.parse_args(argv)

    python = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.pop("TAGGED_OPS_FALLBACK", None)
    facts = _torch_facts(python, env)
    gpu = bool(facts["cuda_available"])
    if not gpu and not args.dry_run:
        print("cuda_check: no GPU here (torch.cuda.is_available() is False); --dry-run runs the plumbing alone")
        return 1
    results = args.results or (Path(tempfile.mkdtemp(prefix="tagged_ops_cuda_check_")) if args.dry_run else None)
    results = results or ROOT / "results" / "cuda"
    (results / "bench").mkdir(parents=True, exist_ok=True)
    logs = results / "logs"
    logs.mkdir(exist_ok=True)
    release = facts["torch"].split("+")[0]
    stages = [Stage(name) for name in LIMITS]
    by_name = {s.name: s for s in stages}

    started = time.monotonic()
    # 1. self-check
    _run(by_name["self-check"], [python, "-m", "tagged_ops"], env, logs / "self-check.log")
    if by_name["self-check"].status == "passed" and not gpu:
        by_name["self-check"].detail = "CPU only (no GPU)"
    # 2, 3, 4: the suite's CUDA tests on each path, and the C++ CUDA kernels (nvcc), side by side
    suite = ["tests", "-k", "cuda and not test_cuda_kernels"]
    side_by_side = []
    for name, fallback in (("suite, native", False), ("suite, fallback", True)):
        stage = by_name[name]
        if not fallback and not facts["native_tags"]:
            stage.status, stage.detail = "not applicable", f"torch {release} has no native tags"
            continue
        suite_env = dict(env, TAGGED_OPS_RESULTS=str(results / f"{release}{'-fallback' if fallback else ''}.json"))
        if fallback:
            suite_env["TAGGED_OPS_FALLBACK"] = "1"
        log = logs / f"{name.replace(', ', '-')}.log"
        side_by_side.append((stage, suite_env, log, suite))
    cpp = ["tests/test_cpp_kernel.py", "-k", "test_cuda_kernels"]
    workers = max(1, (args.jobs - 1) // max(1, len(side_by_side)))
    with ThreadPoolExecutor(len(side_by_side) + 1) as pool:  # each waits on its own process
        running = [
            pool.submit(_pytest_stage, stage, python, stage_env, log, stage_args, gpu=gpu, jobs=workers)
            for stage, stage_env, log, stage_args in side_by_side
        ]
        running.append(
            pool.submit(
                _pytest_stage, by_name["C++ kernels"], python, env, logs / "cpp-kernels.log", cpp, gpu=gpu, jobs=1
            )
        )
        for done in running:
            done.result()
    # 5, 6. benchmarks on CUDA tensors
    _bench_stage(
        by_name["compiled buffers"],
        python,
        env,
        logs / "compiled-buffers.log",
        ["benchmarks/compiled_buffers.py"],
        results / "bench" / f"compiled-{release}.json",
    )
    _bench_stage(
        by_name["eager cost"],
        python,
        env,
        logs / "eager-cost.log",
        ["benchmarks/eager_overhead.py", "--calls", "2000", "--rounds", "21"],
        results / "bench" / f"eager-{release}.json",
    )

    total = round(time.monotonic() - started, 1)
    ok_statuses = {"passed", "not applicable"} | (set() if gpu else {"no GPU"})
    ok = all(s.status in ok_statuses for s in stages)
    summary = {
        "torch": facts["torch"],
        "torch_build": {"cuda": facts["cuda_build"]},
        "gpu": facts["gpu"],
        "driver": _driver(),
        "dry_run": not gpu,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "date": datetime.date.today().isoformat(),
        "commit": _commit(),
        "seconds": total,
        "passed": ok,
        "stages": [asdict(s) for s in stages],
    }
    (results / f"check-{release}.json").write_text(json.dumps(summary, indent=2) + "\n")
    for s in stages:
        print(f"  {s.name:18s} {s.status:14s} {s.seconds:6.1f} s  {s.detail}")
    tests = {k: sum(s.counts.get(k, 0) for s in stages) for k in ("passed", "failed", "skipped")}
    mode = "dry run (no GPU)" if not gpu else facts["gpu"]
    print(
        f"cuda_check: torch {facts['torch']} on {mode}: {sum(s.status == 'passed' for s in stages)}/{len(stages)} "
        f"stages passed, tests {tests['passed']} passed / {tests['failed']} failed / {tests['skipped']} skipped, "
        f"{total:.0f} s; results in {results}"
    )
    return 0 if ok else 1


def _commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
