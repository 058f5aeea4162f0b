"""Run your own test suite on many torch releases: a reusable nox matrix.

In your noxfile::

    import nox
    from tagged_ops.testing.nox import torch_matrix

    torch_matrix(["2.4.1", "2.8.0", "2.13.0"], deps=["pytest", "numpy"])

That declares one session per release, ``tests-2.4.1`` ..., each of which:

* runs on a Python that release has wheels for (:func:`python_for`; 3.11 where
  it can, since every release from 2.2 to 2.15 has it);
* installs that torch with nox's uv backend into a fresh environment, through the
  one shared uv cache (``UV_CACHE_DIR``), from ``TAGGED_OPS_TORCH_INDEX_URL`` when
  set (a CPU-only index, where one is reachable) or the default index;
* pins NumPy 1 for releases built against it (2.2, 2.3), when NumPy is a dep;
* installs your project (``install=``) without re-resolving torch;
* runs your suite (``command``, default ``python -m pytest``) and writes
  ``<results_dir>/<session>.xml`` (JUnit), one file per session;
* with ``prune=True`` (or ``TAGGED_OPS_PRUNE_ENVS=1``) removes the environment
  afterwards: a CUDA build of torch is 4.5-6.5 GB.

The newest release also gets ``tests-<release>-fallback``: the same suite with
``--tagged-ops-fallback``, your old-torch path on a new torch. Sessions are
tagged ``torch-matrix``; pass ``tags=`` for more. nox is imported only here, so
importing ``tagged_ops.testing`` never needs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

from packaging.version import Version

from .._switches import PRUNE_ENVS_ENV_VAR, TORCH_INDEX_ENV_VAR, env_flag

__all__ = ["NUMPY_1_RELEASES", "PYTHON_RANGES", "install_torch", "python_for", "torch_matrix"]

#: (oldest, newest) CPython minor version with torch wheels, by torch minor release.
PYTHON_RANGES: dict[str, tuple[str, str]] = {
    **{f"2.{m}": ("3.8", "3.12") for m in (2, 3, 4)},
    **{f"2.{m}": ("3.9", "3.13") for m in (5, 6, 7, 8)},
    **{f"2.{m}": ("3.10", "3.14") for m in (9, 10, 11, 12, 13, 14)},
    "2.15": ("3.11", "3.14"),
}
#: torch minor releases built against NumPy 1.x: with NumPy 2 their numpy interop fails to import.
NUMPY_1_RELEASES = frozenset({"2.2", "2.3"})

_PREFERRED_PYTHON = "3.11"


def _minor(release: str) -> str:
    v = Version(release)
    return f"{v.major}.{v.minor}"


def python_for(release: str, prefer: str = _PREFERRED_PYTHON) -> str:
    """A Python version torch ``release`` has wheels for: ``prefer`` when it is in range, else the nearest end.

    >>> from tagged_ops.testing.nox import python_for
    >>> python_for("2.4.1"), python_for("2.15.0", prefer="3.10")
    ('3.11', '3.11')
    """
    low, high = PYTHON_RANGES.get(_minor(release), (prefer, prefer))
    if Version(low) <= Version(prefer) <= Version(high):
        return prefer
    return low if Version(prefer) < Version(low) else high


def install_torch(session: Any, release: str, *deps: str, env: dict[str, str] | None = None) -> None:
    """``session.install`` torch ``release`` and ``deps`` (NumPy 1 pinned where the release needs it).

    >>> from tagged_ops.testing.nox import install_torch
    >>> class Session:  # what nox passes a session function
    ...     def install(self, *args, env):
    ...         print(*args)
    >>> install_torch(Session(), "2.2.2", "pytest", "numpy")
    torch==2.2.2 pytest numpy<2
    """
    pinned = [("numpy<2" if d == "numpy" and _minor(release) in NUMPY_1_RELEASES else d) for d in deps]
    index = os.environ.get(TORCH_INDEX_ENV_VAR)
    # torch from the given index; everything else keeps the default one
    extra = ["--index-url", index, "--extra-index-url", "https://pypi.org/simple"] if index else []
    session.install(*extra, f"torch=={release}", *pinned, env=env or {})


def torch_matrix(
    releases: Sequence[str],
    *,
    deps: Sequence[str] = ("pytest",),
    install: str | None = ".",
    command: Sequence[str] = ("python", "-m", "pytest"),
    fallback: bool = True,
    python: Callable[[str], str] = python_for,
    results_dir: str | os.PathLike[str] = "results",
    prune: bool = False,
    tags: Sequence[str] = (),
    name: str = "tests",
) -> list[str]:
    """Declare one nox session per torch release (and the newest once more, fallback forced).

    Returns the session names. Extra arguments after ``--`` go to ``command``. In a noxfile:

    >>> from tagged_ops.testing.nox import torch_matrix
    >>> torch_matrix(["2.4.1", "2.13.0"], name="docs-tests")
    ['docs-tests-2.4.1', 'docs-tests-2.13.0', 'docs-tests-2.13.0-fallback']
    """
    import nox

    newest = max(releases, key=Version)
    names: list[str] = []

    def declare(release: str, forced: bool) -> None:
        session_name = f"{name}-{release}" + ("-fallback" if forced else "")
        names.append(session_name)

        @nox.session(
            name=session_name, python=python(release), venv_backend="uv", reuse_venv=False, tags=["torch-matrix", *tags]
        )
        def run(session: nox.Session) -> None:
            try:
                install_torch(session, release, *deps)
                if install is not None:
                    session.install("--no-deps", install) if install != "." else session.install("--no-deps", "-e", ".")
                target = Path(results_dir) / f"{session_name}.xml"
                target.parent.mkdir(parents=True, exist_ok=True)
                extra = ["--tagged-ops-fallback"] if forced else []
                is_pytest = list(command[-2:]) == ["-m", "pytest"] or command[-1] == "pytest"
                junit = [f"--junitxml={target}"] if is_pytest else []
                session.run(*command, *extra, *junit, *session.posargs)
            finally:
                if prune or env_flag(PRUNE_ENVS_ENV_VAR):
                    shutil.rmtree(session.virtualenv.location, ignore_errors=True)

        run.__doc__ = f"The suite on torch {release}" + (
            " with the fallback forced (--tagged-ops-fallback)." if forced else "."
        )

    for release in releases:
        declare(release, forced=False)
    if fallback:
        declare(newest, forced=True)
    return names
